#!/usr/bin/env bash
# The README's binding example command: installs dependencies, builds the
# library and one language's binding, and runs examples/<lang>/ (the same
# paged-cache program in each language) on the default device.
#   bash tools/run-binding-example.sh java|csharp|go|python
set -euo pipefail
# The arguments are checked before anything is installed or built.
usage() { echo "usage: tools/run-binding-example.sh java|csharp|go|python" >&2; exit 2; }
[ $# -eq 1 ] || usage
lang=$1
case "$lang" in java|csharp|go|python) ;; *) echo "unknown language: $lang" >&2; usage ;; esac
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DVKATTN_BINDING_"$(echo "$lang" | tr a-z A-Z)"=ON >/dev/null
cmake --build build -j"$(nproc)" --target "run_example_$lang"
