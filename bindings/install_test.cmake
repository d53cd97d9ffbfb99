# ctest bindings.installed: installs the build into WORK/prefix
# (cmake --install, every component), then builds and runs each enabled
# language's example from that prefix only: Java (javac/java with the
# installed jar), C# (mcs/mono with the installed assembly), Go (a module
# that requires vkattn from <prefix>/share/go, GOPROXY=off, cgo through the
# prefix's pkg-config file), Python (PYTHONPATH=<prefix>/lib/python3.
# X/dist-packages). Each must print the example's "last output norm".
# Arguments: BUILD, WORK, EX (examples/), LANGS ("java|csharp|go|python"),
# JAVAC, JAVA, MCS, MONO, GO, PYTHON.
cmake_policy(VERSION 3.25)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
string(REPLACE "|" ";" LANGS "${LANGS}")
include(${CMAKE_CURRENT_LIST_DIR}/run_step.cmake)
# Runs an example: exit 0 and its last line printed.
function(run_example)
  run(${ARGN})
  if(NOT last_out MATCHES "last output norm: [0-9]")
    message(FATAL_ERROR "no output norm from: ${ARGN}\n${last_out}")
  endif()
endfunction()
set(P ${WORK}/prefix)
run(${CMAKE_COMMAND} --install ${BUILD} --prefix ${P})
file(GLOB libdirs ${P}/lib*)
list(GET libdirs 0 LIBDIR)  # lib (GNUInstallDirs' choice for this prefix)
unset(ENV{PYTHONPATH})
unset(ENV{LD_LIBRARY_PATH})
unset(ENV{PKG_CONFIG_PATH})
unset(ENV{CGO_LDFLAGS})

if("java" IN_LIST LANGS)
  foreach(f ${P}/share/java/vkattn.jar
            ${P}/share/maven-repo/org/vkattn/vkattn/${VERSION}/vkattn-${VERSION}.pom)
    if(NOT EXISTS ${f})
      message(FATAL_ERROR "not installed: ${f}")
    endif()
  endforeach()
  message("== java")
  run(${JAVAC} -d ${WORK}/java -cp ${P}/share/java/vkattn.jar ${EX}/java/PagedDecode.java)
  run_example(${JAVA} -cp ${P}/share/java/vkattn.jar:${WORK}/java PagedDecode)
endif()

if("csharp" IN_LIST LANGS)
  message("== csharp")
  run(${MCS} -nologo -r:${LIBDIR}/cli/vkattn/Vkattn.dll -out:${WORK}/PagedDecode.exe
      ${EX}/csharp/PagedDecode.cs)
  set(ENV{MONO_PATH} ${LIBDIR}/cli/vkattn)
  run_example(${MONO} ${WORK}/PagedDecode.exe)
  unset(ENV{MONO_PATH})
endif()

if("go" IN_LIST LANGS)
  message("== go")
  file(MAKE_DIRECTORY ${WORK}/go)
  file(WRITE ${WORK}/go/go.mod "module consumer\n\ngo 1.19\n\nrequire vkattn v0.0.0\n\nreplace vkattn => ${P}/share/go/vkattn\n")
  file(COPY ${EX}/go/main.go DESTINATION ${WORK}/go)
  set(ENV{GOPROXY} off)
  set(ENV{GOFLAGS} -mod=mod)
  set(ENV{GOTOOLCHAIN} local)
  set(ENV{GOCACHE} ${WORK}/gocache)
  set(ENV{GOPATH} ${WORK}/gopath)
  set(ENV{HOME} ${WORK})
  set(ENV{PKG_CONFIG_PATH} ${LIBDIR}/pkgconfig)
  execute_process(COMMAND ${GO} build -o ${WORK}/go/paged-decode . WORKING_DIRECTORY ${WORK}/go
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "go build failed (${rc}):\n${out}\n${err}")
  endif()
  set(ENV{LD_LIBRARY_PATH} ${LIBDIR})
  run_example(${WORK}/go/paged-decode)
  unset(ENV{LD_LIBRARY_PATH})
  unset(ENV{PKG_CONFIG_PATH})
endif()

if("python" IN_LIST LANGS)
  message("== python")
  file(GLOB pydirs ${LIBDIR}/python3.*/dist-packages)
  set(ENV{PYTHONPATH} ${pydirs})
  run(${PYTHON} -c "import vkattn; assert vkattn.__file__.startswith('${P}'), vkattn.__file__; print(vkattn.__file__)")
  run_example(${PYTHON} ${EX}/python/paged_decode.py)
  unset(ENV{PYTHONPATH})
endif()
