# Linux aarch64 with Debian's cross compiler (g++-aarch64-linux-gnu), run
# under qemu-user over arm64 Mesa unpacked into a sysroot (not a multiarch
# install):
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake
# (tools/cross.sh aarch64 build DIR does this). The library needs no arm64
# library at build time (volk opens the Vulkan loader at run time);
# tools/run-aarch64.sh is the emulator: ctest and the tests' discovery run
# under it.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)  # (the host's Vulkan and volk headers serve)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
get_filename_component(_vkattn_root "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)
set(CMAKE_CROSSCOMPILING_EMULATOR "${_vkattn_root}/tools/run-aarch64.sh")
