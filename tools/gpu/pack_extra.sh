#!/usr/bin/env bash
# After ../shared/gpu/pack.sh: adds glvnd's libraries to .gpu/debs (the
# NVIDIA Vulkan driver, libGLX_nvidia.so.0, loads them) and this folder's
# run_checks.sh to .gpu/. Run from the project root.
set -euo pipefail
[ -d .gpu/debs ] || { echo "pack_extra.sh: run ../shared/gpu/pack.sh first" >&2; exit 1; }
(cd .gpu/debs && apt-get download libglvnd0 libglx0 libegl1 libgl1 libopengl0 libgles2 2>/dev/null >/dev/null)
cp "$(dirname "$0")/run_checks.sh" .gpu/run_checks.sh
echo "packed: $(ls .gpu/debs | tr '\n' ' ')"
