# Debian packages with CPack (`cpack -G DEB` in the build tree, or
# `cmake --build build --target package`):
#   libvkattn0     the shared library (component runtime)
#   libvkattn-dev  header, libvkattn.so link, CMake package, pkg-config file
#                  (component dev)
#   vkattn-tools   vkattn-info, vkattn-bench and the bench's plot and compare
#                  scripts (component tools)
# Installed under /usr. The library loads the Vulkan loader at run time
# (volk), so its dependency on libvulkan1 is declared here, not found by
# dpkg-shlibdeps; a Vulkan driver is recommended (lavapipe is one).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME vkattn)
set(CPACK_PACKAGE_VENDOR vkattn)
set(CPACK_PACKAGE_CONTACT "vkattn developers <vkattn@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "LLM attention as Vulkan compute shaders behind a C ABI")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev tools)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://github.com/vkattn/vkattn")
set(CPACK_DEBIAN_ENUM_COMPONENTS runtime dev tools)
# A cross build's packages are its target's (dpkg --print-architecture
# would say the host's): tools/cross.sh dist packs the aarch64 build.
if(CMAKE_CROSSCOMPILING AND CMAKE_SYSTEM_PROCESSOR STREQUAL aarch64)
  set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE arm64)
endif()

set(vkattn_deb_version "${PROJECT_VERSION}")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libvkattn${PROJECT_VERSION_MAJOR})
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS
  "libvulkan1 (>= 1.3.239), libc6 (>= 2.34), libstdc++6 (>= 12), libgcc-s1")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_RECOMMENDS "mesa-vulkan-drivers | vulkan-icd")
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
  "vkattn: LLM attention as Vulkan compute shaders (shared library)
 Masked scaled-dot-product attention (causal, window, masks, ALiBi, softcap,
 GQA/MQA), a paged KV cache and continuous-batching steps on any Vulkan 1.2+
 device, including Mesa's lavapipe on a CPU.")
# A shlibs file, and postinst/postrm scripts that run ldconfig.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libvkattn-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libvkattn${PROJECT_VERSION_MAJOR} (= ${vkattn_deb_version})")
set(CPACK_DEBIAN_DEV_PACKAGE_SUGGESTS "pkg-config, cmake")
set(CPACK_DEBIAN_DEV_DESCRIPTION
  "vkattn: LLM attention as Vulkan compute shaders (development files)
 The C99 header vkattn/vkattn.h, the libvkattn.so link, the CMake package
 (find_package(vkattn)) and the pkg-config file (vkattn.pc).")

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME vkattn-tools)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION utils)
# Both tools carry vkattn statically (they report the device table's
# internal choices), so they need the loader, not libvkattn0.
set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS
  "libvulkan1 (>= 1.3.239), libc6 (>= 2.34), libstdc++6 (>= 12), libgcc-s1")
set(CPACK_DEBIAN_TOOLS_PACKAGE_RECOMMENDS "python3, python3-matplotlib")
set(CPACK_DEBIAN_TOOLS_DESCRIPTION
  "vkattn: LLM attention as Vulkan compute shaders (tools)
 vkattn-info (devices, kernel choices, --json), vkattn-bench (GPU-timed cases
 against the device's measured peaks, --json) and vkattn-plot-bench /
 vkattn-compare-bench for its JSON files.")

include(CPack)
