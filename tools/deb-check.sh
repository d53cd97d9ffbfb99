#!/usr/bin/env bash
# CI's last step (.ci/run), after tools/test.sh built build/: packs it into
# the Debian packages (libvkattn0, libvkattn-dev, vkattn-tools; CPack,
# cmake/VkattnPackaging.cmake), installs them with apt-get, then builds and
# runs a C consumer (tests/consumer/consumer.c) against the installed files
# only, with pkg-config and with CMake's find_package, and runs the
# installed tools. Then the README's Python install step: `cmake --install
# build --component python` into /usr/local and `python3 -c "import vkattn"`
# with Debian's interpreter from outside the tree (when build/ has the Python
# binding). The packages and those files are removed again on exit, so a
# developer machine is left as it was. Run as root (or with sudo available).
# No arguments. Refused before anything is installed: no build/, vkattn's
# packages already installed, or (with the Python binding) a vkattn already
# installed under /usr/local (only files this run installed are removed).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 0 ] || { echo "usage: tools/deb-check.sh (no arguments; after tools/test.sh built build/)" >&2; exit 2; }
[ -f build/CMakeCache.txt ] || { echo "deb-check: no build/ (tools/test.sh builds it)" >&2; exit 1; }
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
pkgs="libvkattn0 libvkattn-dev vkattn-tools"
for p in $pkgs; do
  if dpkg -s "$p" >/dev/null 2>&1; then
    echo "deb-check: $p is already installed; remove it first" >&2
    exit 1
  fi
done
if [ -f build/bindings/python/vkattn/__init__.py ]; then
  for f in /usr/local/lib/python3.*/dist-packages/vkattn /usr/local/lib/libvkattn.so* \
    /usr/local/lib/*/libvkattn.so*; do
    if [ -e "$f" ]; then
      echo "deb-check: $f is already installed; remove it first (the check installs and removes its own)" >&2
      exit 1
    fi
  done
fi
work=$(mktemp -d)
# dpkg, not apt-get: once one of them is gone apt no longer knows the
# local packages' names and refuses the whole purge.
purge() {
  for p in "$@"; do
    if dpkg -s "$p" >/dev/null 2>&1; then $SUDO dpkg --purge "$p" >/dev/null; fi
  done
}
cleanup() {
  purge vkattn-tools libvkattn-dev libvkattn0
  if [ -f "$work/py-manifest.txt" ]; then
    xargs -d '\n' $SUDO rm -f <"$work/py-manifest.txt"
    $SUDO rmdir /usr/local/lib/python3.*/dist-packages/vkattn 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

(cd build && cpack -G DEB -B "$work/debs" >/dev/null)
echo "deb-check: $(cd "$work/debs" && ls ./*.deb | tr '\n' ' ')"
# Every package carries the project's version (CHANGELOG.md, the header).
want=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' build/CMakeCache.txt)
for deb in "$work"/debs/*.deb; do
  got=$(dpkg-deb -f "$deb" Version)
  [ "$got" = "$want" ] || { echo "deb-check: $(basename "$deb") has version $got, the project $want" >&2; exit 1; }
done
$SUDO apt-get install -y -qq --no-install-recommends "$work"/debs/*.deb >/dev/null
dpkg -L libvkattn0 | grep 'libvkattn.so.0$' >/dev/null

# pkg-config, no hints: the installed vkattn.pc.
cc -std=c99 -Wall -Werror tests/consumer/consumer.c $(pkg-config --cflags --libs vkattn) \
  -o "$work/pc-consumer"
ldd "$work/pc-consumer" | grep -E '=> /(usr/)?lib/libvkattn[.]so[.]0 ' >/dev/null  # the installed one
"$work/pc-consumer"
# CMake, no hints: find_package(vkattn) finds /usr/lib/cmake/vkattn.
cmake -S tests/consumer -B "$work/cmake-consumer" >/dev/null
cmake --build "$work/cmake-consumer" >/dev/null
"$work/cmake-consumer/consumer"
# The tools.
vkattn-info --json | python3 -c 'import json, sys; d = json.load(sys.stdin); assert d["round_trip"] == "ok", d; print("vkattn-info --json:", d["default_device"])'
[ "$(vkattn-info --version)" = "vkattn $want" ] ||
  { echo "deb-check: the installed vkattn-info says $(vkattn-info --version), the project $want" >&2; exit 1; }
vkattn-bench --variants >"$work/variants.txt"  # (not piped to head: SIGPIPE under pipefail)
vkattn-tune --list >"$work/tune-cases.txt" && grep -q '^decode-16x512$' "$work/tune-cases.txt"
head -n 2 "$work/variants.txt"
command -v vkattn-plot-bench vkattn-compare-bench >/dev/null
echo "deb-check: packages installed, C consumer built with pkg-config and CMake and run, tools run"

if [ -f build/bindings/python/vkattn/__init__.py ]; then  # VKATTN_BINDINGS or _PYTHON
  purge libvkattn-dev libvkattn0  # the prefix's own library below
  $SUDO cmake --install build --component python --prefix /usr/local >"$work/py-install.log"
  $SUDO cmake --install build --component runtime --prefix /usr/local >>"$work/py-install.log"
  # What this run installed (not "Up-to-date": a file that was there before).
  sed -n 's/^-- Installing: //p' "$work/py-install.log" >"$work/py-manifest.txt"
  $SUDO ldconfig
  (cd "$work" && env -u PYTHONPATH /usr/bin/python3 -c \
    'import vkattn; assert vkattn.__file__.startswith("/usr/local/"), vkattn.__file__; print("python3 -c \"import vkattn\":", vkattn.__file__, vkattn.device_count(), "device(s)")')
else
  echo "deb-check: build/ has no Python binding: its install step not checked"
fi
