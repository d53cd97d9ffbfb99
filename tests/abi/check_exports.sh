#!/usr/bin/env bash
# The library exports exactly the functions its public header declares: no
# C++ (mangled) symbol, no volk or other internal symbol, none missing.
# Usage: check_exports.sh <libvkattn.so> <vkattn.h>
set -euo pipefail
lib=$1
header=$2
exported=$(nm -D --defined-only "$lib" | awk 'NF == 3 {print $3}' | sed 's/@.*//' | sort -u)
declared=$(grep -oE 'VKATTN_API[^;]*[^a-z0-9_]vkattn_[a-z0-9_]+\(' "$header" |
  grep -oE 'vkattn_[a-z0-9_]+\($' | tr -d '(' | sort -u)
extra=$(comm -23 <(echo "$exported") <(echo "$declared"))
missing=$(comm -13 <(echo "$exported") <(echo "$declared"))
n_exp=$(echo "$exported" | grep -c . || true)
n_dec=$(echo "$declared" | grep -c . || true)
if [ -n "$extra" ] || [ -n "$missing" ]; then
  [ -n "$extra" ] && printf 'exported but not in the header:\n%s\n' "$extra"
  [ -n "$missing" ] && printf 'in the header but not exported:\n%s\n' "$missing"
  exit 1
fi
echo "exports match the header: $n_exp functions ($n_dec declared)"
