#!/usr/bin/env bash
# The tools' answers to bad arguments, a missing build or dependency, and a
# folder that is not theirs (issue E5 items 3 and 4; ctest
# tools.bad_arguments):
#   bash tests/tools/test_tools.sh [ROOT]
# ROOT (default: this checkout) is the tree whose tools/ are run: point it at
# a copy of older tools (`git archive <rev> tools | tar -x -C DIR`) to see
# which of these checks that version fails.
#
# No network, nothing installed or built: every command runs in a scratch
# folder, with stubs first on PATH for the programs that would download,
# install, build or touch a GPU (apt-get, sudo, cmake, nvidia-smi, ...;
# each stub logs its call and succeeds), a fake build folder whose programs
# are stubs, and VKATTN_MESA26_DIR pointing into the scratch folder. Each
# check prints PASS or FAIL with what it expected; the exit status is 1 when
# any failed.
set -u
root=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
# The Python the tools get as python3 (ctest passes the one it found).
py=${PYTHON3:-}
[ -n "$py" ] || { [ -x /usr/bin/python3 ] && py=/usr/bin/python3; } || py=$(command -v python3)
tmp=$(mktemp -d /tmp/vkattn-test-tools-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
work=$tmp/work # the current folder of every command
mkdir -p "$work"

# Stubs: log "NAME ARGS" to $calls and succeed.
stubs=$tmp/stubs
calls=$tmp/calls.log
mkdir -p "$stubs"
for c in apt-get apt-cache sudo dpkg dpkg-deb cmake ctest cpack ninja nvidia-smi abidw abidiff \
  valgrind clang-14 gcc cc; do
  printf '#!/bin/sh\necho "%s $*" >>"%s"\nexit 0\n' "$c" "$calls" >"$stubs/$c"
  chmod +x "$stubs/$c"
done
ln -s "$py" "$stubs/python3"
export PATH=$stubs:$PATH
export DEBIAN13_APT_ETC=$tmp/no-apt-etc # (tools/debian13-apt.sh: no machine sources read)
export VKATTN_MESA26_DIR=$tmp/mesa26-default VKATTN_GPU_PACKAGES=0 VKATTN_MESA26_QUIET=1
unset VKATTN_BUILD VKATTN_BENCH VKATTN_CHECKS VKATTN_SWEEP_GPUS VKATTN_SWEEP_JOBS \
  VKATTN_SWEEP_TIMEOUT VKATTN_FUZZ_SECONDS CAMPAIGN_SUITES

# A build folder whose programs are stubs that succeed at once.
fake=$tmp/fakebuild
mkdir -p "$fake/examples" "$fake/tests"
for p in examples/vkattn-bench examples/vkattn-info examples/vkattn-tune tests/test_attention; do
  printf '#!/bin/sh\nexit 0\n' >"$fake/$p"
  chmod +x "$fake/$p"
done
export CAMPAIGN_SUITES=test_attention TUNE_SECONDS=1

failed=0
checks=0
name=""
# run NAME CMD...: runs CMD in $work (30 s at most), its stdout and stderr in
# $tmp/out and $tmp/err, its exit status in $rc; $calls starts empty.
run() {
  name=$1
  shift
  : >"$calls"
  (cd "$work" && timeout 30 "$@" >"$tmp/out" 2>"$tmp/err" </dev/null)
  rc=$?
}
# expect WHAT TEST...: one check on the last run.
expect() {
  local what=$1
  shift
  checks=$((checks + 1))
  if "$@"; then
    echo "PASS $name: $what"
  else
    failed=$((failed + 1))
    echo "FAIL $name: $what (exit status $rc)"
    sed -n '1,6s/^/    stderr: /p' "$tmp/err"
    [ -s "$calls" ] && sed -n '1,3s/^/    called: /p' "$calls"
  fi
}
rc_is() { [ "$rc" = "$1" ]; }
rc_nonzero() { [ "$rc" != 0 ]; }
err_has() { grep -qF -- "$1" "$tmp/err"; }
err_line() { grep -qxF -- "$1" "$tmp/err"; }
no_traceback() { ! grep -q "Traceback" "$tmp/err"; }
absent() { [ ! -e "$1" ] && [ ! -L "$1" ]; }
nothing_called() { [ ! -s "$calls" ]; }
not_called() { ! grep -q "^$1 " "$calls"; }
file_is() { [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; }
first_line_is() { [ -f "$1" ] && [ "$(head -n 1 "$1")" = "$2" ]; }

T=$root/tools
G=$root/tools/gpu

## Item 3: the campaign (tools/gpu/run_checks.sh, tools/gpu/campaign.sh).
budget_msg='--budget needs a whole number of seconds (got 30s)'
run "run_checks.sh --budget 30s" env VKATTN_BUILD="$fake" bash "$G/run_checks.sh" --budget 30s
expect "exit status 2" rc_is 2
expect "says: $budget_msg" err_line "$budget_msg"
expect "no OUTDIR 30s made" absent "$work/30s"
expect "no default OUTDIR .gpu made" absent "$work/.gpu"
expect "nothing run" nothing_called

run "run_checks.sh OUTDIR --budget 30s" env VKATTN_BUILD="$fake" bash "$G/run_checks.sh" "$tmp/c1" --budget 30s
expect "exit status 2" rc_is 2
expect "says: $budget_msg" err_line "$budget_msg"
expect "OUTDIR not made" absent "$tmp/c1"

run "campaign.sh OUTDIR --budget 30s" env VKATTN_BUILD="$fake" bash "$G/campaign.sh" "$tmp/c1" --budget 30s
expect "exit status 2" rc_is 2
expect "says: $budget_msg" err_line "$budget_msg"
expect "OUTDIR not made" absent "$tmp/c1"

run "run_checks.sh OUTDIR --budget 1.5" env VKATTN_BUILD="$fake" bash "$G/run_checks.sh" "$tmp/c1" --budget 1.5
expect "exit status 2" rc_is 2
expect "names the option and the value" err_line "--budget needs a whole number of seconds (got 1.5)"
expect "OUTDIR not made" absent "$tmp/c1"

run "run_checks.sh OUTDIR --budget --bogus" env VKATTN_BUILD="$fake" bash "$G/run_checks.sh" "$tmp/c1" --budget --bogus
expect "exit status 2" rc_is 2
expect "names the unknown option" err_has "--bogus"
expect "usage line" err_has "usage:"
expect "OUTDIR not made" absent "$tmp/c1"

run "run_checks.sh --bogus" env VKATTN_BUILD="$fake" bash "$G/run_checks.sh" --bogus
expect "exit status 2" rc_is 2
expect "usage line" err_has "usage:"
expect "no folder --bogus made" absent "$work/--bogus"
expect "nothing run" nothing_called

run "run_checks.sh OUTDIR info nosuch" env VKATTN_BUILD="$fake" bash "$G/run_checks.sh" "$tmp/c1" info nosuch
expect "exit status 2" rc_is 2
expect "names the stage" err_has "nosuch"
expect "no stage ran (OUTDIR not made)" absent "$tmp/c1"

run "run_checks.sh OUTDIR --budget 60, no build folder" \
  env VKATTN_BUILD="$tmp/nobuild" bash "$G/run_checks.sh" "$tmp/c1" --budget 60
expect "non-zero exit" rc_nonzero
expect "names the missing build folder" err_has "$tmp/nobuild"
expect "no step ran (OUTDIR not made)" absent "$tmp/c1"
expect "nothing run" nothing_called

run "run_checks.sh OUTDIR info, no build folder" \
  env VKATTN_BUILD="$tmp/nobuild" bash "$G/run_checks.sh" "$tmp/c1" info
expect "non-zero exit" rc_nonzero
expect "names the missing build folder" err_has "$tmp/nobuild"
expect "no stage ran (OUTDIR not made)" absent "$tmp/c1"

mkdir -p "$tmp/halfbuild/examples"
cp "$fake/examples/vkattn-bench" "$fake/examples/vkattn-info" "$tmp/halfbuild/examples/"
run "run_checks.sh OUTDIR --budget 60, build without vkattn-tune" \
  env VKATTN_BUILD="$tmp/halfbuild" bash "$G/run_checks.sh" "$tmp/c1" --budget 60
expect "non-zero exit" rc_nonzero
expect "names examples/vkattn-tune" err_has "examples/vkattn-tune"
expect "no step ran (OUTDIR not made)" absent "$tmp/c1"

mkdir -p "$tmp/user-out"
echo mine >"$tmp/user-out/notes.txt"
run "run_checks.sh USERDIR --budget 60 (a folder of someone's files)" \
  env VKATTN_BUILD="$fake" bash "$G/run_checks.sh" "$tmp/user-out" --budget 60
expect "non-zero exit" rc_nonzero
expect "names the folder" err_has "$tmp/user-out"
expect "its file untouched" file_is "$tmp/user-out/notes.txt" mine
expect "no step ran" absent "$tmp/user-out/steps.log"
run "run_checks.sh USERDIR info (a folder of someone's files)" \
  env VKATTN_BUILD="$fake" bash "$G/run_checks.sh" "$tmp/user-out" info
expect "non-zero exit" rc_nonzero
expect "no stage ran" absent "$tmp/user-out/info.log"

mkdir -p "$tmp/p"
echo mine >"$tmp/p/campaign.tar.gz"
run "run_checks.sh OUTDIR --budget 60 (someone's OUTDIR/../campaign.tar.gz)" \
  env VKATTN_BUILD="$fake" bash "$G/run_checks.sh" "$tmp/p/out" --budget 60
expect "non-zero exit" rc_nonzero
expect "names the archive" err_has "$tmp/p/campaign.tar.gz"
expect "the file untouched" file_is "$tmp/p/campaign.tar.gz" mine

run "run_checks.sh OUTDIR --budget (no value: 540)" \
  env VKATTN_BUILD="$fake" bash "$G/run_checks.sh" "$tmp/c2/out" --budget
expect "exit status 0" rc_is 0
expect "steps.log: budget 540 s" grep -q "^budget 540 s," "$tmp/c2/out/steps.log"
expect "summary.md written" test -s "$tmp/c2/out/summary.md"
expect "archive written" test -s "$tmp/c2/campaign.tar.gz"

# The dry run's form (ctest tools.gpu_campaign_dry_run: OUTDIR --budget N),
# again into the campaign's own OUTDIR; 09 is 9 (not octal).
run "run_checks.sh OUTDIR --budget 09 (again, same OUTDIR)" \
  env VKATTN_BUILD="$fake" bash "$G/run_checks.sh" "$tmp/c2/out" --budget 09
expect "exit status 0" rc_is 0
expect "steps.log: budget 9 s" grep -q "^budget 9 s," "$tmp/c2/out/steps.log"

run "campaign.sh --bogus" env VKATTN_BUILD="$fake" bash "$G/campaign.sh" --bogus
expect "exit status 2" rc_is 2
expect "usage line" err_has "usage:"

## Item 4: tools/with-mesa26.sh and what calls it.
run "with-mesa26.sh (no arguments)" env VKATTN_MESA26_DIR="$tmp/m0" bash "$T/with-mesa26.sh"
expect "exit status 2" rc_is 2
expect "usage line" err_has "usage:"
expect "nothing fetched (no apt-get)" not_called apt-get
expect "no folder made" absent "$tmp/m0"

run "with-mesa26.sh --fetchh" env VKATTN_MESA26_DIR="$tmp/m0" bash "$T/with-mesa26.sh" --fetchh
expect "exit status 2" rc_is 2
expect "nothing fetched" not_called apt-get

run "with-mesa26.sh /no/such/program" env VKATTN_MESA26_DIR="$tmp/m0" bash "$T/with-mesa26.sh" /no/such/program
expect "exit status 127" rc_is 127
expect "names the program" err_has "/no/such/program"
expect "nothing fetched" not_called apt-get

mkdir -p "$tmp/user-m"
echo mine >"$tmp/user-m/keep.txt"
run "with-mesa26.sh true (VKATTN_MESA26_DIR: someone's folder)" \
  env VKATTN_MESA26_DIR="$tmp/user-m" bash "$T/with-mesa26.sh" true
expect "non-zero exit" rc_nonzero
expect "its file untouched" file_is "$tmp/user-m/keep.txt" mine
expect "names the folder" err_has "$tmp/user-m"
expect "nothing fetched" not_called apt-get

mkdir -p "$tmp/m1.tmp"
echo mine >"$tmp/m1.tmp/keep.txt"
run "with-mesa26.sh --fetch (new folder; someone's DIR.tmp beside it)" \
  env VKATTN_MESA26_DIR="$tmp/m1" bash "$T/with-mesa26.sh" --fetch
expect "exit status 0 (stub fetch)" rc_is 0
expect "DIR.tmp's file untouched" file_is "$tmp/m1.tmp/keep.txt" mine
expect "the set is ready" test -f "$tmp/m1/ready"
expect "the set carries its mark" test -f "$tmp/m1/.vkattn-mesa26"
expect "no temporary folder left" test -z "$(ls -d "$tmp"/m1.tmp.* 2>/dev/null)"

rm -f "$tmp/m1/ready"
echo old >"$tmp/m1/stale"
run "with-mesa26.sh --fetch (its own folder without ready)" \
  env VKATTN_MESA26_DIR="$tmp/m1" bash "$T/with-mesa26.sh" --fetch
expect "exit status 0" rc_is 0
expect "replaced (stale file gone)" absent "$tmp/m1/stale"
expect "ready again" test -f "$tmp/m1/ready"

mkdir -p "$tmp/m2"
run "with-mesa26.sh --fetch (an empty folder)" env VKATTN_MESA26_DIR="$tmp/m2/" bash "$T/with-mesa26.sh" --fetch
expect "exit status 0" rc_is 0
expect "the set is ready" test -f "$tmp/m2/ready"

run "gpu-static.sh navi31 true (VKATTN_MESA26_DIR: someone's folder)" \
  env VKATTN_MESA26_DIR="$tmp/user-m" bash "$T/gpu-static.sh" navi31 true
expect "non-zero exit" rc_nonzero
expect "its file untouched" file_is "$tmp/user-m/keep.txt" mine
expect "nothing fetched" not_called apt-get

run "gpu-static.sh navi31 env A=1 (no CMD)" env VKATTN_MESA26_DIR="$tmp/m3" bash "$T/gpu-static.sh" navi31 env A=1
expect "exit status 2" rc_is 2
expect "usage line" err_has "usage:"
expect "nothing fetched" not_called apt-get

run "gpu-static.sh navi31 /no/such/program" env VKATTN_MESA26_DIR="$tmp/m3" bash "$T/gpu-static.sh" navi31 /no/such/program
expect "exit status 127" rc_is 127
expect "nothing fetched" not_called apt-get

run "gpu-static.sh --bogus" bash "$T/gpu-static.sh" --bogus
expect "exit status 2" rc_is 2

## tools/gpu/static_sweep.sh (its OUTDIR/GPU folders are replaced).
export VKATTN_BENCH=$fake/examples/vkattn-bench
run "static_sweep.sh OUTDIR --quik" bash "$G/static_sweep.sh" "$tmp/s1" --quik
expect "exit status 2" rc_is 2
expect "names the option" err_has "--quik"
expect "nothing fetched" not_called apt-get
expect "OUTDIR not made" absent "$tmp/s1"

run "static_sweep.sh --quick (no OUTDIR)" bash "$G/static_sweep.sh" --quick
expect "exit status 2" rc_is 2
expect "no folder --quick made" absent "$work/--quick"
expect "nothing fetched" not_called apt-get

run "static_sweep.sh OUTDIR, VKATTN_SWEEP_JOBS=x" env VKATTN_SWEEP_JOBS=x bash "$G/static_sweep.sh" "$tmp/s1"
expect "exit status 2" rc_is 2
expect "names the variable" err_has "VKATTN_SWEEP_JOBS"
expect "nothing fetched" not_called apt-get

run "static_sweep.sh OUTDIR, VKATTN_SWEEP_GPUS=nosuch" env VKATTN_SWEEP_GPUS=nosuch bash "$G/static_sweep.sh" "$tmp/s1"
expect "exit status 2" rc_is 2
expect "nothing fetched" not_called apt-get

mkdir -p "$tmp/user-s/navi31"
echo mine >"$tmp/user-s/navi31/keep.txt"
echo mine >"$tmp/user-s/notes.txt"
run "static_sweep.sh USERDIR (someone's folder with a navi31/)" bash "$G/static_sweep.sh" "$tmp/user-s"
expect "non-zero exit" rc_nonzero
expect "its navi31/keep.txt untouched" file_is "$tmp/user-s/navi31/keep.txt" mine
expect "nothing fetched" not_called apt-get
unset VKATTN_BENCH

## Other tools: bad arguments before any install, build or run.
run "expect-family.sh --bogus true" bash "$T/expect-family.sh" --bogus true
expect "exit status 2" rc_is 2
expect "usage line" err_has "usage:"
run "expect-family.sh tiled /no/such/program" bash "$T/expect-family.sh" tiled /no/such/program
expect "exit status 127" rc_is 127
expect "says it is not found" err_has "expect-family: /no/such/program: not found"
run "expect-family.sh --classes -x tiled true" bash "$T/expect-family.sh" --classes -x tiled true
expect "exit status 2" rc_is 2

run "gpu/facts.sh (no arguments)" bash "$G/facts.sh"
expect "exit status 2" rc_is 2
expect "usage line" err_has "usage:"
run "gpu/facts.sh /no/such/build" bash "$G/facts.sh" /no/such/build
expect "exit status 2" rc_is 2
run "check_version.py (no arguments)" "$py" "$T/check_version.py"
expect "exit status 2" rc_is 2
run "check_abi_version.py --bogus" "$py" "$T/check_abi_version.py" --bogus
expect "exit status 2" rc_is 2
run "check_function_length.py --max x" "$py" "$T/check_function_length.py" --max x
expect "exit status 2" rc_is 2

run "abi-check.sh (no arguments)" bash "$T/abi-check.sh"
expect "exit status 2" rc_is 2
expect "usage line" err_has "usage:"
run "abi-check.sh --bogus" bash "$T/abi-check.sh" --bogus
expect "exit status 2" rc_is 2
expect "abidw not run" not_called abidw
run "abi-check.sh /no/such/lib.so" bash "$T/abi-check.sh" /no/such/lib.so
expect "non-zero exit" rc_nonzero
expect "names the library" err_has "/no/such/lib.so"
expect "abidw not run" not_called abidw

run "run-binding-example.sh (no arguments)" bash "$T/run-binding-example.sh"
expect "exit status 2" rc_is 2
expect "usage line" err_has "usage:"
run "run-binding-example.sh java extra" bash "$T/run-binding-example.sh" java extra
expect "exit status 2" rc_is 2
expect "nothing installed or built" nothing_called
run "run-binding-example.sh rust" bash "$T/run-binding-example.sh" rust
expect "exit status 2" rc_is 2
expect "nothing installed or built" nothing_called

for s in run-example.sh test.sh install-deps.sh checks.sh deb-check.sh gpu/pack_extra.sh; do
  run "$s --help" bash "$T/$s" --help
  expect "exit status 2" rc_is 2
  expect "usage line" err_has "usage:"
  expect "nothing installed or built" nothing_called
done
run "checks.sh, VKATTN_CHECKS=\"abi bogus\"" env VKATTN_CHECKS="abi bogus" bash "$T/checks.sh"
expect "exit status 2" rc_is 2
expect "names the step" err_has "bogus"
expect "nothing built" nothing_called
run "checks.sh, VKATTN_FUZZ_SECONDS=5m" env VKATTN_CHECKS=fuzz VKATTN_FUZZ_SECONDS=5m bash "$T/checks.sh"
expect "exit status 2" rc_is 2
expect "names the variable" err_has "VKATTN_FUZZ_SECONDS"
run "canaries.sh with missing build folders" bash "$T/canaries.sh" "$tmp/nb" "$tmp/na" "$tmp/nt"
expect "non-zero exit" rc_nonzero
expect "says what is missing" err_has "canaries: missing"
expect "nothing built" nothing_called

## Python tools: a clear error, no traceback.
echo '{' >"$tmp/broken.json"
echo '{"cases": []}' >"$tmp/a.json"
run "compare_bench.py A missing.json" "$py" "$T/compare_bench.py" "$tmp/a.json" "$tmp/missing.json"
expect "exit status 1" rc_is 1
expect "names the file" err_has "missing.json"
expect "no traceback" no_traceback
run "compare_bench.py broken.json A" "$py" "$T/compare_bench.py" "$tmp/broken.json" "$tmp/a.json"
expect "exit status 1" rc_is 1
expect "names the file" err_has "broken.json"
expect "no traceback" no_traceback
run "compare_bench.py --bogus A" "$py" "$T/compare_bench.py" --bogus "$tmp/a.json"
expect "non-zero exit" rc_nonzero
expect "no traceback" no_traceback

cp "$tmp/a.json" "$tmp/b.json"
run "plot_bench.py A.json B.json (no image named)" "$py" "$T/plot_bench.py" "$tmp/a.json" "$tmp/b.json"
expect "non-zero exit" rc_nonzero
expect "A.json not overwritten" file_is "$tmp/a.json" '{"cases": []}'
expect "no traceback" no_traceback
run "plot_bench.py out.png missing.json" "$py" "$T/plot_bench.py" "$tmp/out.png" "$tmp/missing.json"
expect "exit status 1" rc_is 1
expect "names the file" err_has "missing.json"
expect "no traceback" no_traceback

for s in check_docs.py check_layers.py; do
  run "$s /no/such/tree" "$py" "$T/$s" "$tmp/no-such-tree"
  expect "non-zero exit" rc_nonzero
  expect "names the folder" err_has "$tmp/no-such-tree"
  expect "no traceback" no_traceback
done
for s in gpu/summary.py gpu/campaign_summary.py gpu/static_table.py; do
  run "$s /no/such/outdir" "$py" "$T/$s" "$tmp/no-such-outdir"
  expect "non-zero exit" rc_nonzero
  expect "names the folder" err_has "$tmp/no-such-outdir"
  expect "no traceback" no_traceback
done
run "static_budgets.py missing.json budgets" "$py" "$G/static_budgets.py" "$tmp/missing.json" "$G/static_budgets.txt"
expect "non-zero exit" rc_nonzero
expect "names the file" err_has "missing.json"
expect "no traceback" no_traceback
run "bench_torch.py --reps 0" "$py" "$T/bench_torch.py" --reps 0
expect "exit status 2" rc_is 2
expect "no traceback" no_traceback
if ! "$py" -c "import torch" 2>/dev/null; then
  run "bench_torch.py without PyTorch" "$py" "$T/bench_torch.py" --case 'decode-*'
  expect "exit status 1" rc_is 1
  expect "says PyTorch is missing" err_has "needs PyTorch"
  expect "no traceback" no_traceback
fi

## The cross builds' tools (issue W): bad arguments refused before
## anything is installed, fetched or built.
for args in "" "linux build $tmp/x" "aarch64" "aarch64 build" "windows-x64 test" \
  "aarch64 deps extra" "windows-x64 bake $tmp/x" "dist $tmp/d"; do
  # shellcheck disable=SC2086
  run "cross.sh $args" bash "$T/cross.sh" $args
  expect "exit status 2" rc_is 2
  expect "prints the usage" err_has "usage:"
  expect "nothing installed or built" nothing_called
done
run "run-windows.sh (no program)" bash "$T/run-windows.sh"
expect "exit status 2" rc_is 2
run "run-windows.sh without a prefix" env VKATTN_CROSS_BUILD_DIR="$tmp" bash "$T/run-windows.sh" x.exe
expect "exit status 2" rc_is 2
expect "says how to make the prefix" err_has "cross.sh windows-x64 build"
run "run-aarch64.sh (no program)" bash "$T/run-aarch64.sh"
expect "exit status 2" rc_is 2
run "run-aarch64.sh VKATTN_AARCH64_MESA=7" env VKATTN_AARCH64_MESA=7 bash "$T/run-aarch64.sh" x
expect "exit status 2" rc_is 2
expect "names the value" err_has "VKATTN_AARCH64_MESA=7"
run "cross-dist.sh over folders that are no builds" bash "$T/cross-dist.sh" "$tmp/d" "$tmp" "$tmp" "$tmp"
expect "exit status 2" rc_is 2
expect "names what is missing" err_has "is missing"
expect "DIST_DIR not made" absent "$tmp/d"

echo "test_tools: $((checks - failed)) of $checks checks passed ($root/tools)"
[ "$failed" = 0 ]
