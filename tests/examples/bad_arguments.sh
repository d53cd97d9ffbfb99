#!/usr/bin/env bash
# The programs users run as tools, and the examples, refuse bad arguments
# before they create a context (issue E6 defect 4; ctest
# examples.bad_arguments):
#   bash tests/examples/bad_arguments.sh EXAMPLES_DIR [RUNNER...]
# EXAMPLES_DIR holds the built vkattn-bench, vkattn-tune, vkattn-info,
# attention, chunked_prefill, interop and continuous_batching (.exe on
# Windows); RUNNER, if given, runs them (a cross build's emulator:
# tools/run-windows.sh, tools/run-aarch64.sh).
#
# Every run has VKATTN_DEVICE naming no device: a program that got as far
# as vkattn_context_create would fail there (exit 1, its message). A
# refusal is exit status 2 with a usage line on stderr, in well under the
# peaks' 38 s. The checks that must pass (--list, --help) run too.
set -u
[ $# -ge 1 ] && [ -d "$1" ] || { echo "usage: bad_arguments.sh EXAMPLES_DIR [RUNNER...]" >&2; exit 2; }
dir=$(cd "$1" && pwd)
shift
runner=("$@")
tmp=$(mktemp -d /tmp/vkattn-bad-args-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" # (--json paths are relative: the same file under wine)
export VKATTN_DEVICE=no-such-device-e6 XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
fails=0
# expect STATUS PROGRAM ARGS...: the exit status, and "usage" on stderr for 2.
expect() {
  local want=$1 prog=$2
  shift 2
  local err=$tmp/err got
  local exe=$dir/$prog
  [ -e "$exe.exe" ] && exe=$exe.exe
  timeout 60 "${runner[@]}" "$exe" "$@" >"$tmp/out" 2>"$err"
  got=$?
  if [ "$got" != "$want" ] || { [ "$want" = 2 ] && ! grep -q usage "$err"; }; then
    echo "FAIL: $prog $* -> exit $got (want $want): $(head -c 300 "$err")"
    fails=$((fails + 1))
  else
    echo "PASS: $prog $* -> exit $got"
  fi
}
bench_bad=(
  "--reps abc" "--reps -1" "--reps 0" "--reps 1.5" "--reps" "--topk-stride abc" "--topk-stride 0"
  "--topk-prompt 12x" "--topk-prompt 2047" "--case no-such-case" "--case decode-* --case nope"
  "--json no-such-folder/out.json" "--bogus" "--list --reps abc" "--reps abc --list"
  "--variants --topk-stride 0" "--help --reps abc" "--list --variants" "--list --case decode-*")
for a in "${bench_bad[@]}"; do
  # shellcheck disable=SC2086
  expect 2 vkattn-bench $a
done
tune_bad=("--seconds abc" "--seconds 0" "--seconds -1" "--seconds" "--case no-such-case"
  "--json no-such-folder/out.json" "--list --seconds abc" "--bogus" "--help --bogus")
for a in "${tune_bad[@]}"; do
  # shellcheck disable=SC2086
  expect 2 vkattn-tune $a
done
for a in "--bogus" "--version --json" "--json --bogus"; do
  # shellcheck disable=SC2086
  expect 2 vkattn-info $a
done
for p in attention chunked_prefill interop continuous_batching; do
  expect 2 "$p" --help
  expect 2 "$p" extra
done
# What must still work without a device: the lists and the help.
expect 0 vkattn-bench --list
expect 0 vkattn-bench --help
expect 0 vkattn-tune --list
expect 0 vkattn-tune --help
expect 0 vkattn-info --version
# A writable --json is left as it was found (created and removed again).
expect 1 vkattn-bench --json fresh.json --case decode-1x4096
[ ! -e "$tmp/fresh.json" ] || { echo "FAIL: the --json check left $tmp/fresh.json"; fails=$((fails + 1)); }
echo "bad_arguments: $fails failure(s)"
[ "$fails" = 0 ]
