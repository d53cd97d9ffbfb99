#!/usr/bin/env bash
# The README's example command: installs dependencies, builds, and runs the
# main example on the default device (VKATTN_DEVICE picks another). Takes
# no arguments (any is refused before anything is installed or built).
set -euo pipefail
[ $# -eq 0 ] || { echo "usage: tools/run-example.sh (no arguments; VKATTN_DEVICE picks the device)" >&2; exit 2; }
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DVKATTN_COOPMAT=ON
cmake --build build -j"$(nproc)" --target vkattn-info continuous_batching
./build/examples/vkattn-info
./build/examples/continuous_batching
