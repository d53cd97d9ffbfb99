#!/usr/bin/env bash
# The README's test command: installs dependencies, builds from scratch in
# build/ (with the Java, C# and Go bindings), runs every test except the
# `slow` label on the default device, then the checkers (tools/checks.sh:
# ABI, ASan/UBSan, fuzzing, TSan, valgrind, canaries; VKATTN_CHECKS=none
# skips them). Takes no arguments (any is refused before anything is
# installed or built).
set -euo pipefail
[ $# -eq 0 ] || { echo "usage: tools/test.sh (no arguments; VKATTN_CHECKS=none skips the checkers)" >&2; exit 2; }
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DVKATTN_BINDINGS=ON -DVKATTN_COOPMAT=ON
cmake --build build -j"$(nproc)"
ctest --test-dir build -j"$(nproc)" -LE slow --output-on-failure --timeout 900
if [ "${VKATTN_CHECKS:-}" != none ]; then bash tools/checks.sh; fi
