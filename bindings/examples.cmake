# The binding examples (examples/java, examples/csharp, examples/go,
# examples/python), each built where its language's option is on:
# build targets, `run_example_<lang>` targets, and ctest tests (label
# `bindings`). Included by CMakeLists.txt.
set(EX ${PROJECT_SOURCE_DIR}/examples)

# run_example_<lang> (a target, after DEPENDS) and ctest example.<lang> run
# the same command with the environment ENV; the test wants the example's
# last line.
function(vkattn_binding_example lang)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "DEPENDS;ENV;COMMAND")
  add_custom_target(run_example_${lang}
    COMMAND ${CMAKE_COMMAND} -E env ${arg_ENV} ${arg_COMMAND}
    DEPENDS ${arg_DEPENDS} USES_TERMINAL VERBATIM)
  if(VKATTN_BUILD_TESTS)
    add_test(NAME example.${lang} COMMAND ${arg_COMMAND})
    set_tests_properties(example.${lang} PROPERTIES
      LABELS bindings ENVIRONMENT "${arg_ENV}" TIMEOUT 600
      PASS_REGULAR_EXPRESSION "last output norm: [0-9]")
  endif()
endfunction()

if(VKATTN_BINDING_JAVA)
  # Java: launched from source (java 11+), only the jar on the class path.
  vkattn_binding_example(java DEPENDS vkattn_jar ENV ${VKATTN_BINDINGS_ENV}
    COMMAND ${Java_JAVA_EXECUTABLE} -cp ${B}/java/vkattn.jar ${EX}/java/PagedDecode.java)
endif()

if(VKATTN_BINDING_CSHARP)
  # C#: PagedDecode.exe beside Vkattn.dll and libvkattn_csharp.so.
  add_custom_command(OUTPUT ${B}/csharp/PagedDecode.exe
    COMMAND ${CMAKE_COMMAND} -DMCS=${MCS} -DFILES=${EX}/csharp/PagedDecode.cs
      -DREFS=${B}/csharp/Vkattn.dll -DTARGET=exe -DOUT=${B}/csharp/PagedDecode.exe
      -P ${CMAKE_CURRENT_SOURCE_DIR}/csharp/mcs.cmake
    DEPENDS ${B}/csharp/Vkattn.dll ${EX}/csharp/PagedDecode.cs
    COMMENT "mcs: PagedDecode.exe" VERBATIM)
  add_custom_target(vkattn_csharp_example ALL DEPENDS ${B}/csharp/PagedDecode.exe)
  vkattn_binding_example(csharp DEPENDS vkattn_csharp_example ENV ${VKATTN_BINDINGS_ENV}
    COMMAND ${MONO} ${B}/csharp/PagedDecode.exe)
endif()

if(VKATTN_BINDING_GO)
  # Go: a module of its own that requires vkattn through a replace directive.
  set(GO_MOD_DIR ${GO_MOD})
  string(CONFIGURE [[module vkattn-example

go 1.19

require vkattn v0.0.0

replace vkattn => @GO_MOD_DIR@
]] go_example_mod @ONLY)
  file(GENERATE OUTPUT ${B}/go/example/go.mod CONTENT "${go_example_mod}")
  configure_file(${EX}/go/main.go ${B}/go/example/main.go COPYONLY)
  add_custom_command(OUTPUT ${B}/go/example/paged-decode
    COMMAND ${CMAKE_COMMAND} -E env ${VKATTN_GO_ENV} ${GO} build -o paged-decode .
    WORKING_DIRECTORY ${B}/go/example
    DEPENDS vkattn_go ${GO_FILES} ${B}/go/example/main.go
    COMMENT "go build: paged-decode" VERBATIM)
  add_custom_target(vkattn_go_example ALL DEPENDS ${B}/go/example/paged-decode)
  vkattn_binding_example(go DEPENDS vkattn_go_example ENV ${VKATTN_BINDINGS_ENV}
    COMMAND ${B}/go/example/paged-decode)
endif()

if(VKATTN_BINDING_PYTHON)
  # Python: the package from the build tree (PYTHONPATH), run as a script.
  vkattn_binding_example(python DEPENDS vkattn_python ENV ${VKATTN_BINDINGS_ENV} ${VKATTN_PYTHON_ENV}
    COMMAND ${Python3_EXECUTABLE} ${EX}/python/paged_decode.py)
endif()
