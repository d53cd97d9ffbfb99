#!/usr/bin/env bash
# Runs an aarch64 program of a cross build (tools/cross.sh aarch64 build
# DIR) under qemu-user, on arm64 lavapipe from a sysroot of Debian's arm64
# packages (tools/cross.sh aarch64 deps; not a multiarch install):
#   tools/run-aarch64.sh PROGRAM [ARGS...]
# VKATTN_AARCH64_MESA=12 (default: Debian 12's Mesa 22.3, LLVM 15) or 26
# (Debian 13's Mesa 26.1, LLVM 19, with its glibc: a bookworm-built program
# runs on it). The build folder is $VKATTN_CROSS_BUILD_DIR, else the current
# folder (or the nearest one above it holding a cross build's sysroot
# link); its libvkattn.so is on the library path, so programs built
# outside the project against it run too. Exits with the program's status
# and passes its output through.
#
# qemu is called explicitly (binfmt_misc is not needed); -L makes the
# sysroot the program's root for its loader, its libraries and the Vulkan
# driver the ICD file names. Only lavapipe's ICD is offered.
#
# The toolchain's CMAKE_CROSSCOMPILING_EMULATOR (ctest and the tests'
# discovery call it) and Go's `go test -exec`.
set -u
usage() { echo "usage: tools/run-aarch64.sh PROGRAM [ARGS...] (VKATTN_AARCH64_MESA=12|26; build folder: \$VKATTN_CROSS_BUILD_DIR or the current folder)" >&2; exit 2; }
[ $# -ge 1 ] || usage
case "$1" in -h | --help) usage ;; esac
prog=$1
shift
cross=${VKATTN_CROSS_DIR:-/opt/vkattn-cross}
mesa=${VKATTN_AARCH64_MESA:-12}
case "$mesa" in
  12) sysroot=$cross/arm64-bookworm ;;
  26) sysroot=$cross/arm64-trixie ;;
  *) echo "run-aarch64: VKATTN_AARCH64_MESA=$mesa is neither 12 nor 26" >&2; exit 2 ;;
esac
find_build() {
  local d
  if [ -n "${VKATTN_CROSS_BUILD_DIR:-}" ]; then
    d=$(cd "$VKATTN_CROSS_BUILD_DIR" 2>/dev/null && pwd) ||
      { echo "run-aarch64: VKATTN_CROSS_BUILD_DIR=$VKATTN_CROSS_BUILD_DIR is not a folder" >&2; exit 2; }
    echo "$d"
    return
  fi
  d=$PWD
  while [ "$d" != / ]; do
    [ -e "$d/sysroot-12" ] && [ -f "$d/CMakeCache.txt" ] && { echo "$d"; return; }
    d=$(dirname "$d")
  done
  echo "$PWD"
}
build=$(find_build)
# The build's link wins (cross.sh build makes it), else the deps' folder.
[ -e "$build/sysroot-$mesa" ] && sysroot=$(cd "$build/sysroot-$mesa" && pwd -P)
# (Mesa 22.3 names the file by architecture, 26.1 does not.)
icd=/usr/share/vulkan/icd.d/lvp_icd.aarch64.json
[ -f "$sysroot$icd" ] || icd=/usr/share/vulkan/icd.d/lvp_icd.json
[ -f "$sysroot$icd" ] || {
  echo "run-aarch64: no arm64 lavapipe in $sysroot (bash tools/cross.sh aarch64 deps)" >&2
  exit 2
}
qemu=$(command -v qemu-aarch64-static || command -v qemu-aarch64) ||
  { echo "run-aarch64: qemu-user is not installed (bash tools/cross.sh aarch64 deps)" >&2; exit 2; }
[ -e "$prog" ] || { echo "run-aarch64: no program $prog" >&2; exit 2; }

export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
# (qemu reads its own environment; the program gets it too.)
export VK_ICD_FILENAMES=$icd VK_DRIVER_FILES=$icd
export LD_LIBRARY_PATH=$build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# The sysroot's validation layer, where it has one; no implicit layers.
export VK_LAYER_PATH=/usr/share/vulkan/explicit_layer.d VK_IMPLICIT_LAYER_PATH=
exec "$qemu" -L "$sysroot" "$prog" "$@"
