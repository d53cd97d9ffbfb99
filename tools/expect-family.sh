#!/usr/bin/env bash
# tools/expect-family.sh FAMILY CMD [ARGS...]: runs CMD (a test forced to
# attention family FAMILY through VKATTN_ATTN_KERNEL) with VKATTN_LOG=kernels
# and fails unless CMD passes and its kernel log shows that FAMILY ran:
# at least one dispatch on FAMILY, and every dispatch on another family
# announced by a fallback line saying why FAMILY declined that call.
# Prints the counts and each distinct fallback reason; the rest of CMD's
# stderr passes through.
#
# A fallback because FAMILY failed its self-check (ops/attention/
# self_check.h) is a failure, not a decline: FAMILY gave wrong answers.
# tools/expect-family.sh --faulted FAMILY CMD [ARGS...] asserts the
# opposite, for runs under VKATTN_FAULT_KERNEL=FAMILY: CMD passes, nothing
# ran on FAMILY, and the log names FAMILY's failed self-check.
#
# tools/expect-family.sh --classes DECODE PREFILL CMD [ARGS...]: for runs
# under VKATTN_ATTN_KERNEL_DECODE=DECODE VKATTN_ATTN_KERNEL_PREFILL=PREFILL
# (a call's decode-shaped sequences on one family, the rest on the other):
# CMD passes, both families ran, every other dispatch follows a fallback
# line, and no self-check failed.
#
# A family that looks like an option, or a CMD that is not there, is refused
# (exit 2, 127) before anything runs.
set -uo pipefail
usage() {
  echo "usage: tools/expect-family.sh [--faulted] FAMILY CMD [ARGS...]" >&2
  echo "       tools/expect-family.sh --classes DECODE PREFILL CMD [ARGS...]" >&2
  exit 2
}
# need_cmd CMD: CMD exists (a path, or a name on PATH).
need_cmd() {
  command -v -- "$1" >/dev/null 2>&1 || { echo "expect-family: $1: not found" >&2; exit 127; }
}
if [ "${1:-}" = --classes ]; then
  [ $# -ge 4 ] || usage
  for f in "$2" "$3"; do
    case "$f" in -* | "") echo "expect-family: not a family: '$f'" >&2; usage ;; esac
  done
  dec=$2 pre=$3
  shift 3
  need_cmd "$1"
  log=$(mktemp)
  trap 'rm -f "$log"' EXIT
  VKATTN_LOG=kernels "$@" 2>"$log"
  rc=$?
  grep -v '^vkattn: attention ' "$log" >&2
  awk -v d="$dec" -v p="$pre" '
    $1 == "vkattn:" && $2 == "attention" && $3 == "fallback" {
      to = $7; sub(/:$/, "", to); allowed[to] = 1
      if (index($0, "self-check failed")) checkfail++
      next
    }
    $1 == "vkattn:" && $2 == "attention" && $3 ~ /^family=/ {
      fam = substr($3, 8); n[fam]++
      if (fam != d && fam != p && !(fam in allowed)) {
        bad++
        if (bad <= 5) print "expect-family: a dispatch on " fam " without a fallback: " $0 > "/dev/stderr"
      }
    }
    END {
      printf "expect-family: %d dispatch(es) on %s (decode class), %d on %s (prefill class)\n", n[d], d, n[p], p
      if (n[d] == 0 || n[p] == 0) print "expect-family: not both families ran" > "/dev/stderr"
      if (checkfail) print "expect-family: a self-check failed " checkfail " time(s)" > "/dev/stderr"
      exit (n[d] > 0 && n[p] > 0 && bad == 0 && checkfail == 0) ? 0 : 1
    }' "$log"
  check=$?
  [ $rc -ne 0 ] && exit $rc
  exit $check
fi
faulted=0
if [ "${1:-}" = --faulted ]; then
  faulted=1
  shift
fi
[ $# -ge 2 ] || usage
case "$1" in -* | "") echo "expect-family: unknown option or not a family: '$1'" >&2; usage ;; esac
family=$1
shift
need_cmd "$1"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
VKATTN_LOG=kernels "$@" 2>"$log"
rc=$?
grep -v '^vkattn: attention ' "$log" >&2
awk -v f="$family" -v faulted="$faulted" '
  $1 == "vkattn:" && $2 == "attention" && $3 == "fallback" {
    # vkattn: attention fallback from <a> to <b>: <reason>
    to = $7; sub(/:$/, "", to)
    if ($5 == f) { instead = to; reason[$0]++ } else { instead = "" }
    if ($5 == f && index($0, "self-check failed")) checkfail++
    next
  }
  $1 == "vkattn:" && $2 == "attention" && $3 ~ /^family=/ {
    fam = substr($3, 8)
    if (fam == f) on++
    else if (fam == instead) moved[fam]++
    else { bad++; if (bad <= 5) print "expect-family: a dispatch on " fam " without a fallback from " f ": " $0 > "/dev/stderr" }
  }
  END {
    printf "expect-family: %d dispatch(es) on %s", on, f
    for (m in moved) printf ", %d on %s after %s declined", moved[m], m, f
    printf "\n"
    for (r in reason) printf "expect-family:   %dx %s\n", reason[r], r
    if (faulted) {
      if (on > 0) print "expect-family: " on " dispatch(es) ran on the faulted " f > "/dev/stderr"
      if (checkfail == 0) print "expect-family: no failed self-check of " f " was logged" > "/dev/stderr"
      exit (on == 0 && checkfail > 0 && bad == 0) ? 0 : 1
    }
    if (checkfail) print "expect-family: " f " failed its self-check " checkfail " time(s)" > "/dev/stderr"
    if (on == 0) print "expect-family: nothing ran on " f > "/dev/stderr"
    exit (on > 0 && bad == 0 && checkfail == 0) ? 0 : 1
  }' "$log"
check=$?
[ $rc -ne 0 ] && exit $rc
exit $check
