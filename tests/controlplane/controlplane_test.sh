#!/usr/bin/env bash
# scripts/controlplane as the tests and the demo use it: up with the scheduler and the controller
# manager, real API requests through kubectl and helm, RBAC on, controllers running, and down
# leaving nothing behind.
set -uo pipefail
source_dir=$1
controlplane=$source_dir/scripts/controlplane
# shellcheck source=tests/support/checks.sh
source "$source_dir/tests/support/checks.sh"
export AUTOTUNE_CONTROLPLANE_DIR
AUTOTUNE_CONTROLPLANE_DIR=$(mktemp -d /tmp/autotune-controlplane-test.XXXXXX)



cleanup() {
  "$controlplane" down >/dev/null 2>&1
  rm -rf "$AUTOTUNE_CONTROLPLANE_DIR"
}
trap cleanup EXIT

up_log=$(mktemp)
if ! "$controlplane" up --with-scheduler --with-controller-manager 2>"$up_log"; then
  echo "not ok - the control plane comes up"
  grep -v 'Unhandled Error' "$up_log" | tail -20
  rm -f "$up_log"
  exit 1
fi
rm -f "$up_log"
echo "ok - the control plane comes up"
eval "$("$controlplane" env)"

reports_built_version() { kubectl get --raw /version | grep -q '"gitVersion": "v1\.[0-9]*\.[0-9]*"'; }
second_up_refused() { ! "$controlplane" up 2>/dev/null; }
round_trips() {
  kubectl create configmap smoke --from-literal=key=value &&
    [[ $(kubectl get configmap smoke -o jsonpath='{.data.key}') == value ]]
}
rbac_denies() {
  [[ $(kubectl auth can-i list pods --as=system:serviceaccount:default:nobody) == no ]]
}
has_replicaset() { [[ -n $(kubectl get replicasets -l app=smoke -o name) ]]; }
has_no_replicaset() { [[ -z $(kubectl get replicasets -l app=smoke -o name) ]]; }
deployment_gets_replicaset() {
  kubectl create deployment smoke --image=example.org/none:1 && eventually 60 has_replicaset
}
owner_deletion_collects() {
  kubectl delete deployment smoke && eventually 60 has_no_replicaset
}

expect "kubectl reaches the API server and the default namespace exists" \
  kubectl get namespace default
expect "the server reports the version it was built as" reports_built_version
expect "a second up while running is refused" second_up_refused
expect "objects can be created and read back" round_trips
expect "RBAC is on: an unprivileged service account may not list pods" rbac_denies
expect "the controller manager runs: a Deployment gets its ReplicaSet" deployment_gets_replicaset
expect "garbage collection removes what a deleted owner left" owner_deletion_collects
expect "helm talks to the cluster" helm list --all-namespaces

pids=$(cat "$AUTOTUNE_CONTROLPLANE_DIR"/*.pid)
etcd_data=$(cat "$AUTOTUNE_CONTROLPLANE_DIR/etcd.data")
"$controlplane" down >/dev/null 2>&1
all_stopped() {
  local pid
  for pid in $pids; do
    ! kill -0 "$pid" 2>/dev/null || return 1
  done
}
env_refused() { ! "$controlplane" env 2>/dev/null; }
expect "down stops every process it started" all_stopped
expect "down removes etcd's data" test ! -e "$etcd_data"
expect "env refuses when nothing runs" env_refused

if ((failures > 0)); then
  echo "controlplane_test: $failures checks failed"
  exit 1
fi
echo "controlplane_test: all checks passed"
