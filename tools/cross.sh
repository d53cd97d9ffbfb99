#!/usr/bin/env bash
# Cross builds of vkattn with Debian 12's own tools, and their tests:
#   bash tools/cross.sh windows-x64|aarch64 deps
#   bash tools/cross.sh windows-x64|aarch64 build|test|all BUILD_DIR
#   bash tools/cross.sh dist DIST_DIR NATIVE_BUILD WIN_BUILD ARM64_BUILD
#
# windows-x64: mingw-w64 (cmake/toolchains/x86_64-w64-mingw32.cmake), run
#   under wine64 on this machine's lavapipe (tools/run-windows.sh: its own
#   Xvfb and wineserver). BUILD_DIR gets vkattn.dll, libvkattn.dll.a, the
#   examples and tools as .exe, the test programs, and the wine prefix
#   (BUILD_DIR/wine).
# aarch64: aarch64-linux-gnu-g++ (cmake/toolchains/aarch64-linux-gnu.cmake),
#   run under qemu-user over arm64 lavapipe (tools/run-aarch64.sh): Debian
#   12's Mesa 22.3 and Debian 13's Mesa 26.1, each unpacked into a sysroot
#   under $VKATTN_CROSS_DIR (default /opt/vkattn-cross; never a multiarch
#   install). BUILD_DIR gets libvkattn.so* for aarch64, the examples, the
#   test programs and links to both sysroots (sysroot-12, sysroot-26).
#
# deps   installs the Debian packages (the host's build tools too) and, for
#        aarch64, fetches the sysroots; idempotent.
# build  configures and builds in BUILD_DIR (any path) the library, the
#        examples and the tests; prepares the wine prefix or the links.
# test   the checks: windows-x64 runs the C and C++ examples and ctest -L unit
#        plus the Attention, KvCacheTest and StepAttentionTest suites under
#        wine (VKATTN_CROSS_QUICK=1: the examples and ctest -L unit only,
#        what CI runs); aarch64 runs the examples and the unit tests that
#        create no device under qemu over Mesa 12, and one call of every
#        cache dtype over both Mesas. A folder built with
#        VKATTN_CROSS_QUICK=1 holds only the quick set: `test` without it
#        refuses that folder (exit 2) instead of finding nothing to run.
# all    deps, build, test.
# dist   what a release ships, into DIST_DIR (docs/guide/getting-started.md,
#        "Windows" and "aarch64").
# Arguments are checked before anything is installed or built (a bad one:
# usage, exit 2).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cross=${VKATTN_CROSS_DIR:-/opt/vkattn-cross}
usage() {
  sed -n '3,5p' "$0" | sed 's/^# \{0,1\}/usage: /' >&2
  exit 2
}
[ $# -ge 1 ] || usage
target=$1
case "$target" in
  windows-x64 | aarch64)
    [ $# -ge 2 ] || usage
    action=$2
    case "$action" in
      deps) [ $# -eq 2 ] || usage ;;
      build | test | all) [ $# -eq 3 ] && [ -n "$3" ] || usage ;;
      *) echo "cross.sh: no action \"$action\" (deps, build, test, all)" >&2; usage ;;
    esac
    ;;
  dist) [ $# -eq 5 ] || usage ;;
  *) echo "cross.sh: no target \"$target\" (windows-x64, aarch64, dist)" >&2; usage ;;
esac

SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
# The host's build tools, and for the bindings' natives SWIG, the JDK's
# jni.h and Go.
host_packages="cmake ninja-build g++ make pkg-config python3 libvulkan-dev libvulkan-volk-dev
  glslang-tools spirv-tools googletest mesa-vulkan-drivers vulkan-validationlayers swig
  default-jdk-headless golang-go"
apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  # shellcheck disable=SC2086
  $SUDO apt-get install -y -qq --no-install-recommends $host_packages "$@" >/dev/null
}

# Fetches Debian's arm64 lavapipe, loader and validation layer of SUITES
# into DIR (a sysroot: the packages unpacked, nothing installed), once.
fetch_sysroot() { # DIR SUITES [apt-get -t RELEASE]
  local dir=$1 suites=$2 release=${3:-}
  [ -f "$dir/.vkattn-sysroot" ] && return 0
  local tmp=$dir.partial
  rm -rf "$tmp" && mkdir -p "$tmp"
  (
    # shellcheck source=tools/debian13-apt.sh
    . "$root/tools/debian13-apt.sh"
    debian_apt_config "$tmp/apt" "$suites" arm64
    apt-get update -q >"$tmp/apt.log" 2>&1
    apt-get install --download-only -y -q ${release:+-t "$release"} mesa-vulkan-drivers \
      libvulkan1 vulkan-validationlayers >>"$tmp/apt.log" 2>&1
  ) || { echo "cross.sh: fetching arm64 packages of $suites failed ($tmp/apt.log)" >&2; exit 1; }
  mkdir -p "$tmp/root"
  for d in "$tmp"/apt/var/cache/apt/archives/*.deb; do dpkg-deb -x "$d" "$tmp/root"; done
  # Debian 13 is merged-/usr (its loader is /usr/lib/ld-linux-aarch64.so.1,
  # reached as /lib/...): the links base-files would make.
  for d in lib bin sbin; do
    [ -e "$tmp/root/$d" ] || [ ! -d "$tmp/root/usr/$d" ] || ln -s "usr/$d" "$tmp/root/$d"
  done
  # Only the validation layer among the explicit layers (Mesa's overlay,
  # screenshot and null-hardware layers are not wanted, and under qemu the
  # loader fails to open some of them: a message the tests count).
  find "$tmp/root/usr/share/vulkan/explicit_layer.d" -name '*.json' ! -name '*khronos_validation*' \
    -delete 2>/dev/null || true
  rm -rf "$dir"
  mv "$tmp/root" "$dir"
  dpkg-deb -f "$(ls "$tmp"/apt/var/cache/apt/archives/mesa-vulkan-drivers_*.deb)" Version \
    >"$dir/.vkattn-sysroot"
  rm -rf "$tmp"
  echo "cross.sh: arm64 sysroot $dir (mesa-vulkan-drivers $(cat "$dir/.vkattn-sysroot"))"
}

deps() {
  case "$target" in
    windows-x64) apt_install g++-mingw-w64-x86-64-posix wine64 xvfb xauth ;;
    aarch64)
      apt_install g++-aarch64-linux-gnu qemu-user-static dpkg-dev
      $SUDO mkdir -p "$cross"
      fetch_sysroot "$cross/arm64-bookworm" "bookworm bookworm-updates"
      # (CI's quick checks run over Debian 12's Mesa only.)
      [ "${VKATTN_CROSS_QUICK:-}" = 1 ] ||
        fetch_sysroot "$cross/arm64-trixie" "trixie trixie-backports" trixie-backports
      ;;
  esac
}

# The test programs of ctest's label `unit` (their names in tests/CMakeLists.txt).
unit_programs() {
  sed -n 's/^vkattn_add_gtest(\(test_[a-z0-9_]*\) LABEL unit.*/\1/p' "$root/tests/CMakeLists.txt"
}

toolchain() {
  case "$target" in
    windows-x64) echo "$root/cmake/toolchains/x86_64-w64-mingw32.cmake" ;;
    aarch64) echo "$root/cmake/toolchains/aarch64-linux-gnu.cmake" ;;
  esac
}

build() {
  local dir=$1
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_TOOLCHAIN_FILE="$(toolchain)" -DVKATTN_BINDING_JAVA=ON -DVKATTN_BINDING_CSHARP=ON \
    -DVKATTN_BINDING_GO=ON >"$dir/configure.log" ||
    { cat "$dir/configure.log"; exit 1; }
  # The library, the examples and tools, the tests' programs, the Java and
  # C# natives and the Go module (VKATTN_CROSS_QUICK=1: what CI runs, the
  # library, examples and the unit tests' programs).
  # (.vkattn-cross-build says which, for `test`.)
  if [ "${VKATTN_CROSS_QUICK:-}" = 1 ]; then
    cmake --build "$dir" -j"$(nproc)" --target vkattn attention chunked_prefill interop \
      continuous_batching vkattn-info vkattn-bench vkattn-tune $(unit_programs "$dir")
    echo quick >"$dir/.vkattn-cross-build"
  else
    cmake --build "$dir" -j"$(nproc)"
    echo full >"$dir/.vkattn-cross-build"
  fi
  case "$target" in
    windows-x64)
      if [ ! -f "$dir/wine/system.reg" ]; then
        echo "cross.sh: a wine prefix in $dir/wine (once, about 30 s)"
        rm -rf "$dir/wine"
        WINEPREFIX=$dir/wine WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml=" \
          xvfb-run -a /usr/lib/wine/wine64 wineboot --init >"$dir/wine-init.log" 2>&1 ||
          { cat "$dir/wine-init.log"; exit 1; }
        # (The registry reaches the disk when the prefix's wineserver ends.)
        WINEPREFIX=$dir/wine /usr/lib/wine/wineserver -w
      fi
      ;;
    aarch64)
      ln -sfn "$cross/arm64-bookworm" "$dir/sysroot-12"
      [ ! -d "$cross/arm64-trixie" ] || ln -sfn "$cross/arm64-trixie" "$dir/sysroot-26"
      ;;
  esac
  echo "cross.sh: $target build in $dir"
}

qemu_skip='^(Q4Accuracy|QuantAccuracy)\.'

run_test() {
  local dir
  dir=$(cd "$1" && pwd)
  # A quick build holds only the unit tests' programs: the full checks
  # would find no Attention tests and no Go module there.
  if [ "${VKATTN_CROSS_QUICK:-}" != 1 ] && [ "$(cat "$dir/.vkattn-cross-build" 2>/dev/null)" = quick ]; then
    echo "cross.sh: $dir was built with VKATTN_CROSS_QUICK=1 (the library, the examples and the" \
      "unit tests only); build it without: bash tools/cross.sh $target build $1" >&2
    exit 2
  fi
  export VKATTN_CROSS_BUILD_DIR=$dir XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
  case "$target" in
    windows-x64)
      local run=$root/tools/run-windows.sh
      for ex in attention chunked_prefill interop continuous_batching vkattn-info; do
        echo "== wine: $ex"
        "$run" "$dir/examples/$ex.exe" >"$dir/example-$ex.log" 2>&1 ||
          { tail -n 20 "$dir/example-$ex.log"; echo "cross.sh: $ex failed under wine" >&2; exit 1; }
        tail -n 1 "$dir/example-$ex.log"
      done
      # A C11 program built outside the project against the import library,
      # defining nothing (the header's dllimport is the default).
      echo "== wine: a C11 consumer of libvkattn.dll.a"
      mkdir -p "$dir/consumer"
      x86_64-w64-mingw32-gcc-posix -std=c11 -O1 -I "$root/include" "$root/examples/c/attention.c" \
        "$dir/libvkattn.dll.a" -o "$dir/consumer/attention.exe" -static
      "$run" "$dir/consumer/attention.exe" | tail -n 1
      (cd "$dir" && ctest -L unit --timeout 900 --output-on-failure)
      [ "${VKATTN_CROSS_QUICK:-}" = 1 ] && return 0
      (cd "$dir" && ctest -R '^(Attention|KvCacheTest|StepAttentionTest)\.|^bindings\.go$' -LE slow \
        --timeout 900 --output-on-failure)
      ;;
    aarch64)
      local run=$root/tools/run-aarch64.sh
      for ex in vkattn-info attention; do
        echo "== qemu (Mesa 12): $ex"
        "$run" "$dir/examples/$ex" >"$dir/example-$ex.log" 2>&1 ||
          { tail -n 20 "$dir/example-$ex.log"; echo "cross.sh: $ex failed under qemu" >&2; exit 1; }
        tail -n 1 "$dir/example-$ex.log"
      done
      # (The unit tests but the quantizers' accuracy sweeps: host arithmetic,
      # tens of minutes emulated.)
      (cd "$dir" && ctest -L unit -E "$qemu_skip" --timeout 900 --output-on-failure)
      [ "${VKATTN_CROSS_QUICK:-}" = 1 ] && return 0
      (cd "$dir" && ctest -R '^bindings\.go$' --timeout 900 --output-on-failure)
      for mesa in 12 26; do
        echo "== qemu (Mesa $mesa): one call of every cache dtype"
        VKATTN_AARCH64_MESA=$mesa "$run" "$dir/tests/test_cache_dtypes" ||
          { echo "cross.sh: the cache dtypes failed on Mesa $mesa" >&2; exit 1; }
      done
      ;;
  esac
}

dist() {
  bash "$root/tools/cross-dist.sh" "$@"
}

case "$target" in
  dist) dist "$2" "$3" "$4" "$5" ;;
  *)
    case "$action" in
      deps) deps ;;
      build) build "$3" ;;
      test) run_test "$3" ;;
      all) deps && build "$3" && run_test "$3" ;;
    esac
    ;;
esac
