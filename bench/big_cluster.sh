#!/usr/bin/env bash
# The operator on a cluster the size of a big shared one, on the environment of `make demo`
# (scripts/e2e-env, with Kueue's CRDs): 5,000 GPU Nodes shaped like real ones (~16 KB: feature
# discovery's labels, 50 images; tainted for other teams, so that the trials run on the simulated
# nodes alone), 20,000 Kueue Workloads of other teams with a Pod template,
# 10,000 ConfigMaps of other teams and 2,000 kept measurements sealed with the operator's key
# (each a ConfigMap holding a copy of one measurement it wrote), written by bench/big_cluster.py.
# The operator runs with the chart's flags (--workers 4 --qps 50 --burst 100 --kueue, its default
# --node-selector and --kueue-workload-selector). Prints one Markdown table row each for BENCHMARKS.md:
#   - its peak memory (VmHWM) on the empty cluster, once the objects arrived while it ran, after a
#     restart on the full cluster, and its resident memory a minute later (steady state);
#   - its CPU over a minute in which every Node's status is written once (as kubelets report);
#   - the seconds from an AutotuneJob's create to its first trial Pod, on the full cluster.
#
# Usage: bench/big_cluster.sh [NODES WORKLOADS CONFIGMAPS MEASUREMENTS]
#        (default 5000 20000 10000 2000; binaries from build/bin). AUTOTUNE_BIG_KEEP=1 keeps the
#        logs. Kueue's manager is stopped once its CRDs are in: it would otherwise spend many
#        minutes writing the status of 20,000 Workloads that no queue admits, which is not what
#        is measured here (e2e.kueue runs trials through a real Kueue).
set -euo pipefail

source_dir=$(cd "$(dirname "$0")/.." && pwd)
command_line="bench/big_cluster.sh${*:+ $*}"
nodes=${1:-5000} workloads=${2:-20000} configmaps=${3:-10000} measurements=${4:-2000}
for count in "$nodes" "$workloads" "$configmaps" "$measurements"; do
  [[ $count =~ ^[0-9]+$ ]] || {
    echo "usage: $0 [NODES WORKLOADS CONFIGMAPS MEASUREMENTS]   (whole numbers)" >&2
    exit 2
  }
done
export E2E_OPERATOR_FLAGS=${E2E_OPERATOR_FLAGS:---workers 4 --qps 50 --burst 100 --metrics-secure=false}

# shellcheck source=scripts/e2e-env
source "$source_dir/scripts/e2e-env"
state=$(mktemp -d /tmp/autotune-big.XXXXXX)
namespace=autotune-big
teams=team-a,team-b,team-c,team-d,team-e,team-f,team-g,team-h,team-i,team-j
kept=kept-a,kept-b,kept-c,kept-d

log() { printf 'big_cluster: %s\n' "$*" >&2; }
fatal() {
  log "$*"
  exit 1
}

finish() {
  local status=$?
  e2e_down
  if ((status == 0)) && [[ -z ${AUTOTUNE_BIG_KEEP:-} ]]; then
    rm -rf "$state"
  else
    log "logs kept in $state (operator.log, controlplane/logs/)"
  fi
}

e2e_init "$state"
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

objects() { python3 "$source_dir/bench/big_cluster.py" "$@"; }
operator_pid() { cat "$E2E_STATE/operator.pid"; }
cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
status_kib() { awk -v field="$2:" '$1 == field { print $2 }' "/proc/$1/status"; }
mib() { awk -v kib="$1" 'BEGIN { printf "%.0f", kib / 1024 }'; }

# One job of one instant trial, measured afresh (reuse: Disabled), as JSON for big_cluster.py.
job_json() {
  python3 - "$1" "$namespace" "${2:-Enabled}" <<'PY'
import json, sys
name, namespace = sys.argv[1], sys.argv[2]
print(json.dumps({
    "apiVersion": "autotune.io/v1alpha1", "kind": "AutotuneJob",
    "metadata": {"name": name, "namespace": namespace},
    "spec": {
        "deepspeedConfig": {"train_micro_batch_size_per_gpu": [4], "gradient_accumulation_steps": 1,
                            "zero_optimization": {"stage": [1]}},
        "model": {"numParameters": 66000000, "activationMemoryPerSample": 114900000},
        "resources": {"gpusPerTrial": 1, "gpuMemory": "32Gi"},
        "search": {"strategy": "grid", "metric": "throughput", "maxTrials": 1},
        "reuse": sys.argv[3],
        "template": {"spec": {"containers": [{
            "name": "trainer", "image": "ghcr.io/autotune-operator/trial-sim:0.1.0",
            "command": ["trial-sim", "--profile", "distilbert", "--startup-seconds", "0"],
            "args": ["--deepspeed", "/etc/autotune/ds_config.json"]}]}}}}))
PY
}

job_phase() { kubectl get atj "$1" -n "$namespace" -o jsonpath='{.status.phase}'; }
job_succeeded() { [[ $(job_phase "$1") == Succeeded ]]; }

log "starting the environment (control plane, Kueue's CRDs, 2 simulated nodes, the operator)"
e2e_up --with-kueue >/dev/null 2>&1 || fatal "the environment did not come up; see $state"
e2e_stop_kueue
kubectl create namespace "$namespace" >/dev/null
peak_empty=$(status_kib "$(operator_pid)" VmHWM)

# One kept measurement the operator sealed itself: the original of the 2,000 copies.
job_json original >"$state/original.json"
kubectl create -f "$state/original.json" >/dev/null
e2e_wait 120 "the first job to succeed" job_succeeded original ||
  fatal "the first job did not succeed: $(kubectl get atj original -n "$namespace" -o yaml)"
original=$(kubectl get configmaps -n "$namespace" -l autotune.io/measurement \
  -o jsonpath='{.items[0].metadata.name}')
[[ -n $original ]] || fatal "the first job kept no measurement"

log "writing $nodes Nodes, $workloads Workloads, $configmaps ConfigMaps, $measurements measurements"
made_nodes=$(objects nodes "$nodes")
made_workloads=$(objects workloads "$workloads" "$teams")
made_configmaps=$(objects configmaps "$configmaps" "$teams")
made_measurements=$(objects measurements "$measurements" "$kept" "$namespace" "$original" \
  "$e2e_operator_namespace" "$e2e_measurement_key")
log "written: $made_nodes Nodes, $made_workloads Workloads, $made_configmaps ConfigMaps," \
  "$made_measurements measurements"
pid=$(operator_pid)
peak_arrived=$(status_kib "$pid" VmHWM)

log "restarting the operator on the full cluster"
e2e_stop_operator
started=$(date +%s.%N)
e2e_start_operator >/dev/null 2>&1 || fatal "the operator did not start; see $E2E_OPERATOR_LOG"
ready_seconds=$(awk -v from="$started" -v to="$(date +%s.%N)" 'BEGIN { printf "%.1f", to - from }')
pid=$(operator_pid)
peak_restart=$(status_kib "$pid" VmHWM)

log "writing every Node's status once over 60 s"
ticks=$(cpu_ticks "$pid")
objects touch-nodes "$nodes" 60 >/dev/null
cpu_minute=$(awk -v ticks=$(($(cpu_ticks "$pid") - ticks)) -v hz="$(getconf CLK_TCK)" \
  'BEGIN { printf "%.2f", ticks / hz }')
resident=$(status_kib "$pid" VmRSS)

log "creating a job and timing its first trial Pod"
job_json timed Disabled >"$state/timed.json"
first_pod=$(objects first-pod "$namespace" "$state/timed.json")
e2e_wait 120 "the timed job to succeed" job_succeeded timed || fatal "the timed job did not succeed"
peak_after=$(status_kib "$pid" VmHWM)

log "restarting the operator once more, watching every Node and every Workload"
e2e_stop_operator
E2E_OPERATOR_FLAGS="$E2E_OPERATOR_FLAGS --node-selector= --kueue-workload-selector=" \
  e2e_start_operator >/dev/null 2>&1 || fatal "the operator did not start; see $E2E_OPERATOR_LOG"
peak_unselected=$(status_kib "$(operator_pid)" VmHWM)

cat <<REPORT
$command_line on $(nproc) cores; the operator at ${E2E_OPERATOR_FLAGS}; ready ${ready_seconds} s after its restart

| Nodes | Workloads | ConfigMaps | kept | peak, empty | peak, as they arrived | peak, restarted | resident, a minute on | peak, at the end | peak, restarted watching all | CPU, a minute of Node writes | first trial Pod |
|---|---|---|---|---|---|---|---|---|---|---|---|
| $nodes | $workloads | $configmaps | $measurements | $(mib "$peak_empty") MiB | $(mib "$peak_arrived") MiB | $(mib "$peak_restart") MiB | $(mib "$resident") MiB | $(mib "$peak_after") MiB | $(mib "$peak_unselected") MiB | ${cpu_minute} s | ${first_pod} s |
REPORT
