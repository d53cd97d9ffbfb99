#!/usr/bin/env bash
# After ../shared/gpu/pack.sh: adds glvnd's libraries to .gpu/debs (the
# NVIDIA Vulkan driver, libGLX_nvidia.so.0, loads them) and this folder's
# run_checks.sh to .gpu/ (which finds the rest of the campaign under
# tools/gpu/ when run from the project root). Run from the project root; no
# arguments.
set -euo pipefail
[ $# -eq 0 ] || { echo "usage: bash tools/gpu/pack_extra.sh (no arguments; from the project root)" >&2; exit 2; }
[ -d .gpu/debs ] || { echo "pack_extra.sh: run ../shared/gpu/pack.sh first" >&2; exit 1; }
(cd .gpu/debs && apt-get download libglvnd0 libglx0 libegl1 libgl1 libopengl0 libgles2 2>/dev/null >/dev/null)
cp "$(dirname "$0")/run_checks.sh" .gpu/run_checks.sh
echo "packed: $(ls .gpu/debs | tr '\n' ' ')"
# The carry limit is 64 MiB: build/mesa26 (Debian 13's Mesa, glslang and
# validation layer for -DVKATTN_COOPMAT=ON, ~630 MB) must not travel.
if [ -d build/mesa26 ]; then
  echo "pack_extra: move build/mesa26 out of build/ before carrying it (du: $(du -sh build/mesa26 | cut -f1));" \
       "e.g. mv build/mesa26 /tmp/mesa26 and back afterwards" >&2
fi
