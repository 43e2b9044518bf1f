#!/usr/bin/env bash
# What the operator costs around the trials it runs, on the environment of `make demo`: API
# requests, reconciles and status writes per trial (from its own metrics), and the job's wall
# time against the time its trials needed at its parallelism. Prints a Markdown table row.
# Usage: bench/operator_overhead.sh [RUNS]   (binaries from build/bin; see scripts/e2e-env)
set -euo pipefail

source_dir=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/e2e-env
source "$source_dir/scripts/e2e-env"
runs=${1:-3}
# Plain /metrics: a secure endpoint's token reviews would count among the requests measured here.
export E2E_OPERATOR_FLAGS="--workers 4 --qps 50 --burst 100 --metrics-secure=false"
state=$(mktemp -d /tmp/autotune-overhead.XXXXXX)
e2e_init "$state"
trap 'e2e_down; rm -rf "$state"' EXIT
e2e_up >/dev/null 2>&1 || { echo "the environment did not start; see $state" >&2; exit 1; }
metrics_port=$(sed -n 's/.*"metricsPort":\([0-9]*\).*/\1/p' "$E2E_OPERATOR_LOG" | tail -1)

# The sum of one metric's samples in a scrape, optionally only those whose labels match $2.
metric_sum() {
  curl -sf "http://127.0.0.1:$metrics_port/metrics" |
    awk -v name="$1" -v match_labels="${2:-}" '
      index($0, name) == 1 && substr($0, length(name) + 1, 1) ~ /[{ ]/ &&
      (match_labels == "" || index($0, match_labels) > 0) { total += $NF }
      END { printf "%d", total }'
}

succeeded() { [[ $(kubectl get atj "$1" -n default -o jsonpath='{.status.phase}') == Succeeded ]]; }

echo "| run | trials | API requests / trial | of them the Lease's | PUTs / trial (status and Lease) | reconciles / trial | wall time / trial time at parallelism |"
echo "| --: | --: | --: | --: | --: | --: | --: |"
for run in $(seq 1 "$runs"); do
  name=overhead-$run
  requests_before=$(metric_sum autotune_kube_requests_total)
  writes_before=$(metric_sum autotune_kube_requests_total 'verb="PUT"')
  reconciles_before=$(metric_sum autotune_reconcile_total)
  audit_from=$(($(e2e_audit_lines) + 1))
  # The same job each run: without reuse: Disabled the later runs would take the first one's
  # results and launch nothing. Each its own output ConfigMap: the one before, deleted with its job
  # by the garbage collector, may still hold the name.
  kubectl patch --local -f "$source_dir/examples/gpt2-large-trial-sim.yaml" --type=merge \
    -p "{\"metadata\":{\"name\":\"$name\"},
         \"spec\":{\"reuse\":\"Disabled\",\"output\":{\"configMapName\":\"$name-optimal\"}}}" \
    -o yaml | kubectl apply -f - >/dev/null
  e2e_wait 300 "job $name" succeeded "$name"
  # Let the last deletions and their reconciles land before counting.
  e2e_wait 60 "the trial Pods of $name to go" \
    bash -c "[[ -z \$(kubectl get pods -n default -l autotune.io/job=$name -o name) ]]"
  requests=$(($(metric_sum autotune_kube_requests_total) - requests_before))
  writes=$(($(metric_sum autotune_kube_requests_total 'verb="PUT"') - writes_before))
  reconciles=$(($(metric_sum autotune_reconcile_total) - reconciles_before))
  created=$(e2e_pods_created "$audit_from" default)
  lease=$(e2e_lease_requests "$audit_from")
  kubectl get atj "$name" -n default -o json | python3 -c '
import json, sys
from datetime import datetime
job = json.load(sys.stdin)
status = job["status"]
results = status["results"]
parallelism = job["spec"]["parallelism"]
run, requests, lease, writes, reconciles, created = sys.argv[1:7]
if status["trials"].get("reused", 0) or int(created) != len(results):
    sys.exit(f"run {run}: {len(results)} results, {status['trials'].get('reused', 0)} reused, "
             f"{created} trial Pods created: each result must be a launched trial")
def at(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
wall = (at(status["completionTime"]) - at(job["metadata"]["creationTimestamp"])).total_seconds()
needed = sum(r["durationSeconds"] for r in results) / parallelism
n = len(results)
print(f"| {run} | {n} | {int(requests) / n:.1f} | {int(lease) / n:.1f} | {int(writes) / n:.1f} | "
      f"{int(reconciles) / n:.1f} | {wall / needed:.2f} |")
' "$run" "$requests" "$lease" "$writes" "$reconciles" "$created"
  kubectl delete atj "$name" -n default --wait=false >/dev/null
done
