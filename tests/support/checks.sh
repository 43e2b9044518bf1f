# shellcheck shell=bash
# Test support for the shell tests, sourced by them: TAP-style checks and waiting on conditions.
#
#   check DESCRIPTION COMMAND...    runs COMMAND in this shell (so it may set variables), prints
#                                   "ok - ..." or "not ok - ..." with the tail of what it said,
#                                   counts failures in $failures, and returns COMMAND's status
#   expect DESCRIPTION COMMAND...   the same, never failing the caller: the next checks still run
#   require DESCRIPTION COMMAND...  check, stopping the test when it fails: a check the rest
#                                   cannot do without
#   eventually SECONDS COMMAND...   polls COMMAND until it succeeds or SECONDS have passed
#
# A test may define on_check_failure to print more when a check fails (logs, object dumps).

failures=0

check() {
  local description=$1 output status=0
  shift
  output=$(mktemp)
  "$@" >"$output" 2>&1 || status=$?
  if ((status == 0)); then
    echo "ok - $description"
  else
    echo "not ok - $description"
    tail -30 "$output" | sed 's/^/    /'
    failures=$((failures + 1))
    if declare -F on_check_failure >/dev/null; then
      on_check_failure
    fi
  fi
  rm -f "$output"
  return "$status"
}

expect() { check "$@" || true; }

require() {
  check "$@" || {
    echo "$(basename "$0" .sh): stopping, a prerequisite failed"
    exit 1
  }
}

eventually() {
  local seconds=$1
  shift
  local deadline=$((SECONDS + seconds))
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}
