#!/usr/bin/env bash
# Installs what vkattn needs on Debian 12 (run as root). Packages come from
# Debian only: the Vulkan loader and headers, volk, glslang, SPIR-V tools,
# the Khronos validation layer and lavapipe (a CPU Vulkan device).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  cmake ninja-build g++ gcc make pkg-config \
  libvulkan-dev libvulkan-volk-dev glslang-tools spirv-tools \
  vulkan-validationlayers mesa-vulkan-drivers \
  libgtest-dev ${VKATTN_EXTRA_PACKAGES:-} >/dev/null
