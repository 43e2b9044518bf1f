#!/usr/bin/env bash
# The chart's RBAC held to what the operator asked for over every theme of e2e_test.sh together:
# each theme runs on a cluster of its own and keeps its audit log, the rules and the operator's user
# name in AUDIT_DIR (keep_audit_log in support.sh). No request may have been refused, no verb used
# that no rule grants, and every granted verb must have been used by one theme or another.
# Usage: rights_used_test.sh AUDIT_DIR SOURCE_DIR THEME...
set -euo pipefail

if (($# < 3)); then
  echo "usage: $0 AUDIT_DIR SOURCE_DIR THEME..." >&2
  exit 2
fi
audit_dir=$1 source_dir=$2
shift 2

logs=()
for theme in "$@"; do
  for kept in "$audit_dir/$theme".{audit.log,rbac.json,user}; do
    if [[ ! -s $kept ]]; then
      echo "not ok - theme $theme left $kept"
      exit 1
    fi
  done
  logs+=("$audit_dir/$theme.audit.log")
done

# Every theme renders the same chart: the first theme's rules and user stand for all.
if python3 "$source_dir/tests/e2e/rights_used.py" "$audit_dir/$1.rbac.json" \
  "$(cat "$audit_dir/$1.user")" "${logs[@]}"; then
  echo "ok - every granted verb was used by the themes $*, and no request was refused"
else
  echo "not ok - every granted verb was used by the themes $*, and no request was refused"
  exit 1
fi
