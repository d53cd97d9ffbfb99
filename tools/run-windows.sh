#!/usr/bin/env bash
# Runs a Windows program of a cross build (tools/cross.sh windows-x64 build
# DIR) under wine, on this machine's Vulkan (lavapipe):
#   tools/run-windows.sh PROGRAM [ARGS...]
# The build folder is $VKATTN_CROSS_BUILD_DIR, else the current folder (or
# the nearest one above it holding a cross build's wine/ prefix); its
# vkattn.dll is on the program's PATH, so programs built outside the
# project against it run too. Exits with the program's status and passes
# its output through.
#
# Needs no DISPLAY: wine 8's Vulkan (winevulkan over winex11.drv) needs an
# X server, so each run starts its own Xvfb, and the prefix's wineserver,
# and stops every process it started before it returns. Runs are
# serialized per prefix (flock): ctest -j runs them one at a time.
#
# The toolchain's CMAKE_CROSSCOMPILING_EMULATOR (ctest and the tests'
# discovery call it) and Go's `go test -exec`.
set -u
usage() { echo "usage: tools/run-windows.sh PROGRAM [ARGS...] (build folder: \$VKATTN_CROSS_BUILD_DIR or the current folder)" >&2; exit 2; }
[ $# -ge 1 ] || usage
case "$1" in -h | --help) usage ;; esac
prog=$1
shift
find_build() {
  local d
  if [ -n "${VKATTN_CROSS_BUILD_DIR:-}" ]; then
    d=$(cd "$VKATTN_CROSS_BUILD_DIR" 2>/dev/null && pwd) ||
      { echo "run-windows: VKATTN_CROSS_BUILD_DIR=$VKATTN_CROSS_BUILD_DIR is not a folder" >&2; exit 2; }
    echo "$d"
    return
  fi
  d=$PWD
  while [ "$d" != / ]; do
    [ -d "$d/wine" ] && [ -f "$d/CMakeCache.txt" ] && { echo "$d"; return; }
    d=$(dirname "$d")
  done
  echo "$PWD"
}
build=$(find_build)
prefix=$build/wine
[ -f "$prefix/system.reg" ] || {
  echo "run-windows: no wine prefix in $build (bash tools/cross.sh windows-x64 build $build makes it)" >&2
  exit 2
}
wine=$(command -v wine64 || echo /usr/lib/wine/wine64)
[ -x "$wine" ] || { echo "run-windows: wine64 is not installed (bash tools/cross.sh windows-x64 deps)" >&2; exit 2; }
wineserver=$(command -v wineserver || echo /usr/lib/wine/wineserver)
command -v Xvfb >/dev/null || { echo "run-windows: Xvfb is not installed (bash tools/cross.sh windows-x64 deps)" >&2; exit 2; }
[ -e "$prog" ] || command -v "$prog" >/dev/null || { echo "run-windows: no program $prog" >&2; exit 2; }

export WINEPREFIX=$prefix WINEDEBUG=${WINEDEBUG:--all} WINEDLLOVERRIDES="mscoree,mshtml="
# vkattn.dll of the build folder (and its examples') for programs elsewhere.
export WINEPATH="Z:${build//\//\\};Z:${build//\//\\}\\examples${WINEPATH:+;$WINEPATH}"
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}

exec 9>"$prefix/.run-lock"
flock 9
xvfb_pid=
cleanup() {
  WINEPREFIX=$prefix "$wineserver" -k 2>/dev/null
  [ -n "$xvfb_pid" ] && kill "$xvfb_pid" 2>/dev/null && wait "$xvfb_pid" 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fifo=$(mktemp -u "$prefix/.display.XXXXXX")
mkfifo "$fifo"
Xvfb -displayfd 8 -nolisten tcp -screen 0 640x480x24 8>"$fifo" 2>/dev/null &
xvfb_pid=$!
read -r -t 20 display <"$fifo"
rm -f "$fifo"
[ -n "${display:-}" ] || { echo "run-windows: Xvfb did not start" >&2; exit 1; }
export DISPLAY=:$display
"$wine" "$prog" "$@"
rc=$?
exit $rc
