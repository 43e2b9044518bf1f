# shellcheck shell=bash
# Test support for the shell tests that need an API server, sourced after checks.sh:
#
#   use_cluster WORKDIR "TOOLS" [UP_FLAGS...]
#       the cluster of AUTOTUNE_TEST_KUBECONFIG, with TOOLS (such as "helm kubectl") from PATH;
#       else a control plane of the test's own in WORKDIR/controlplane (scripts/controlplane up
#       UP_FLAGS), which sets own_controlplane=true. Reads $source_dir. Exits with a "not ok"
#       line, and the control plane's last words, when either cannot be had.

own_controlplane=false

use_cluster() {
  local work=$1 tools=$2 tool
  shift 2
  if [[ -n ${AUTOTUNE_TEST_KUBECONFIG:-} ]]; then
    export KUBECONFIG=$AUTOTUNE_TEST_KUBECONFIG
    for tool in $tools; do
      command -v "$tool" >/dev/null || {
        echo "not ok - AUTOTUNE_TEST_KUBECONFIG is set but $tool is not on PATH"
        exit 1
      }
    done
    return
  fi
  export AUTOTUNE_CONTROLPLANE_DIR=$work/controlplane
  own_controlplane=true
  if ! "$source_dir/scripts/controlplane" up "$@" 2>"$work/up.log"; then
    echo "not ok - the control plane comes up"
    grep -v 'Unhandled Error' "$work/up.log" | tail -20 | sed 's/^/    /'
    exit 1
  fi
  eval "$("$source_dir/scripts/controlplane" env)"
}
