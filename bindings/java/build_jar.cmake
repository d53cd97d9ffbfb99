# cmake -P: compiles the generated and hand-written Java sources (their
# names depend on vkattn.i, hence the glob at build time) and packs them
# with the native libraries into one jar.
#   -DJAVAC -DJAR -DSOURCES (generated dir) -DHAND (dir with org/vkattn/*.java)
#   -DCLASSES (scratch dir) -DNATIVE1 -DNATIVE2 (libvkattn_java.so, libvkattn.so.N) -DOUT
#   -DPLATFORM (the natives' folder in the jar, org/vkattn/native/<os>-<arch>:
#   NativeLoader.platform(); tools/cross.sh dist adds the other platforms')
file(GLOB_RECURSE gen ${SOURCES}/*.java)
file(GLOB hand ${HAND}/org/vkattn/*.java)
file(REMOVE_RECURSE ${CLASSES})
file(MAKE_DIRECTORY ${CLASSES}/org/vkattn/native/${PLATFORM})
execute_process(COMMAND ${JAVAC} -nowarn -encoding UTF-8 --release 11 -d ${CLASSES} ${gen} ${hand}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "javac failed")
endif()
foreach(lib ${NATIVE1} ${NATIVE2})
  get_filename_component(name ${lib} NAME)
  file(COPY_FILE ${lib} ${CLASSES}/org/vkattn/native/${PLATFORM}/${name})
endforeach()
execute_process(COMMAND ${JAR} cf ${OUT} -C ${CLASSES} . RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "jar failed")
endif()
