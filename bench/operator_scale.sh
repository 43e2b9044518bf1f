#!/usr/bin/env bash
# How the operator scales with the number of AutotuneJobs, on the environment of `make demo`
# (scripts/e2e-env): for each N, N jobs of 10 instant trials each (a grid of ZeRO-1 x micro-batches
# 1..10, parallelism 10, trial-sim with --startup-seconds 0), all created at once with one
# `kubectl create -f`, against a baseline of the same number of the same Pods created, awaited and
# deleted by a plain client (`kubectl create -f`, polling, `kubectl delete`) through the same
# scheduler and node simulator, with the operator stopped. Each job is its own (a variable of its
# name in the trial's environment), so that none takes another's kept results; a run whose
# operator created fewer trial Pods than the jobs report trials (the API server's audit log) fails.
# Prints the machine and one Markdown table row per N, ready for BENCHMARKS.md.
#
# Usage: bench/operator_scale.sh [N...]   (default: 1 50 200 500 1000; binaries from build/bin)
#
# The cluster gets enough GPUs that slots are never the limit: ceil(10 x max N / 100) nodes of 100
# GPUs (the node simulator offers 110 Pods per node). AUTOTUNE_E2E_GPU_NODES and
# AUTOTUNE_E2E_GPUS_PER_NODE override the shape, E2E_OPERATOR_FLAGS the operator's flags (default
# here "--workers 4 --qps 200 --burst 400"), AUTOTUNE_SCALE_TIMEOUT the seconds one phase of one N
# may take (default 600 + trials / 4). The operator is restarted before each N, so its peak RSS
# (VmHWM, a lifetime peak) and its counters are that N's own. Logs stay in the state folder when
# the run fails, or always with AUTOTUNE_SCALE_KEEP=1.
set -euo pipefail

source_dir=$(cd "$(dirname "$0")/.." && pwd)
command_line="bench/operator_scale.sh${*:+ $*}"
sizes=("$@")
((${#sizes[@]} > 0)) || sizes=(1 50 200 500 1000)
trials_per_job=10
max_jobs=0
for n in "${sizes[@]}"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || {
    echo "usage: $0 [N...]   (N: how many AutotuneJobs, a positive whole number)" >&2
    exit 2
  }
  ((n > max_jobs)) && max_jobs=$n
done
gpus_per_node=${AUTOTUNE_E2E_GPUS_PER_NODE:-100}
nodes=${AUTOTUNE_E2E_GPU_NODES:-$(((trials_per_job * max_jobs + gpus_per_node - 1) / gpus_per_node))}
export AUTOTUNE_E2E_GPU_NODES=$nodes AUTOTUNE_E2E_GPUS_PER_NODE=$gpus_per_node
# Plain /metrics: a secure endpoint's token reviews would count among the requests measured here.
export E2E_OPERATOR_FLAGS=${E2E_OPERATOR_FLAGS:---workers 4 --qps 200 --burst 400 --metrics-secure=false}

# shellcheck source=scripts/e2e-env
source "$source_dir/scripts/e2e-env"
namespace=autotune-scale
state=$(mktemp -d /tmp/autotune-scale.XXXXXX)
sampler_pid=''
watch_pid=''
progress=''

log() { printf 'operator_scale: %s\n' "$*" >&2; }
fatal() {
  log "$*"
  exit 1
}

stop_background() {
  local pid
  for pid in "$sampler_pid" "$watch_pid"; do
    [[ -n $pid ]] || continue
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  sampler_pid='' watch_pid=''
}

finish() {
  local status=$?
  stop_background
  e2e_down
  if ((status == 0)) && [[ -z ${AUTOTUNE_SCALE_KEEP:-} ]]; then
    rm -rf "$state"
  elif ((status == 0)); then
    log "logs kept in $state (operator.log, node-sim.log, controlplane/logs/)"
  else
    log "failed; logs kept in $state (operator.log, node-sim.log, controlplane/logs/)"
  fi
}

e2e_init "$state"
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- reading the cluster and the operator ---------------------------------------------------------

# A list from the API server as a server-side Table without the objects (small even for 10,000
# Pods, so that polling loads the API server little), summed up by $4 (python, reading `table`).
api_server='' ca='' cert='' key=''
read_credentials() {
  local view='{.clusters[0].cluster.server} {.clusters[0].cluster.certificate-authority}'
  view+=' {.users[0].user.client-certificate} {.users[0].user.client-key}'
  # (jsonpath prints no newline, so read reports the end of its input)
  read -r api_server ca cert key < <(kubectl config view --minify -o jsonpath="$view") || true
  [[ -n $api_server && -f $ca && -f $cert && -f $key ]] ||
    fatal "cannot read the admin's credentials from $KUBECONFIG"
}

table_summary() {
  local path=$1 labels=$2 fields=$3 summary=$4 query=()
  query=(--data-urlencode includeObject=None --data-urlencode "labelSelector=$labels")
  [[ -z $fields ]] || query+=(--data-urlencode "fieldSelector=$fields")
  curl -sfG --max-time 60 --cacert "$ca" --cert "$cert" --key "$key" \
    -H 'Accept: application/json;as=Table;v=v1;g=meta.k8s.io' "${query[@]}" "$api_server$path" |
    python3 -c '
import json, sys
table = json.load(sys.stdin)
columns = [c["name"] for c in table["columnDefinitions"]]
rows = [dict(zip(columns, r["cells"])) for r in table["rows"]]
print(eval(sys.argv[1]))
' "$summary"
}

pods_path=/api/v1/namespaces/$namespace/pods
jobs_path=/apis/autotune.io/v1alpha1/namespaces/$namespace/autotunejobs

# How many Pods match labels $1 (and fields $2).
pod_count() { table_summary "$pods_path" "$1" "${2:-}" 'len(rows)'; }

# "jobs succeeded failed trials-succeeded" of the jobs that match labels $1.
job_summary() {
  table_summary "$jobs_path" "$1" '' \
    '" ".join(map(str, (len(rows), sum(r["Phase"] == "Succeeded" for r in rows),
       sum(r["Phase"] == "Failed" for r in rows), sum(r["Succeeded"] or 0 for r in rows))))'
}

metrics_port=''
# The sum of one metric's samples in a scrape of the operator, over all label sets.
metric_sum() {
  curl -sf --max-time 10 "http://127.0.0.1:$metrics_port/metrics" |
    awk -v name="$1" '
      index($0, name) == 1 && substr($0, length(name) + 1, 1) ~ /[{ ]/ { total += $NF }
      END { printf "%d", total }'
}

# autotune_kube_requests_total by label set, one "labels count" line each.
requests_by_verb() {
  curl -sf --max-time 10 "http://127.0.0.1:$metrics_port/metrics" |
    awk 'index($0, "autotune_kube_requests_total{") == 1 { print $1, $NF }'
}

operator_pid() { cat "$E2E_STATE/operator.pid"; }
# utime + stime in clock ticks (fields 14 and 15 of /proc/PID/stat, after the command's name).
cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
peak_rss_kib() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status"; }
now() { date +%s.%N; }
elapsed() { awk -v from="$1" -v to="$2" 'BEGIN { printf "%.1f", to - from }'; }

# Polls "$@" (which may set $progress) until it succeeds, for at most $1 seconds; says every 30 s
# on stderr how far it got, since the large runs take many minutes.
await() {
  local seconds=$1 what=$2
  shift 2
  local deadline=$((SECONDS + seconds)) next=$((SECONDS + 30))
  progress=''
  until "$@"; do
    ((SECONDS < deadline)) || fatal "gave up after ${seconds}s waiting for $what ($progress)"
    if ((SECONDS >= next)); then
      log "waiting for $what: $progress"
      next=$((SECONDS + 30))
    fi
    sleep 0.3
  done
}

# --- the operator ---------------------------------------------------------------------------------

leading() { [[ $(metric_sum autotune_leader) == 1 ]]; }

# Starts the operator afresh and waits until it leads, so that the run starts with it working.
restart_operator() {
  e2e_stop_operator
  e2e_start_operator >/dev/null 2>&1 || fatal "the operator did not start; see $E2E_OPERATOR_LOG"
  metrics_port=$(grep '"msg":"starting"' "$E2E_OPERATOR_LOG" | tail -1 |
    sed -n 's/.*"metricsPort":\([0-9]*\).*/\1/p')
  [[ -n $metrics_port ]] || fatal "the operator announced no metrics port"
  await 120 "the operator to take the leader lease" leading
}

# --- the jobs -------------------------------------------------------------------------------------

# One job: a grid of exactly 10 configurations (ZeRO-1, micro-batches 1..10) that all fit
# (distilbert's model on one 32 GiB GPU fits 280), run at once, each trial-sim launch ending as
# soon as it can (no startup sleep, no step sleep).
job_manifest() {
  local name=$1 n=$2
  cat <<JOB
---
apiVersion: autotune.io/v1alpha1
kind: AutotuneJob
metadata:
  name: $name
  namespace: $namespace
  labels: {autotune-bench/scale: "$n"}
spec:
  deepspeedConfig:
    train_micro_batch_size_per_gpu: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    gradient_accumulation_steps: 1
    zero_optimization: {stage: [1]}
  model: {numParameters: 66000000, activationMemoryPerSample: 114900000}
  resources: {gpusPerTrial: 1, gpuMemory: 32Gi}
  search: {strategy: grid, metric: throughput, maxTrials: $trials_per_job, earlyStopping: 0, seed: 1}
  parallelism: $trials_per_job
  trialTimeout: 10m
  template:
    spec:
      containers:
        - name: trainer
          image: ghcr.io/autotune-operator/trial-sim:0.1.0
          command: [trial-sim, --profile, distilbert, --startup-seconds, "0"]
          args: [--deepspeed, /etc/autotune/ds_config.json]
          # Each job its own trials: identical jobs would take each other's kept results (reuse)
          # and launch nothing.
          env: [{name: BENCH_JOB, value: $name}]
JOB
}

jobs_file() {
  local n=$1 file=$state/jobs-$1.yaml index
  : >"$file"
  for ((index = 1; index <= n; index++)); do
    job_manifest "$(printf 'scale-%d-%04d' "$n" "$index")" "$n" >>"$file"
  done
  echo "$file"
}

# All $1 jobs Succeeded (a Failed one ends the benchmark).
jobs_succeeded() {
  local n=$1 total succeeded failed trials
  read -r total succeeded failed trials < <(job_summary "autotune-bench/scale=$n") || return 1
  progress="$succeeded of $n jobs Succeeded, $trials trials measured"
  ((failed == 0)) || fatal "$failed of the $n jobs Failed; see $E2E_OPERATOR_LOG"
  ((total == n && succeeded == n))
}

no_jobs() {
  local count
  count=$(table_summary "$jobs_path" autotune-bench/scale '' 'len(rows)') || return 1
  progress="$count jobs left"
  ((count == 0))
}

# No Pod matches labels $1.
no_pods() {
  local count
  count=$(pod_count "$1") || return 1
  progress="$count Pods left"
  ((count == 0))
}

# --- the baseline's Pods: the operator's own trial Pods, captured from a warm-up job --------------

# Runs one job and keeps every trial Pod the operator makes for it as the API server returns it
# (a watch, since the Pods go as soon as their trials end); true if all 10 were seen.
capture_trial_pods() {
  local name=$1 file=$state/captured.json
  kubectl get pods -n "$namespace" -l "autotune.io/job=$name" --watch -o json >"$file" 2>/dev/null &
  watch_pid=$!
  job_manifest "$name" warmup | kubectl create -f - >/dev/null
  await 300 "the warm-up job $name to succeed" jobs_succeeded_named "$name"
  await 300 "the trial Pods of $name to go" no_pods "autotune.io/job=$name"
  stop_background
  kubectl delete atj "$name" -n "$namespace" --wait=false >/dev/null
  await 300 "the warm-up job $name to go" no_jobs
  python3 - "$file" "$state/template.json" "$name" "$trials_per_job" <<'PY'
import json, sys
source, target, job, expected = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
text, decoder, at, pods = open(source).read(), json.JSONDecoder(), 0, {}
while True:
    while at < len(text) and text[at].isspace():
        at += 1
    if at >= len(text):
        break
    try:
        pod, at = decoder.raw_decode(text, at)
    except json.JSONDecodeError:
        break  # the watch was stopped in the middle of an object
    pods.setdefault(pod["metadata"]["name"], pod)
if len(pods) != expected:
    sys.exit(f"saw {len(pods)} of the {expected} trial Pods of {job}")
templates = []
for name, pod in sorted(pods.items()):
    meta, spec = pod["metadata"], pod["spec"]
    # What the API server added (the node, the service account token volume, default
    # tolerations, priority) and what ties the Pod to the job goes; the rest is the operator's.
    for field in ("nodeName", "tolerations", "priority", "preemptionPolicy"):
        spec.pop(field, None)
    injected = {v["name"] for v in spec.get("volumes", []) if v["name"].startswith("kube-api-access-")}
    spec["volumes"] = [v for v in spec.get("volumes", []) if v["name"] not in injected]
    for container in spec["containers"]:
        container["volumeMounts"] = [
            m for m in container.get("volumeMounts", []) if m["name"] not in injected]
    labels = {k: v for k, v in meta.get("labels", {}).items() if not k.startswith("autotune.io/")}
    templates.append({
        "suffix": name[len(job) + 1:],
        "pod": {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"labels": labels, "annotations": meta.get("annotations", {})},
                "spec": spec}})
json.dump(templates, open(target, "w"))
PY
}

jobs_succeeded_named() {
  local phase
  phase=$(kubectl get atj "$1" -n "$namespace" -o jsonpath='{.status.phase}') || return 1
  progress="phase ${phase:-none}"
  [[ $phase != Failed ]] || fatal "the warm-up job $1 Failed; see $E2E_OPERATOR_LOG"
  [[ $phase == Succeeded ]]
}

# $1 x 10 Pods, one per trial of each of $1 jobs, as one List.
baseline_file() {
  local n=$1 file=$state/pods-$1.json
  python3 - "$state/template.json" "$n" "$namespace" >"$file" <<'PY'
import copy, json, sys
templates, n, namespace = json.load(open(sys.argv[1])), int(sys.argv[2]), sys.argv[3]
items = []
for index in range(1, n + 1):
    for template in templates:
        pod = copy.deepcopy(template["pod"])
        pod["metadata"]["name"] = f"plain-{n}-{index:04d}-{template['suffix']}"
        pod["metadata"]["namespace"] = namespace
        pod["metadata"]["labels"]["autotune-bench/plain"] = str(n)
        items.append(pod)
json.dump({"apiVersion": "v1", "kind": "List", "items": items}, sys.stdout)
PY
  echo "$file"
}

# All $1 baseline Pods Succeeded (a Failed one ends the benchmark).
pods_succeeded() {
  local n=$1 pending failed
  pending=$(pod_count "autotune-bench/plain=$n" status.phase!=Succeeded) || return 1
  failed=$(pod_count "autotune-bench/plain=$n" status.phase=Failed) || return 1
  progress="$pending of $((n * trials_per_job)) Pods not Succeeded yet"
  ((failed == 0)) || fatal "$failed baseline Pods Failed; see $E2E_NODE_SIM_LOG"
  ((pending == 0))
}

# Seconds from the first Pod created to the last one Succeeded and deleted.
run_baseline() {
  local n=$1 file start end
  local timeout=${AUTOTUNE_SCALE_TIMEOUT:-$((600 + n * trials_per_job / 4))}
  file=$(baseline_file "$n")
  start=$(now)
  kubectl create -f "$file" >/dev/null
  await "$timeout" "the $((n * trials_per_job)) baseline Pods to succeed" pods_succeeded "$n"
  kubectl delete pods -n "$namespace" -l "autotune-bench/plain=$n" --wait=false >/dev/null
  await "$timeout" "the baseline Pods to go" no_pods "autotune-bench/plain=$n"
  end=$(now)
  elapsed "$start" "$end"
}

# --- one N ----------------------------------------------------------------------------------------

start_sampler() {
  (
    set +e
    while :; do
      metric_sum autotune_workqueue_depth
      echo
      sleep 0.5
    done
  ) >"$state/depth" 2>/dev/null &
  sampler_pid=$!
}

measure() {
  local n=$1 file baseline
  local trials=$((n * trials_per_job))
  local timeout=${AUTOTUNE_SCALE_TIMEOUT:-$((600 + n * trials_per_job / 4))}
  file=$(jobs_file "$n")

  log "N=$n: $trials plain Pods (the operator stopped)"
  e2e_stop_operator
  baseline=$(run_baseline "$n")

  log "N=$n: $n jobs of $trials_per_job trials (the operator restarted)"
  restart_operator
  local pid ticks requests reconciles start end audit_from
  pid=$(operator_pid)
  audit_from=$(($(e2e_audit_lines) + 1))
  ticks=$(cpu_ticks "$pid")
  requests=$(metric_sum autotune_kube_requests_total)
  reconciles=$(metric_sum autotune_reconcile_total)
  requests_by_verb >"$state/requests-before"
  start_sampler
  start=$(now)
  kubectl create -f "$file" >/dev/null
  await "$timeout" "$n jobs to succeed" jobs_succeeded "$n"
  await "$timeout" "their trial Pods to go" no_pods autotune.io/job
  end=$(now)
  stop_background
  ticks=$(($(cpu_ticks "$pid") - ticks))
  requests=$(($(metric_sum autotune_kube_requests_total) - requests))
  reconciles=$(($(metric_sum autotune_reconcile_total) - reconciles))
  requests_by_verb >"$state/requests-after"
  log "N=$n: requests per trial by verb and code: $(awk -v trials="$trials" '
    NR == FNR { before[$1] = $2; next }
    { d = $2 - before[$1]; if (d > 0) printf "%s %.2f; ", $1, d / trials }' \
    "$state/requests-before" "$state/requests-after")"
  local rss depth measured
  rss=$(peak_rss_kib "$pid")
  depth=$(sort -n "$state/depth" | tail -1)
  read -r _ _ _ measured < <(job_summary "autotune-bench/scale=$n")
  ((measured == trials)) || fatal "the $n jobs measured $measured trials, not $trials"
  # What was really launched: the Pods the API server created for the operator.
  local created
  created=$(e2e_pods_created "$audit_from" "$namespace")
  ((created == trials)) ||
    fatal "the $n jobs report $measured trials measured, but the operator created $created Pods"

  awk -v n="$n" -v trials="$trials" -v wall="$(elapsed "$start" "$end")" -v base="$baseline" \
    -v ticks="$ticks" -v hz="$(getconf CLK_TCK)" -v rss="$rss" -v requests="$requests" \
    -v reconciles="$reconciles" -v depth="${depth:-0}" 'BEGIN {
      printf "| %d | %d | %.1f | %.1f | %.2f | %.1f | %.0f | %.1f | %.1f | %d |\n", n, trials, wall,
        base, wall / base, ticks * 1000 / hz / trials, rss / 1024, requests / trials,
        reconciles / trials, depth }'

  log "N=$n: deleting the jobs"
  kubectl delete atj -n "$namespace" -l autotune-bench/scale --wait=false >/dev/null
  await "$timeout" "the jobs to go" no_jobs
  await "$timeout" "their trial Pods to go" no_pods autotune.io/job
}

# --- the run --------------------------------------------------------------------------------------

log "starting the environment: $nodes nodes x $gpus_per_node GPUs, operator $E2E_OPERATOR_FLAGS"
e2e_up >"$state/up.log" 2>&1 || fatal "the environment did not start; see $state/up.log"
read_credentials
kubectl create namespace "$namespace" >/dev/null
metrics_port=$(grep '"msg":"starting"' "$E2E_OPERATOR_LOG" | tail -1 |
  sed -n 's/.*"metricsPort":\([0-9]*\).*/\1/p')
await 120 "the operator to take the leader lease" leading
log "warm-up: one job, whose trial Pods become the baseline's Pods"
captured=false
for attempt in 1 2 3; do
  if capture_trial_pods "scale-warmup-$attempt"; then
    captured=true
    break
  fi
done
$captured || fatal "could not capture the operator's trial Pods"

memory_gib=$(awk '/^MemTotal:/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo)
cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
slots=$((nodes * gpus_per_node))
echo "Machine: $(nproc) CPUs (${cpu_model:-unknown model}), $memory_gib GiB memory."
echo "Command: \`$command_line\`"
echo "Cluster: scripts/e2e-env with $nodes simulated nodes x $gpus_per_node GPUs ($slots GPUs for" \
  "at most $((trials_per_job * max_jobs)) trials at once); operator \`$E2E_OPERATOR_FLAGS\`."
((slots >= trials_per_job * max_jobs)) ||
  echo "Note: fewer GPUs than trials: GPU slots limit the largest runs."
echo
echo "| jobs | trials | wall time (s) | plain Pods wall time (s) | ratio | operator CPU ms / trial |" \
  "operator peak RSS (MiB) | API requests / trial | reconciles / trial | work-queue depth peak |"
echo "| --: | --: | --: | --: | --: | --: | --: | --: | --: | --: |"
for n in "${sizes[@]}"; do
  measure "$n"
done
echo
echo "Each job: a grid of 10 trials (ZeRO-1 x micro-batch 1..10, parallelism 10, 1 GPU each, its" \
  "own BENCH_JOB variable, so that no job can reuse another's results: the run checks that the" \
  "operator created one Pod per trial, by the API server's audit log), each" \
  "trial trial-sim with --startup-seconds 0. Wall time: the first job created (one" \
  "\`kubectl create -f\` of all N) to the last Succeeded with its trial Pods gone, polled every" \
  "0.3 s. Plain Pods: the same N x 10 Pods (the operator's trial Pods, captured from a warm-up" \
  "job) created with one \`kubectl create -f\`, awaited until Succeeded and deleted with" \
  "\`kubectl delete -l\`, with the operator stopped. The operator is restarted before each N, so" \
  "its peak RSS (VmHWM) and its counters are that N's alone; CPU is its utime + stime over the" \
  "run; the work-queue depth is sampled every 0.5 s."
