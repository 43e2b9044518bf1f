#!/usr/bin/env bash
# How long freed GPUs sit idle when jobs wait for them, on the environment of `make demo` (2 nodes
# of 16 GPUs): N GPT2-large jobs of the example (16 GPUs per trial, parallelism 2, trial-sim) are
# created one after another, so that each later job waits for GPUs the earlier ones hold. For each
# job but the first, the hand-over is the time from the end of the trial whose GPUs its first trial
# took (the last trial process to exit before that trial's process started) to that start, both
# read from the node simulator's log (microseconds). Prints a Markdown table row per job and a
# summary row, ready for BENCHMARKS.md.
#
# Usage: bench/handover.sh [N]   (default 5; binaries from build/bin; see scripts/e2e-env)
set -euo pipefail

source_dir=$(cd "$(dirname "$0")/.." && pwd)
jobs=${1:-5}
[[ $jobs =~ ^[2-9]$|^[1-9][0-9]+$ ]] || { echo "usage: $0 [N]   (N: 2 or more jobs)" >&2; exit 2; }
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

for i in $(seq 1 "$jobs"); do
  kubectl patch --local -f "$source_dir/examples/gpt2-large-trial-sim.yaml" --type=merge \
    -p "{\"metadata\":{\"name\":\"handover-$i\"},
         \"spec\":{\"reuse\":\"Disabled\",
                   \"output\":{\"configMapName\":\"handover-$i-optimal\"}}}" -o yaml |
    kubectl apply -f - >/dev/null
  sleep 1  # created one after another, each older than the next
done
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

python3 - "$E2E_STATE/node-sim.log" "$jobs" <<'PY'
import re, statistics, sys
from datetime import datetime

started, exits = {}, []
for line in open(sys.argv[1], encoding="utf-8"):
    stamp, _, rest = line.partition(" node-sim: ")
    match = re.match(r"(started pod|pod) default/(handover-\d+)-(\S+?)( on | exited)", rest)
    if not match:
        continue
    at = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    if match.group(1) == "started pod":
        started.setdefault(match.group(2), at)
    else:
        exits.append(at)
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
