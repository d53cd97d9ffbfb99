# The Go binding (included by bindings/CMakeLists.txt, native and cross
# builds alike).
# ---- Go: module vkattn assembled in build/bindings/go/vkattn ------------
# cgo compiles the SWIG wrapper inside the package (it calls a Go export to
# panic), so the STATIC library only generates and compile-checks it.
set(GO_MOD ${B}/go/vkattn)
set(GO_RAW ${GO_MOD}/internal/vkattnraw)
swig_add_library(vkattn_go TYPE STATIC LANGUAGE go SOURCES ${VKATTN_I}
  OUTPUT_DIR ${GO_RAW} OUTFILE_DIR ${GO_RAW})
set_property(TARGET vkattn_go PROPERTY SWIG_COMPILE_OPTIONS
  -cgo -intgosize 64 ${VKATTN_SWIG_COMMON})
set_target_properties(vkattn_go PROPERTIES C_STANDARD 11)
target_include_directories(vkattn_go PRIVATE ${GO_RAW})
target_compile_options(vkattn_go PRIVATE -Wno-unused-function -Wno-unused-parameter)
add_custom_target(vkattn_go_header
  COMMAND ${CMAKE_COMMAND} -E make_directory ${GO_RAW}
  COMMAND ${CMAKE_COMMAND} -E copy_if_different ${PROJECT_SOURCE_DIR}/include/vkattn/vkattn.h
    ${GO_RAW}/vkattn.h)
add_dependencies(vkattn_go vkattn_go_header vkattn)
configure_file(go/go.mod.in ${GO_MOD}/go.mod COPYONLY)
set(GO_FILES ${GO_MOD}/go.mod)
foreach(f vkattn vkattn_test vkattn_kv_test vkattn_step vkattn_step_test vkattn_rope
    vkattn_quant vkattn_models_test vkattn_args_test vkattn_log vkattn_log_test
    vkattn_variant_test)
  configure_file(go/${f}.go ${GO_MOD}/${f}.go COPYONLY)
  list(APPEND GO_FILES ${GO_MOD}/${f}.go)
endforeach()
configure_file(go/vkattn_log.c ${GO_MOD}/vkattn_log.c COPYONLY)  # (vkattn_log.go's C side)
list(APPEND GO_FILES ${GO_MOD}/vkattn_log.c)
configure_file(go/version.go.in ${GO_MOD}/version.go @ONLY)  # ModuleVersion
list(APPEND GO_FILES ${GO_MOD}/version.go)

# Environment for every go command: no network, caches in the build tree,
# libvkattn found at link time and at run time.
# The package links with `#cgo pkg-config: vkattn`: here a vkattn.pc of
# the build tree; installed, the prefix's (PKG_CONFIG_PATH).
if(WIN32)
  # The import library by name (a static link of everything else, -static,
  # would not take it as -lvkattn); Windows finds vkattn.dll on PATH
  # (tools/run-windows.sh's WINEPATH).
  set(go_libs "$<TARGET_LINKER_FILE:vkattn>")
else()
  set(go_libs "-L$<TARGET_FILE_DIR:vkattn> -Wl,-rpath,$<TARGET_FILE_DIR:vkattn> -lvkattn")
endif()
file(GENERATE OUTPUT ${B}/go/pkgconfig/vkattn.pc CONTENT "Name: vkattn
Description: vkattn (build tree)
Version: ${PROJECT_VERSION}
Libs: ${go_libs}
Cflags: -I${PROJECT_SOURCE_DIR}/include
")
set(VKATTN_GO_ENV
  "GOPROXY=off" "GOFLAGS=-mod=mod" "GO111MODULE=on" "GOTOOLCHAIN=local"
  "GOCACHE=${B}/go/cache" "GOPATH=${B}/go/path" "HOME=${B}/go"
  "PKG_CONFIG_PATH=${B}/go/pkgconfig")
set(VKATTN_GO_EXEC "")
if(CMAKE_CROSSCOMPILING)
  # The target's GOOS and GOARCH, cgo through the cross compiler; go test
  # runs its test binary under the toolchain's emulator (-exec).
  if(WIN32)
    set(goos windows)
  else()
    set(goos linux)
  endif()
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
    set(goarch arm64)
  else()
    set(goarch amd64)
  endif()
  list(APPEND VKATTN_GO_ENV "GOOS=${goos}" "GOARCH=${goarch}" "CGO_ENABLED=1"
    "CC=${CMAKE_C_COMPILER}" "VKATTN_CROSS_BUILD_DIR=${CMAKE_BINARY_DIR}")
  if(WIN32)  # (mingw's winpthread and C runtime linked in, as every program's)
    list(APPEND VKATTN_GO_ENV "CGO_LDFLAGS=-static")
  endif()
  set(VKATTN_GO_EXEC ${CMAKE_CROSSCOMPILING_EMULATOR})
endif()
# cmake --install: share/go/vkattn, the module with its generated files
# (require vkattn + replace vkattn => <prefix>/share/go/vkattn; GOPROXY=off
# works; cgo finds libvkattn with pkg-config).
install(DIRECTORY ${GO_MOD}/ DESTINATION ${CMAKE_INSTALL_DATADIR}/go/vkattn COMPONENT go
  FILES_MATCHING PATTERN "*.go" PATTERN "go.mod" PATTERN "*.c" PATTERN "*.h"
  PATTERN "*_test.go" EXCLUDE)
add_custom_command(OUTPUT ${B}/go/vet.stamp
  COMMAND ${CMAKE_COMMAND} -E env ${VKATTN_GO_ENV} ${GO} vet .
  COMMAND ${CMAKE_COMMAND} -E touch ${B}/go/vet.stamp
  WORKING_DIRECTORY ${GO_MOD}
  DEPENDS vkattn_go ${GO_FILES}
  COMMENT "go vet: vkattn (the hand-written package; SWIG output is not vet-clean)" VERBATIM)
add_custom_target(vkattn_go_vet ALL DEPENDS ${B}/go/vet.stamp)

if(VKATTN_BUILD_TESTS)
  string(REPLACE ";" "|" VKATTN_GO_ENV_ARG "${VKATTN_GO_ENV}")
  add_test(NAME bindings.go
    COMMAND ${CMAKE_COMMAND} -DGO=${GO} "-DENV=${VKATTN_GO_ENV_ARG}" -DDIR=${GO_MOD}
      -DEXEC=${VKATTN_GO_EXEC} -P ${CMAKE_CURRENT_SOURCE_DIR}/go/go_test.cmake)

  set_tests_properties(bindings.go PROPERTIES
    LABELS bindings ENVIRONMENT "${VKATTN_BINDINGS_ENV}" TIMEOUT 900)
endif()
