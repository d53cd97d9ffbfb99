# The three binding examples (examples/java, examples/csharp, examples/go):
# build targets, `run_example_<lang>` targets, and ctest tests (label
# `bindings`). Included by CMakeLists.txt.
set(EX ${PROJECT_SOURCE_DIR}/examples)

# Java: launched from source (java 11+), only the jar on the class path.
add_custom_target(run_example_java
  COMMAND ${CMAKE_COMMAND} -E env ${VKATTN_BINDINGS_ENV}
    ${Java_JAVA_EXECUTABLE} -cp ${B}/java/vkattn.jar ${EX}/java/PagedDecode.java
  DEPENDS vkattn_jar USES_TERMINAL VERBATIM)

# C#: PagedDecode.exe beside Vkattn.dll and libvkattn_csharp.so.
add_custom_command(OUTPUT ${B}/csharp/PagedDecode.exe
  COMMAND ${CMAKE_COMMAND} -DMCS=${MCS} -DFILES=${EX}/csharp/PagedDecode.cs
    -DREFS=${B}/csharp/Vkattn.dll -DTARGET=exe -DOUT=${B}/csharp/PagedDecode.exe
    -P ${CMAKE_CURRENT_SOURCE_DIR}/csharp/mcs.cmake
  DEPENDS ${B}/csharp/Vkattn.dll ${EX}/csharp/PagedDecode.cs
  COMMENT "mcs: PagedDecode.exe" VERBATIM)
add_custom_target(vkattn_csharp_example ALL DEPENDS ${B}/csharp/PagedDecode.exe)
add_custom_target(run_example_csharp
  COMMAND ${CMAKE_COMMAND} -E env ${VKATTN_BINDINGS_ENV} ${MONO} ${B}/csharp/PagedDecode.exe
  DEPENDS vkattn_csharp_example USES_TERMINAL VERBATIM)

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
add_custom_target(run_example_go
  COMMAND ${CMAKE_COMMAND} -E env ${VKATTN_BINDINGS_ENV} ${B}/go/example/paged-decode
  DEPENDS vkattn_go_example USES_TERMINAL VERBATIM)

if(VKATTN_BUILD_TESTS)
  add_test(NAME example.java COMMAND ${Java_JAVA_EXECUTABLE} -cp ${B}/java/vkattn.jar
    ${EX}/java/PagedDecode.java)
  add_test(NAME example.csharp COMMAND ${MONO} ${B}/csharp/PagedDecode.exe)
  add_test(NAME example.go COMMAND ${B}/go/example/paged-decode)
  set_tests_properties(example.java example.csharp example.go PROPERTIES
    LABELS bindings ENVIRONMENT "${VKATTN_BINDINGS_ENV}" TIMEOUT 600
    PASS_REGULAR_EXPRESSION "last output norm: [0-9]")
endif()
