#!/usr/bin/env bash
# The README's example command: installs dependencies, builds, and runs the
# main example on the default device (VKATTN_DEVICE picks another).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DVKATTN_COOPMAT=ON
cmake --build build -j"$(nproc)" --target vkattn-info continuous_batching
./build/examples/vkattn-info
./build/examples/continuous_batching
