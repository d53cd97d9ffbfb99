# shellcheck shell=bash
# Sourced by tools/gpu/run_checks.sh and tools/gpu/campaign.sh, from the
# project root, after their arguments are read and before anything runs
# (before tools/gpu/gpu_env.sh unpacks packages, before OUTDIR is made).
# Each check prints why on stderr and returns 1 when the campaign cannot
# run; NAME is the script's name for the message.
#   preflight_build NAME       the build folder (VKATTN_BUILD, default build)
#                              has the programs the campaign runs, and
#                              python3, timeout and tar exist
#   preflight_outdir NAME DIR  DIR is the campaign's own: absent, empty, or
#                              marked (DIR/.vkattn-campaign; a campaign's
#                              steps.log, stages.log or .done-* from before
#                              the mark); and DIR/../campaign.tar.gz, which
#                              every stage or step rewrites, is absent or a
#                              campaign's archive. Anything else is refused,
#                              never touched.
#   preflight_mark DIR         marks DIR as the campaign's (after mkdir)

preflight_build() {
  local b=${VKATTN_BUILD:-build} f missing=""
  if [ ! -d "$b" ]; then
    echo "$1: no build folder $b (VKATTN_BUILD, default build, from $(pwd)):" \
      "build vkattn first or set VKATTN_BUILD; nothing was run" >&2
    return 1
  fi
  for f in examples/vkattn-bench examples/vkattn-info examples/vkattn-tune tests/test_attention; do
    [ -f "$b/$f" ] && [ -x "$b/$f" ] || missing="$missing $f"
  done
  if [ -n "$missing" ]; then
    echo "$1: the build folder $b (VKATTN_BUILD) lacks$missing: build them" \
      "(cmake --build $b) or set VKATTN_BUILD; nothing was run" >&2
    return 1
  fi
  for f in python3 timeout tar; do
    command -v "$f" >/dev/null || { echo "$1: $f not found (the campaign needs it); nothing was run" >&2; return 1; }
  done
}

preflight_outdir() {
  local d=$2 a
  if [ -e "$d" ] || [ -L "$d" ]; then
    if [ ! -d "$d" ]; then
      echo "$1: OUTDIR $d is not a folder; nothing was run" >&2
      return 1
    fi
    if [ ! -f "$d/.vkattn-campaign" ] && [ ! -f "$d/steps.log" ] && [ ! -f "$d/stages.log" ] &&
      ! compgen -G "$d/.done-*" >/dev/null && [ -n "$(ls -A "$d")" ]; then
      echo "$1: OUTDIR $d holds files that are not a campaign's (no $d/.vkattn-campaign);" \
        "it is left as it is: give a new or empty folder; nothing was run" >&2
      return 1
    fi
  fi
  a=$(dirname "$d")/campaign.tar.gz
  if { [ -e "$a" ] || [ -L "$a" ]; } &&
    ! grep -qE '(^|/)(\.vkattn-campaign|steps\.log|stages\.log)$' <(tar tzf "$a" 2>/dev/null); then
    echo "$1: $a is not a campaign's archive and the campaign rewrites that file:" \
      "move it away first; nothing was run" >&2
    return 1
  fi
}

preflight_mark() {
  [ -f "$1/.vkattn-campaign" ] ||
    echo "made by the GPU campaign (tools/gpu/run_checks.sh), which rewrites its files here" \
      >"$1/.vkattn-campaign"
}
