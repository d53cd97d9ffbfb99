# A cross build's bindings (tools/cross.sh): the native libraries of the
# Java and C# bindings for the target, nothing that runs on the host (jar,
# assemblies, tests: the native build makes those, and tools/cross.sh dist
# packs every platform's natives beside them).
#   Java: vkattn_java.dll (Windows) / libvkattn_java.so, the JNI glue, built
#     against the host JDK's jni.h and the target's jni_md.h (Linux's from
#     the JDK; Windows' bindings/java/jni_md/windows, Debian has none).
#   C#: libvkattn_csharp.dll / .so, the P/Invoke side.
#   Go: the module (bindings/go/go.cmake) for the target's GOOS/GOARCH, cgo
#     through the cross compiler; its tests (ctest bindings.go) run under
#     the toolchain's emulator (go test -exec).
if(VKATTN_BINDING_JAVA)
  find_path(VKATTN_JNI_H jni.h PATHS /usr/lib/jvm/default-java/include NO_CMAKE_FIND_ROOT_PATH
    REQUIRED)
  if(WIN32)
    set(jni_md ${CMAKE_CURRENT_SOURCE_DIR}/java/jni_md/windows)
  else()
    set(jni_md ${VKATTN_JNI_H}/linux)
  endif()
  swig_add_library(vkattn_java TYPE SHARED LANGUAGE java SOURCES ${VKATTN_I}
    OUTPUT_DIR ${B}/java/gen/org/vkattn OUTFILE_DIR ${B}/java/wrap)
  set_property(TARGET vkattn_java PROPERTY SWIG_COMPILE_OPTIONS
    -package org.vkattn ${VKATTN_SWIG_COMMON})
  set_target_properties(vkattn_java PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${B}/java
    RUNTIME_OUTPUT_DIRECTORY ${B}/java)
  target_include_directories(vkattn_java PRIVATE ${VKATTN_JNI_H} ${jni_md})
  vkattn_binding_target_setup(vkattn_java)
endif()
if(VKATTN_BINDING_CSHARP)
  swig_add_library(vkattn_csharp TYPE SHARED LANGUAGE csharp SOURCES ${VKATTN_I}
    OUTPUT_DIR ${B}/csharp/gen OUTFILE_DIR ${B}/csharp/wrap)
  set_property(TARGET vkattn_csharp PROPERTY SWIG_COMPILE_OPTIONS
    -namespace Vkattn ${VKATTN_SWIG_COMMON})
  set_target_properties(vkattn_csharp PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${B}/csharp
    RUNTIME_OUTPUT_DIRECTORY ${B}/csharp)
  vkattn_binding_target_setup(vkattn_csharp)
endif()
if(VKATTN_BINDING_GO)
  find_program(GO go REQUIRED)
  include(${CMAKE_CURRENT_SOURCE_DIR}/go/go.cmake)
endif()
if(WIN32 AND TARGET vkattn_java)
  # System.loadLibrary("vkattn_java") looks for vkattn_java.dll there. (The
  # C# side keeps its lib prefix: the one managed assembly, built natively,
  # imports "libvkattn_csharp", which Windows looks for as
  # libvkattn_csharp.dll.)
  set_target_properties(vkattn_java PROPERTIES PREFIX "")
endif()
