#!/usr/bin/env bash
# How long freed GPUs sit idle when jobs wait for them, on the environment of `make demo` (2 nodes
# of 16 GPUs): N GPT2-large jobs of the example (16 GPUs per trial, parallelism 2, trial-sim) are
# created one after another, so that each later job waits for GPUs the earlier ones hold. For each
# job but the first, the hand-over is the time from the end of the trial whose GPUs its first trial
# took (the last trial process to exit before that trial's process started) to that start, both
# read from the node simulator's log (microseconds). Prints a Markdown table row per job and a
# summary row, ready for BENCHMARKS.md.
#
# With WAITING, that many more jobs of the example are created at once after the N, and wait
# behind them for the whole run: the hand-overs are then measured with WAITING + N - 1 jobs
# waiting. The first job then holds its GPUs (2 trials of HANDOVER_HOLD_SECONDS, default 60) until
# every waiting job has been reconciled and says it waits for GPUs, so that no hand-over is
# measured while the operator is still reading the new jobs; the run fails if it did not.
#
# Usage: bench/handover.sh [N] [WAITING]   (default 5 and 0; binaries from build/bin; see
#        scripts/e2e-env)
set -euo pipefail

source_dir=$(cd "$(dirname "$0")/.." && pwd)
jobs=${1:-5}
waiting=${2:-0}
hold_seconds=${HANDOVER_HOLD_SECONDS:-60}
[[ $jobs =~ ^[2-9]$|^[1-9][0-9]+$ && $waiting =~ ^[0-9]+$ && $hold_seconds =~ ^[1-9][0-9]*$ ]] ||
  { echo "usage: $0 [N] [WAITING]   (N: 2 or more jobs; WAITING: 0 or more)" >&2; exit 2; }
# shellcheck source=scripts/e2e-env
source "$source_dir/scripts/e2e-env"
state=$(mktemp -d /tmp/autotune-handover.XXXXXX)
e2e_init "$state"
finish() {
  local status=$?
  e2e_down
  if ((status == 0)); then rm -rf "$state"; else echo "logs kept in $state" >&2; fi
}
trap finish EXIT
e2e_up >/dev/null 2>&1 || { echo "the environment did not start; see $state" >&2; exit 1; }

succeeded() { [[ $(kubectl get atj "$1" -n default -o jsonpath='{.status.phase}') == Succeeded ]]; }

example=$source_dir/examples/gpt2-large-trial-sim.yaml
# The example as job NAME, measuring every trial (identical jobs would take each other's kept
# results) and writing an output of its own.
job_of() {
  kubectl patch --local -f "$example" --type=merge -o yaml \
    -p "{\"metadata\":{\"name\":\"$1\",\"labels\":{\"bench\":\"${1%%-*}\"}},
         \"spec\":{\"reuse\":\"Disabled\",\"output\":{\"configMapName\":\"$1-optimal\"}}}"
}
# With jobs waiting, the first job's two trials hold all 32 GPUs until every waiting job was read.
holding() {
  if ((waiting == 0)); then
    cat
    return
  fi
  local command=/spec/template/spec/containers/0/command
  kubectl patch --local -f - --type=json -o yaml -p "[
    {\"op\":\"test\",\"path\":\"$command/3\",\"value\":\"--startup-seconds\"},
    {\"op\":\"replace\",\"path\":\"$command/4\",\"value\":\"$hold_seconds\"},
    {\"op\":\"replace\",\"path\":\"/spec/search/maxTrials\",\"value\":2}]"
}
for i in $(seq 1 "$jobs"); do
  if ((i == 1)); then job_of "handover-$i" | holding; else job_of "handover-$i"; fi |
    kubectl apply -f - >/dev/null
  sleep 1  # created one after another, each older than the next
done
if ((waiting > 0)); then
  created_at=$(date +%s.%N)
  for i in $(seq 1 "$waiting"); do
    echo ---
    job_of "waiting-$i"
  done | kubectl create -f - >/dev/null
  waiting_for_gpus() {
    local count
    count=$(kubectl get atj -n default -l bench=waiting -o json | python3 -c '
import json, sys
jobs = json.load(sys.stdin)["items"]
print(sum(any(c["type"] == "Running" and c.get("reason") == "WaitingForGPUs"
              for c in job.get("status", {}).get("conditions", [])) for job in jobs))')
    ((count == waiting))
  }
  e2e_wait 600 "$waiting jobs waiting for GPUs" waiting_for_gpus
  all_waiting_at=$(date -u +%Y-%m-%dT%H:%M:%S.%6NZ)
  echo "$waiting more jobs, each saying it waits for GPUs" \
    "$(python3 -c "import sys; print(f'{float(sys.argv[1]) - float(sys.argv[2]):.1f}')" \
      "$(date +%s.%N)" "$created_at") s after they were sent"
fi
for i in $(seq 1 "$jobs"); do
  e2e_wait 600 "job handover-$i" succeeded "handover-$i"
done
# Identical jobs would take each other's kept results (hence reuse: Disabled above): no job may
# report a reused result, and every trial launched must have been a Pod the operator created.
launched=0 reused=0
for i in $(seq 1 "$jobs"); do
  read -r job_launched job_reused < <(kubectl get atj "handover-$i" -n default \
    -o jsonpath='{.status.trials.launched} {.status.trials.reused}{"\n"}')
  launched=$((launched + job_launched)) reused=$((reused + ${job_reused:-0}))
done
created=$(e2e_pods_created 1 default)
((reused == 0 && created >= launched)) || {
  echo "the jobs report $launched trials launched and $reused reused; the operator created" \
    "$created Pods" >&2
  exit 1
}
echo "$jobs jobs, $launched trials launched, $created trial Pods created"

python3 - "$E2E_STATE/node-sim.log" "$jobs" "${all_waiting_at:-}" <<'PY'
import re, statistics, sys
from datetime import datetime

def parsed(stamp):
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))

started, exits = {}, []
for line in open(sys.argv[1], encoding="utf-8"):
    stamp, _, rest = line.partition(" node-sim: ")
    match = re.match(r"(started pod|pod) default/(handover-\d+)-(\S+?)( on | exited)", rest)
    if not match:
        continue
    at = parsed(stamp)
    if match.group(1) == "started pod":
        started.setdefault(match.group(2), at)
    else:
        exits.append(at)
if sys.argv[3] and min(exits) <= parsed(sys.argv[3]):
    sys.exit("a trial ended before every waiting job was read: raise HANDOVER_HOLD_SECONDS")
print("| job | idle GPUs at its first launch (s) |")
print("| --- | --: |")
gaps = []
for i in range(2, int(sys.argv[2]) + 1):
    job = f"handover-{i}"
    first = started[job]
    freed = max((at for at in exits if at <= first), default=None)
    gap = (first - freed).total_seconds()
    gaps.append(gap)
    print(f"| {job} | {gap:.3f} |")
print(f"| median, max | {statistics.median(gaps):.3f}, {max(gaps):.3f} |")
PY
