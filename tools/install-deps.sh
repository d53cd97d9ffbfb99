#!/usr/bin/env bash
# Installs what vkattn needs on Debian 12 (run as root). Packages come from
# Debian only: the Vulkan loader and headers, volk, glslang, SPIR-V tools,
# shaderc's and glslang's static libraries (libvkattn_shaderc: the GLSL
# compiler of attention variants),
# the Khronos validation layer and lavapipe (a CPU Vulkan device); for the
# Java/C#/Go bindings SWIG, a JDK with JUnit 4, Mono with NUnit 2.6, and Go;
# for the checkers (tools/checks.sh) clang 14 with its sanitizer and
# libFuzzer runtimes, libabigail and valgrind; python3 for tools/compare_bench.py;
# for the Python binding its headers, NumPy, pytest, venv and pip. Takes
# no arguments (VKATTN_EXTRA_PACKAGES adds packages); any is refused.
set -euo pipefail
[ $# -eq 0 ] || { echo "usage: tools/install-deps.sh (no arguments; VKATTN_EXTRA_PACKAGES adds packages)" >&2; exit 2; }
export DEBIAN_FRONTEND=noninteractive
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  cmake ninja-build g++ gcc make pkg-config \
  libvulkan-dev libvulkan-volk-dev glslang-tools spirv-tools \
  libshaderc-dev glslang-dev \
  vulkan-validationlayers mesa-vulkan-drivers \
  libgtest-dev python3 doxygen \
  python3-dev python3-numpy python3-pytest python3-venv python3-pip \
  swig default-jdk junit4 mono-mcs mono-runtime nunit-console libnunit-cil-dev golang-go \
  clang-14 libclang-rt-14-dev abigail-tools valgrind \
  ${VKATTN_EXTRA_PACKAGES:-} >/dev/null
