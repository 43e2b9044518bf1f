#!/usr/bin/env bash
# The end-to-end tier: the operator as its own process, with only the RBAC the Helm chart grants,
# against a real control plane (kube-apiserver, etcd, scheduler, controller manager) whose GPU
# Nodes are simulated by autotune-node-sim, so that each trial Pod runs trial-sim for real.
#
# Cases, each in a namespace of its own: the GPT2-large example to DeepSpeed's published best, its
# ConfigMap, columns and Events; grid, random and model-based; an OOM boundary; a crashing trial;
# a hung trial past trialTimeout; a job no node can hold; specs refused by the API server and by
# the operator; two jobs sharing the GPUs; a job deleted mid-run; trials that misbehave (a child
# left running, a progress bar, metrics that are not UTF-8, not numbers, or 1 MiB long); a Pod of
# another owner holding a trial's Pod name; a shared cluster: GPUs other workloads hold for longer
# than three scheduling timeouts, a ResourceQuota smaller than the job's parallelism, a namespace
# enforcing Pod Security restricted, a trial preempted by a higher priority, and a job whose output
# is in conflict holding nothing back from another namespace's; faults: a Node deleted and
# registered again, a trial Pod deleted, a trial process killed,
# kube-apiserver and etcd restarted, and a proxy between the operator and the API server that
# drops, stalls and answers 429 and 500; the operator killed with SIGKILL mid-job and restarted,
# without a trial run twice or a result lost; and, while it was down, a tenant's AutotuneJob at a
# search's name with the job as its controller, neither read nor adopted. At the end, every log of the run is
# searched for the operator's token and for private keys, and the API server's audit log is kept
# for rights_used_test.sh, which holds the chart's RBAC to the requests of every theme's run.
#
# Usage: AUTOTUNE_E2E_THEME=THEME e2e_test.sh OPERATOR NODE_SIM TRIAL_SIM SOURCE_DIR
# THEME is one of the themes at the end of this file, a share of the cases that runs on a cluster
# of its own; AUTOTUNE_E2E_CASES (names of the case_* functions, e.g. "example restart") runs only
# those instead. AUTOTUNE_E2E_AUDIT_DIR keeps the audit log there (keep_audit_log);
# AUTOTUNE_E2E_KEEP=1 keeps the work folder (logs, launch logs) even when every check passes.
set -euo pipefail

if (($# != 4)); then
  echo "usage: $0 OPERATOR NODE_SIM TRIAL_SIM SOURCE_DIR" >&2
  exit 2
fi
export AUTOTUNE_OPERATOR=$1 AUTOTUNE_NODE_SIM=$2 AUTOTUNE_TRIAL_SIM=$3
source_dir=$(cd "$4" && pwd)
# shellcheck source=tests/e2e/support.sh
source "$source_dir/tests/e2e/support.sh"

e2e_test_start autotune-e2e

# The fault proxy, if a case left it running, stops before the environment does.
on_cleanup() { stop_fault_proxy; }

# --- the cases -----------------------------------------------------------------------------------

case_rbac() {
  echo
  note "case rbac: the operator runs as ServiceAccount $E2E_OPERATOR_ACCOUNT with the chart's RBAC"
  local as=(kubectl --kubeconfig "$E2E_OPERATOR_KUBECONFIG")
  expect "the operator may list AutotuneJobs in every namespace" \
    "${as[@]}" auth can-i list autotunejobs.autotune.io --all-namespaces
  expect "the operator may create Pods" "${as[@]}" auth can-i create pods -n default
  expect "the operator may not list Secrets" not "${as[@]}" auth can-i list secrets -A
  expect "the operator may not delete Nodes" not "${as[@]}" auth can-i delete nodes
  expect "the operator may not write Leases outside autotune-system" \
    not "${as[@]}" auth can-i update leases.coordination.k8s.io -n default
  expect "the operator is not the admin" \
    test "$("${as[@]}" auth whoami -o jsonpath='{.status.userInfo.username}')" = \
    "system:serviceaccount:autotune-system:$E2E_OPERATOR_ACCOUNT"
}

# examples/gpt2-large-trial-sim.yaml as a user applies it, in the case's namespace.
apply_example() {
  kubectl patch --local -f "$source_dir/examples/gpt2-large-trial-sim.yaml" --type=merge \
    -p "{\"metadata\": {\"namespace\": \"$case_ns\"}}" -o yaml | kubectl apply -f -
}

configmap_data() {
  kubectl get configmap "$1" -n "$case_ns" -o jsonpath="{.data.${2//./\\.}}"
}

# ConfigMap $1's key $2 holds the text $3.
configmap_holds() {
  grep -qF -- "$3" <(configmap_data "$1" "$2") && return 0
  configmap_data "$1" "$2"
  return 1
}

configmap_has_keys() {
  local key
  for key in ds_config.json cmd.txt summary.txt results.json; do
    [[ -n $(configmap_data "$1" "$key") ]] || { echo "no $key in ConfigMap $1"; return 1; }
  done
}

optimal_config() {
  configmap_data "$1" ds_config.json |
    inspect ds-config --micro-batch 3 --zero-stage 1 --without train_batch_size --without autotuning
}

results_json_complete() {
  local recorded
  mapfile -t recorded < <(field "$2" '{range .status.results[*]}{.name}{"\n"}{end}')
  configmap_data "$1" results.json |
    inspect results-json --best "$(field "$2" '{.status.best.trial}')" --recorded "${recorded[@]}"
}

# `kubectl get atj` prints the CRD's columns, and -o wide the rest.
printer_columns() {
  local plain wide
  local wide_header='^NAME +PHASE +BEST +METRIC +BEST TRIAL +LAUNCHED +SUCCEEDED +RUNNING'
  wide_header+=' +QUEUED +MAX TRIALS +GPU-HOURS +SAVED +AGE$'
  plain=$(kubectl get atj "$1" -n "$case_ns")
  wide=$(kubectl get atj "$1" -n "$case_ns" -o wide)
  echo "$plain"
  echo "$wide"
  [[ $(head -1 <<<"$plain") =~ ^NAME\ +PHASE\ +BEST\ +LAUNCHED\ +SUCCEEDED\ +QUEUED\ +AGE$ ]] &&
    [[ $(head -1 <<<"$wide") =~ $wide_header ]] &&
    [[ $(tail -1 <<<"$wide") =~ ^$1\ +Succeeded\ +[0-9.]+\ +throughput\ +$published_best\  ]]
}

# The kubectl plugin, which kubectl finds on the PATH: the kubectl-autotune link beside the built
# binaries, on the admin's kubeconfig as a user would run it.
plugin() { PATH="$(dirname "$AUTOTUNE_OPERATOR"):$PATH" kubectl autotune "$@"; }

plugin_report() {
  local report=$work/$1-report.html
  plugin report "$1" -n "$case_ns" --output-file "$report" && grep -q "$published_best" "$report"
}

plugin_best() {
  plugin best "$1" -n "$case_ns" >"$work/$1-best.json" &&
    configmap_data "$1-optimal" ds_config.json >"$work/$1-configmap.json" &&
    inspect same-json "$work/$1-best.json" "$work/$1-configmap.json"
}

case_example() {
  begin_case example
  local job=gpt2-large
  check "examples/gpt2-large-trial-sim.yaml is applied" apply_example || return 0
  check "the example Succeeds within 300s" ends_in "$job" Succeeded 300 || return 0
  expect "its best is DeepSpeed's published $published_best" best_is "$job" "$published_best"
  expect "conditions: SpecValid and Complete True, Running False" job_has "$job" \
    --condition SpecValid=True --condition Complete=True --condition Running=False
  expect "status.trials counts every recorded result; none is recorded twice" job_has "$job" \
    --counts-results trials.launched --unique-names --results-at-least 1 \
    --outcome-counted succeeded=Succeeded
  expect "the ConfigMap gpt2-large-optimal has ds_config.json, cmd.txt, summary.txt, results.json" \
    configmap_has_keys gpt2-large-optimal
  expect "ds_config.json: micro-batch 3, ZeRO stage 1, train batch 48, no autotuning section" \
    optimal_config gpt2-large-optimal
  expect "cmd.txt passes --per_device_train_batch_size 3" \
    grep -q -- '--per_device_train_batch_size 3' <(configmap_data gpt2-large-optimal cmd.txt)
  expect "summary.txt is DeepSpeed's table with the global best" \
    grep -Eq "^\| global +\| [0-9]+ +\| [0-9.]+ +\| $published_best" \
    <(configmap_data gpt2-large-optimal summary.txt)
  expect "results.json holds every recorded trial, each with its config patch" \
    results_json_complete gpt2-large-optimal "$job"
  expect "kubectl get atj prints the phase, best, trials and age columns" printer_columns "$job"
  expect "kubectl autotune report draws the job's report, naming its best trial" \
    plugin_report "$job"
  expect "kubectl autotune best prints the ConfigMap's ds_config.json" plugin_best "$job"
  expect "Events: TrialLaunched, TrialSucceeded, TrialOOM, BestImproved, Completed" \
    events_include "$job" TrialLaunched TrialSucceeded TrialOOM BestImproved Completed
  expect "no trial Pod remains (cleanup DeleteFinished)" eventually 30 no_trial_pods "$job"
  end_case
}

# Grid, random and model-based over the same small space at once, one namespace each: stages 0
# and 1, micro-batches 1 to 4; the memory model prunes three of the eight, and every strategy
# ends where the engine's tests say, at the published best.
case_strategies() {
  local strategy
  for strategy in grid random model-based; do
    begin_case "$strategy"
    expect "a $strategy job is created" create_job "$strategy" strategy="$strategy" \
      stages='[0, 1]' micro='[1, 2, 3, 4]' early=0
  done
  for strategy in grid random model-based; do
    case_ns=e2e-$strategy
    echo
    note "case $strategy: results"
    check "$strategy Succeeds within 240s" ends_in "$strategy" Succeeded 240 || continue
    expect "$strategy ends at $published_best" best_is "$strategy" "$published_best"
    expect "$strategy ran at most the 5 configurations left after pruning 3" job_has \
      "$strategy" --equals trials.pruned=3 --results-at-least 1 --results-at-most 5
    expect "$strategy launched each trial once" launched_once "$strategy"
    end_case
  done
}

# Stage 1 alone: the micro-batch search steps over the memory boundary at 4. Its afterTuning Job
# runs once the search is over, with the best config.
case_oom() {
  begin_case oom
  local job=oom after=$work/after-tuning.args
  check "a job probing the OOM boundary, with an afterTuning Job, is created" create_job "$job" \
    stages='[1]' after_tuning="$(after_tuning_writing_to "$after")" || return 0
  check "it Succeeds within 120s" ends_in "$job" Succeeded 120 || return 0
  expect "a result has outcome OOM, counted in status.trials.oom" job_has "$job" \
    --some-outcome OOM --outcome-counted oom=OOM
  expect "the OOM reason is the CUDA out-of-memory message" job_has "$job" \
    --each-reason "OOM=out of memory"
  expect "its best is $published_best" best_is "$job" "$published_best"
  expect "a TrialOOM Event" events_include "$job" TrialOOM
  expect "status.afterTuningJob names $job-after-tuning" \
    job_has "$job" --equals afterTuningJob=oom-after-tuning
  expect "the Job completes within 60s" eventually 60 job_complete "$job-after-tuning"
  expect "its container ran with the best micro-batch, 3" ran_with_best "$after"
  end_case
}

case_profiling() {
  begin_case profiling
  local job=profiling
  check "a job that does not give its model is created" create_job "$job" model='{}' || return 0
  check "it Succeeds within 180s" ends_in "$job" Succeeded 180 || return 0
  expect "the profiling trial ran first and Succeeded" job_has "$job" \
    --first-trial profile_model_info=Succeeded
  expect "status.model keeps what it measured" job_has "$job" \
    --above model.numParameters=0 --above model.activationMemoryPerSample=0
  expect "its best is $published_best" best_is "$job" "$published_best"
  expect "every trial, the profiling one included, launched exactly once" launched_once "$job"
  end_case
}

case_crash() {
  begin_case crash
  local job=crash
  check "a job whose trials crash with 'boom' is created" create_job "$job" stages='[1]' \
    parallelism=1 max_failed=1 \
    command="[trial-sim, --profile, gpt2-large, --fail-with, boom, --e2e-run, $marker]" ||
    return 0
  check "it ends Failed within 120s" ends_in "$job" Failed 120 || return 0
  expect "the trial's outcome is Failed with a reason containing boom" job_has "$job" \
    --results 1 --every-outcome Failed --each-reason Failed=boom
  expect "the message and the Failed condition name spec.maxFailedTrials" job_has "$job" \
    --message maxFailedTrials --condition Failed=True --condition-message Failed=maxFailedTrials
  expect "Events: TrialFailed" events_include "$job" TrialFailed
  expect "no trial Pod remains" eventually 30 no_trial_pods "$job"
  end_case
}

# Two trials; z1_gas1_tmbspg1 hangs (trial-sim's start-up takes 600s) past trialTimeout 3s, while
# z1_gas1_tmbspg3 runs normally.
case_timeout() {
  begin_case timeout
  local job=hung hang="hung-$marker"
  # shellcheck disable=SC2016  # expanded by the trial's shell, not here
  local script='if [ "$AUTOTUNE_TRIAL" = z1_gas1_tmbspg1 ];'
  script+=' then exec trial-sim --startup-seconds 600 "$@";'
  script+=' else exec trial-sim --startup-seconds 0.5 "$@"; fi'
  check "a job with a hanging trial and trialTimeout 3s is created" create_job "$job" \
    strategy=grid stages='[1]' micro='[1, 3]' early=0 timeout=3s arg_mappings='{}' \
    command="[sh, -c, '$script', trial-sim, --profile, gpt2-large, --e2e-run, $hang]" || return 0
  check "it Succeeds within 120s" ends_in "$job" Succeeded 120 || return 0
  expect "z1_gas1_tmbspg1 has outcome TimedOut, counted in status.trials.timedOut" job_has \
    "$job" --outcome z1_gas1_tmbspg1=TimedOut --equals trials.timedOut=1
  expect "the other trial is the best" best_is "$job" "$published_best"
  expect "the timed-out trial's Pod is gone" \
    eventually 30 not kubectl get pod "$job-z1-gas1-tmbspg1" -n "$case_ns"
  expect "its process is stopped" eventually 30 no_process_with "$hang"
  end_case
}

case_unschedulable() {
  begin_case unschedulable
  local job=too-big
  check "a job wanting 64 GPUs per trial (nodes have 16) is created" create_job "$job" gpus=64 \
    parallelism=1 || return 0
  check "condition Running=False, reason Unschedulable, naming spec.resources.gpusPerTrial" \
    eventually 60 job_has "$job" \
    --condition Running=False --condition-reason Running=Unschedulable \
    --condition-message Running=spec.resources.gpusPerTrial || return 0
  expect "it stays Pending with status.trials.running 0 and no trial Pod Running" \
    throughout 5 job_has "$job" \
    --phase Pending --zero-or-absent trials.running
  expect "no trial Pod of it is Running" no_running_pods "$job"
  kubectl delete atj "$job" -n "$case_ns" --wait=false >/dev/null
  end_case
}

no_pods_in_namespace() { [[ -z $(kubectl get pods -n "$case_ns" -o name) ]]; }

refused_naming() {
  local field=$1 output
  shift
  if output=$("$@" 2>&1); then
    echo "accepted: $output"
    return 1
  fi
  echo "$output"
  grep -qF "$field" <<<"$output"
}

# shellcheck disable=SC2016  # ${no_such_key} is the text of the spec and of the check
case_invalid() {
  begin_case invalid
  expect "the API server refuses search.strategy bogus, naming spec.search.strategy" \
    refused_naming spec.search.strategy create_job refused strategy=bogus
  check "a job whose argMappings names no deepspeedConfig key is created" \
    create_job unmapped arg_mappings='{no_such_key: --no-such-flag}' &&
    expect "it gets SpecValid=False naming spec.argMappings.no_such_key, and phase Failed" \
      eventually 30 job_has unmapped \
      --condition SpecValid=False --condition-message SpecValid=spec.argMappings.no_such_key \
      --phase Failed
  check "a job whose command holds an unknown \${placeholder} is created" create_job unknown \
    command="[trial-sim, '--tag=\${no_such_key}', --e2e-run, $marker]" &&
    expect "it gets SpecValid=False naming the command and the placeholder, and phase Failed" \
      eventually 30 job_has unknown \
      --condition SpecValid=False --phase Failed \
      --condition-message 'SpecValid=spec.template.spec.containers[0].command' \
      --condition-message 'SpecValid=${no_such_key}'
  expect "an InvalidSpec Event" events_include unmapped InvalidSpec
  expect "no Pod is created for either" throughout 3 no_pods_in_namespace
  end_case
}

# One sample of the trial Pods of every namespace: the number Running and the number the
# scheduler could not place.
pod_states() {
  local states
  local pod='{.status.phase}{" "}{.status.conditions[?(@.type=="PodScheduled")].reason}{"\n"}'
  states=$(kubectl get pods -A -l autotune.io/job -o jsonpath="{range .items[*]}$pod{end}" \
    2>/dev/null) || states=''
  echo "$(grep -c '^Running' <<<"$states") $(grep -c 'Unschedulable' <<<"$states")"
}

# Samples the trial Pods of every namespace until $1 is removed: one line of pod_states in $2 per
# sample.
sample_pods() { sample_while "$1" "$2" pod_states; }

at_most_running() {
  local limit=$1 samples=$2 count
  count=$(wc -l <"$samples")
  echo "$count samples, at most $(most 1 "$samples") trial Pods Running at once"
  ((count >= 5 && $(most 1 "$samples") >= 1 && $(most 1 "$samples") <= limit))
}

both_best() { best_is "$1" "$published_best" && best_is "$2" "$published_best"; }

# Configs as users write them (tests/configs), applied as they are: Hugging Face's ZeRO-3
# template with its "auto" values, DeepSpeed's tutorial config and a fuller autotuning section,
# a fixed global batch, and YAML 1.1 spellings. Each ends Succeeded; the ConfigMap keeps the "auto"
# values and the fixed batch; the operator process is the same one throughout.
corpus_files=(03-hf-zero3-offload-cpu.yaml 05-ds-autotuning-tutorial.yaml
  06-ds-autotuning-section.yaml 10-fixed-global-batch.yaml 11-yaml-spellings.yaml)

apply_corpus_file() {
  kubectl patch --local -f "$source_dir/tests/configs/$1" --type=merge \
    -p "{\"metadata\": {\"namespace\": \"$case_ns\"}}" -o yaml | kubectl apply -f -
}

corpus_job_name() {
  kubectl create --dry-run=client -o jsonpath='{.metadata.name}' -f "$source_dir/tests/configs/$1"
}

# The optimal config keeps the input's "auto" values (other than the tuned batch keys), a numeric
# train_batch_size, and a micro-batch x accumulation x 16 GPUs equal to it.
keeps_user_values() {
  local job=$2 optimal=$work/$2-optimal.json
  configmap_data "$job-optimal" ds_config.json >"$optimal" &&
    kubectl get atj "$job" -n "$case_ns" -o json | inspect user-values "$optimal"
}

case_configs() {
  begin_case configs
  local pid file job
  pid=$(operator_pid)
  for file in "${corpus_files[@]}"; do
    expect "tests/configs/$file is applied" apply_corpus_file "$file"
  done
  for file in "${corpus_files[@]}"; do
    job=$(corpus_job_name "$file")
    check "$job Succeeds within 300s" ends_in "$job" Succeeded 300 || continue
    expect "$job's ConfigMap keeps its \"auto\" values and fixed batch" \
      keeps_user_values "$file" "$job"
  done
  expect "autotuning keys with no effect here are reported in a SpecWarning Event" \
    events_include corpus-ds-autotuning-section SpecWarning
  expect "the operator never restarted" same_operator "$pid"
  end_case
}

# Two jobs each wanting both nodes (parallelism 2, 16 GPUs per trial) share 2 × 16 GPUs.
case_sharing() {
  begin_case sharing
  local flag=$work/sampling samples=$work/pods.samples
  : >"$samples"
  touch "$flag"
  sample_pods "$flag" "$samples" &
  local sampler=$!
  expect "job first is created" create_job first stages='[0, 1]' startup=1
  expect "job second is created" create_job second stages='[0, 1]' startup=1
  expect "first Succeeds within 300s" ends_in first Succeeded 300
  expect "second Succeeds within 300s" ends_in second Succeeded 300
  rm -f "$flag"
  wait "$sampler" || true
  expect "both end at $published_best" both_best first second
  expect "at no time were more than 2 trial Pods Running (2 nodes × 16 GPUs)" \
    at_most_running 2 "$samples"
  note "$(wc -l <"$samples") samples: at most $(most 1 "$samples") trial Pods Running and" \
    "$(most 2 "$samples") left unschedulable at once"
  end_case
}

case_deletion() {
  begin_case deletion
  local job=doomed slow="slow-$marker"
  check "a job with slow trials is created" create_job "$job" stages='[1]' \
    command="[trial-sim, --profile, gpt2-large, --startup-seconds, \"120\", --e2e-run, $slow]" ||
    return 0
  check "a trial Pod of it is Running" eventually 60 some_running_pod "$job" || return 0
  check "the job is deleted" kubectl delete atj "$job" -n "$case_ns" --wait=false || return 0
  expect "its trial Pods are garbage-collected within 60s" eventually 60 no_trial_pods "$job"
  expect "their processes are stopped" eventually 30 no_process_with "$slow"
  end_case
}

# Eight trials (stage 1, micro-batches 1 to 8; activations small enough that the memory model
# prunes none), each chosen by $AUTOTUNE_TRIAL to misbehave in its own way: a child process left
# running, a progress bar with no newline before a crash, metrics that are invalid UTF-8, NaN,
# negative, a string, or 1 MiB of JSON of which the kubelet keeps the last 4 KiB. Two run
# trial-sim. The job ends Succeeded, each trial with the outcome it earned and a reason the
# status can hold, and the operator process is the same one throughout.
# shellcheck disable=SC2016  # $... in the script is expanded by the trial's shell, not here
case_hostile() {
  begin_case hostile
  local job=hostile pid exceptions
  pid=$(operator_pid)
  exceptions=$(reconcile_exceptions) || exceptions=''
  # The forked child's marker, which the trial builds from $AUTOTUNE_TRIAL, so that the script's
  # text, on the command line of every trial's shell, does not match it.
  local orphan=orphan-of-z1_gas1_tmbspg1-$marker
  local bar='████████████████████████████████'
  # Each trial writes its own launch line, trial-sim none (--launch-log /dev/null).
  local script='echo "$AUTOTUNE_TRIAL" >>"$AUTOTUNE_SIM_LAUNCH_LOG"; out=$AUTOTUNE_METRICS_PATH;'
  script+=' case $AUTOTUNE_TRIAL in'
  script+=' z1_gas1_tmbspg1) sh -c "sleep 10000; :" "orphan-of-$AUTOTUNE_TRIAL-'"$marker"'" &'
  script+='   exec trial-sim --startup-seconds 5 "$@";;'
  script+=' z1_gas1_tmbspg2) i=0; while [ $i -lt 200 ];'
  script+='   do printf "\r%3d%%|'"$bar"'| %d/200" $i $i >&2; i=$((i + 1)); done; exit 1;;'
  script+=' z1_gas1_tmbspg3) exec trial-sim --startup-seconds 0.5 "$@";;'
  script+=' z1_gas1_tmbspg4) head -c 4096 /dev/zero | tr "\000" "\377" >"$out";;'
  script+=' z1_gas1_tmbspg5) echo "{\"throughput\": NaN}" >"$out";;'
  script+=' z1_gas1_tmbspg6) echo "{\"throughput\": -2.5}" >"$out";;'
  script+=' z1_gas1_tmbspg7) echo "{\"throughput\": \"1234.5\"}" >"$out";;'
  script+=' z1_gas1_tmbspg8) { echo "{\"throughput\": 1234.5, \"samples\": [";'
  script+='   yes 0, | head -n 350000; echo "0]}"; } >"$out";;'
  script+=' *) echo "no behaviour for $AUTOTUNE_TRIAL" >&2; exit 2;;'
  script+=' esac'
  local command="[sh, -c, '$script', trial-sim, --profile, gpt2-large, --launch-log, /dev/null,"
  command+=" --e2e-run, $marker]"
  check "a job whose eight trials each misbehave in their own way is created" create_job "$job" \
    strategy=grid stages='[1]' micro='[1, 2, 3, 4, 5, 6, 7, 8]' early=0 max_failed=20 \
    arg_mappings='{}' model='{numParameters: 774000000, activationMemoryPerSample: 1000000000}' \
    command="$command" || return 0
  expect "z1_gas1_tmbspg1's forked child runs while the trial does" \
    eventually 60 not no_process_with "$orphan"
  check "it Succeeds within 180s" ends_in "$job" Succeeded 180 || return 0
  expect "each of the eight trials is recorded once, and was launched once" launched_once "$job"
  expect "status.results names each trial once" job_has "$job" \
    --names z1_gas1_tmbspg{1..8}
  expect "the progress bar's trial Failed; the bad metrics are MetricsUnavailable" \
    job_has "$job" \
    --outcomes z1_gas1_tmbspg1=Succeeded z1_gas1_tmbspg2=Failed z1_gas1_tmbspg3=Succeeded \
    z1_gas1_tmbspg{4..8}=MetricsUnavailable
  expect "every reason is one line of at most 256 bytes as a JSON string" job_has "$job" \
    --reasons-one-line-within 256
  expect "the progress bar's reason has its exit status and whole █ characters only" \
    job_has "$job" \
    --reason-starts "z1_gas1_tmbspg2=exited 1" --reason z1_gas1_tmbspg2=█ \
    --reason-without-replacement z1_gas1_tmbspg2
  # What the operator read, not "exited 0 without writing its metrics file": the invalid bytes,
  # the NaN and the last 4 KiB of the 1 MiB are not JSON; the others give the value refused.
  expect "the bad metrics' reasons say what was wrong with what the trial wrote" \
    job_has "$job" \
    --reason "z1_gas1_tmbspg4=not a JSON object" --reason "z1_gas1_tmbspg5=not a JSON object" \
    --reason "z1_gas1_tmbspg8=not a JSON object" \
    --reason "z1_gas1_tmbspg6=not a positive number: -2.5" \
    --reason 'z1_gas1_tmbspg7=not a positive number: "1234.5"'
  expect "its best is $published_best" best_is "$job" "$published_best"
  expect "no trial Pod remains" eventually 30 no_trial_pods "$job"
  expect "the forked child is gone" eventually 30 no_process_with "$orphan"
  expect "the operator never restarted" same_operator "$pid"
  expect "no reconcile threw (autotune_reconcile_total{result=\"exception\"})" \
    no_new_exceptions "$exceptions"
  end_case
}

# A training command wrapped in a shell, as launch scripts are, with the micro-batch mapped to the
# trainer's flag. A script that sets the flag itself is refused before any Pod, saying how to pass
# it on; one that passes its arguments on with "$@" runs each trial at the micro-batch the trial
# is named for (trial-sim refuses a flag that disagrees with its config, as the Hugging Face
# Trainer does), and the job ends at the published best.
# shellcheck disable=SC2016  # "$@" and $AUTOTUNE_DS_CONFIG are the trial's shell's
case_wrapper() {
  begin_case wrapper
  local trainer='trial-sim --profile gpt2-large --startup-seconds 0.5 --e2e-run '"$marker"
  trainer+=' --deepspeed "$AUTOTUNE_DS_CONFIG"'
  check "a job whose wrapper script sets the mapped flag itself is created" create_job fixed \
    strategy=grid stages='[1]' micro='[1, 3]' early=0 args='[]' \
    command="[bash, -c, '$trainer --per_device_train_batch_size 1']" || return 0
  expect "it fails at once naming the script and the flag, and no Pod is created" \
    eventually 30 job_has fixed \
    --phase Failed \
    --condition-message "SpecValid=command[2]: sets --per_device_train_batch_size itself"
  expect "no Pod of it exists" eval '[[ -z $(trial_pods fixed) ]]'
  check "a job whose wrapper script passes its arguments on with \"\$@\" is created" \
    create_job forwarded strategy=grid stages='[1]' micro='[1, 3]' early=0 args='[]' \
    command="[bash, -c, '$trainer \"\$@\"']" || return 0
  check "it Succeeds within 120s" ends_in forwarded Succeeded 120 || return 0
  expect "both trials Succeeded: each ran the micro-batch it is named for" \
    job_has forwarded --outcome-values Succeeded Succeeded
  expect "its best is $published_best" best_is forwarded "$published_best"
  end_case
}

# A Pod of someone else's (no owner) named as the job's first trial Pod would be; it names a
# scheduler nobody runs, so it stays Pending and no node runs it.
foreign_pod() {
  kubectl apply -f - <<POD
apiVersion: v1
kind: Pod
metadata:
  name: $1
  namespace: $case_ns
  labels: {app: someone-else}
spec:
  schedulerName: nobody-serves-this
  containers:
    - name: main
      image: ghcr.io/autotune-operator/trial-sim:0.1.0
      command: [trial-sim, --fail-with, "not a trial", --e2e-run, $marker]
POD
}

# The Pod's uid, resourceVersion and owners, on one line.
pod_identity() {
  kubectl get pod "$1" -n "$case_ns" \
    -o jsonpath='{.metadata.uid} {.metadata.resourceVersion} owners={.metadata.ownerReferences}'
}

# Pod $1 is still there exactly as it was ($2: its pod_identity then).
pod_unchanged() {
  local now
  now=$(pod_identity "$1") || return 1
  [[ $now == "$2" ]] || { echo "was: $2"; echo "now: $now"; return 1; }
}

only_launched() {
  local launched
  launched=$(sort "$(launch_log "$1")" | tr '\n' ' ')
  [[ $launched == "$2 " ]] || { echo "launched: $launched"; return 1; }
}

# The Pod name of trial z1_gas1_tmbspg1 taken by a Pod of no owner before the job starts: the
# trial is recorded Failed, saying so, the other one runs, and the Pod is left as it was.
foreign_configmap_untouched() {
  local data owners
  data=$(kubectl get configmap "$1" -n "$case_ns" -o jsonpath='{.data}')
  owners=$(kubectl get configmap "$1" -n "$case_ns" -o jsonpath='{.metadata.ownerReferences}')
  [[ $data == '{"ds_config.json":"{\"theirs\": true}"}' && -z $owners ]] || {
    echo "data $data, owners ${owners:-none}"
    return 1
  }
}

case_foreign() {
  begin_case foreign
  local job=foreign pod=foreign-z1-gas1-tmbspg1 pid exceptions before
  pid=$(operator_pid)
  exceptions=$(reconcile_exceptions) || exceptions=''
  check "a Pod of no owner named $pod is created" foreign_pod "$pod" || return 0
  before=$(pod_identity "$pod") || before=unread
  check "a ConfigMap of no owner named $job-optimal, the job's output name, is created" \
    kubectl create configmap "$job-optimal" -n "$case_ns" \
      --from-literal=ds_config.json='{"theirs": true}' || return 0
  check "a job with trials z1_gas1_tmbspg1 and z1_gas1_tmbspg3 is created" create_job "$job" \
    strategy=grid stages='[1]' micro='[1, 3]' early=0 || return 0
  check "its search ends with OutputWritten=False, reason OutputConflict, within 120s" \
    eventually 120 job_has "$job" \
    --condition-reason OutputWritten=OutputConflict --results 2 || return 0
  expect "$job-optimal is left as it was: its own data, no owner" \
    foreign_configmap_untouched "$job-optimal"
  expect "kubectl autotune best prints no config from a ConfigMap the job did not write" \
    eval '! plugin best "$job" -n "$case_ns"'
  check "$job-optimal is deleted" kubectl delete configmap "$job-optimal" -n "$case_ns"
  check "the job then Succeeds within 120s" ends_in "$job" Succeeded 120 || return 0
  expect "z1_gas1_tmbspg1 is Failed: its Pod name is not this job's" job_has "$job" \
    --outcome z1_gas1_tmbspg1=Failed --reason "z1_gas1_tmbspg1=is not this job's" --results 2
  expect "only z1_gas1_tmbspg3 ran" only_launched "$job" z1_gas1_tmbspg3
  expect "its best is $published_best" best_is "$job" "$published_best"
  expect "no trial Pod of the job remains" eventually 30 no_trial_pods "$job"
  expect "$pod is still there: same uid and resourceVersion, no owner added" \
    pod_unchanged "$pod" "$before"
  expect "the operator never restarted" same_operator "$pid"
  expect "no reconcile threw (autotune_reconcile_total{result=\"exception\"})" \
    no_new_exceptions "$exceptions"
  end_case
}

# A Pod of no job holding all 16 GPUs of a node for $2 seconds: a workload the operator does not
# count, as a user's training job would be.
gpu_hog() {
  kubectl apply -f - <<POD
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: $case_ns}
spec:
  restartPolicy: Never
  containers:
    - name: hog
      image: busybox
      command: [sleep, "$2"]
      resources: {limits: {nvidia.com/gpu: 16}}
POD
}

hogs_running() {
  [[ $(kubectl get pods -n "$case_ns" -l '!autotune.io/job' --field-selector=status.phase=Running \
    -o name | wc -l) -eq 2 ]]
}

# Both nodes' GPUs held by Pods the operator does not count, longer than three scheduling
# timeouts: waiting for GPUs is not failing. The job's trials are queued, the job says so in the
# scheduler's words and counts them in its Queued column, and once the GPUs are free each trial
# runs once, no attempt spent, to the published best.
case_busy_cluster() {
  begin_case busy-cluster
  local job=busy
  check "two Pods of no job take all 32 GPUs for 60s" eval 'gpu_hog hog-0 60 && gpu_hog hog-1 60' ||
    return 0
  check "both run" eventually 60 hogs_running || return 0
  check "a job of two trials with schedulingTimeout 15s is created" create_job "$job" \
    strategy=grid stages='[1]' micro='[1, 3]' early=0 scheduling_timeout=15s || return 0
  expect "it shows its trials queued: Running=False, reason Queued, the scheduler's words" \
    eventually 30 job_has "$job" \
    --equals trials.queued=2 --condition Running=False --condition-reason Running=Queued \
    --condition-message "Running=Insufficient nvidia.com/gpu"
  expect "kubectl get atj shows 2 in its QUEUED column" queued_column "$job" 2
  expect "past three scheduling timeouts (45s) the trials still wait, nothing relaunched" \
    throughout 50 job_has "$job" \
    --phase-not Failed --equals trials.launched=2
  check "the job Succeeds within 180s" ends_in "$job" Succeeded 180 || return 0
  expect "no trial was relaunched" job_not_counted autotune_trials_relaunched_total "$job"
  expect "both trials Succeeded" \
    job_has "$job" --outcome-values Succeeded Succeeded
  expect "each trial was launched once and recorded once" launched_once "$job"
  expect "its best is $published_best" best_is "$job" "$published_best"
  end_case
}

# Sets or removes ($1: KEY=VALUE or KEY-) a label on both simulated GPU nodes.
label_gpu_nodes() { kubectl label nodes -l autotune.io/node-sim=true --overwrite "$1" >/dev/null; }

# GPU nodes without the label GPU feature discovery writes (nvidia.com/gpu.present=true) are not
# watched (--node-selector): a job whose trials only they could hold says which nodes it looked at
# and creates no Pod; once the nodes carry the label again, its trials run, each once.
case_unwatched_nodes() {
  begin_case unwatched-nodes
  local job=unwatched gfd_label=nvidia.com/gpu.present
  check "both GPU nodes lose the label $gfd_label" label_gpu_nodes "$gfd_label-" || return 0
  if ! check "a job of two 16-GPU trials is created" create_job "$job" strategy=grid stages='[1]' \
    micro='[1, 3]' early=0; then
    label_gpu_nodes "$gfd_label=true"
    return 0
  fi
  expect "Running=False, reason Unschedulable, naming the nodes watched and --node-selector" \
    eventually 60 job_has "$job" \
    --condition-reason Running=Unschedulable \
    --message "the largest has 0 (of the nodes labelled nvidia.com/gpu.present=true" \
    --message "the only ones the operator watches: its --node-selector)"
  expect "no trial Pod is created" no_pods_in_namespace
  check "both GPU nodes carry the label again" label_gpu_nodes "$gfd_label=true" || return 0
  check "the job Succeeds within 120s" ends_in "$job" Succeeded 120 || return 0
  expect "each trial was launched once and recorded once" launched_once "$job"
  end_case
}

# A cluster of two GPU models: its own nodes (Simulated-GPU, 32 GiB) and a pool of one 80 GiB
# H100 node. A job of the H100 model runs every trial on the H100 node, where trial-sim sees 80 GiB
# a GPU, and so finds a larger micro-batch than the 32 GiB search's best; a job of a model no node
# offers says which models there are and creates nothing.
case_gpu_models() {
  begin_case gpu-models
  local pool=h100 model=NVIDIA-H100-80GB-HBM3 job=h100 missing=l40s
  if ! check "a pool of one 16-GPU $model node (80Gi) joins" start_gpu_pool "$pool" "$model" 80Gi
  then
    stop_gpu_pool "$pool"
    return 0
  fi
  if check "a job of $model, its GPU memory from the node's label, is created" \
    create_job "$job" gpu_models="[$model]" gpu_memory= stages='[1]' early=0; then
    if check "it Succeeds within 180s" ends_in "$job" Succeeded 180; then
      expect "every trial Pod ran on the $model node" ran_on_pool_only "$pool"
      expect "each result names $model as the GPU model it ran on" job_has "$job" \
        --each-gpu-model "$model"
      expect "each trial was launched once and recorded once" launched_once "$job"
      expect "its best micro-batch is larger than the 32 GiB search's best (3)" \
        job_has "$job" --best-micro-batch-above 3
    fi
  fi
  if check "a job of a model no node offers is created" \
    create_job "$missing" gpu_models='[NVIDIA-L40S]'; then
    expect "Running=False, reason GpuModelUnavailable, naming the models the nodes offer" \
      eventually 30 job_has "$missing" \
      --condition-reason Running=GpuModelUnavailable --message NVIDIA-L40S \
      --message Simulated-GPU --message NVIDIA-H100-80GB-HBM3
    expect "no Pod of it is created" throughout 3 bash -c \
      "[[ -z \$(kubectl get pods -n $case_ns -l autotune.io/job=$missing -o name) ]]"
  fi
  every_model "$model" "$job"
  check "the pool leaves" stop_gpu_pool "$pool"
  end_case
}

# A job of every GPU model (spec.gpuModels [All]) on the cluster of case_gpu_models, after the job
# $2 of the model $1 alone: a search per model, each an AutotuneJob of its own.
every_model() {
  local model=$1 alone=$2 job=every
  local h100_search=$job-nvidia-h100-80gb-hbm3 simulated_search=$job-simulated-gpu
  check "a job of every GPU model is created" \
    create_job "$job" gpu_models='[All]' gpu_memory= stages='[1]' early=0 || return 0
  check "it Succeeds within 240s" ends_in "$job" Succeeded 240 || return 0
  expect "its status names a search per model, each Succeeded" job_has "$job" \
    --model-searches "$model=$h100_search=Succeeded" "Simulated-GPU=$simulated_search=Succeeded"
  expect "every result of the $model search ran on $model" ran_on_model "$h100_search" "$model"
  expect "every result of the Simulated-GPU search ran on Simulated-GPU" \
    ran_on_model "$simulated_search" Simulated-GPU
  expect "the $model search finds the best of the job of $model alone, from its measurements" \
    same_best "$h100_search" "$alone"
  expect "the Simulated-GPU search finds the 32 GiB search's best (z1_gas1_tmbspg3)" \
    job_has "$simulated_search" --best z1_gas1_tmbspg3
  expect "the output holds each model's config and, as ds_config.json, the fastest" \
    output_per_model "$job" "$model" "$h100_search" "$simulated_search"
  expect "kubectl autotune best --gpu-model prints the $model config" \
    cmp <(plugin best "$job" -n "$case_ns" --gpu-model "$model") \
    <(configmap_data "$job-optimal" "ds_config.$model.json")
  expect "autotune_job_trials counts each search's trials, and the job's sum of them not again" \
    eval 'job_counted autotune_job_trials "$simulated_search" 1 &&
      job_not_counted autotune_job_trials "$job"'
  expect "kubectl autotune report --gpu-model Simulated-GPU draws that model's search" \
    report_of_model "$job" Simulated-GPU "$simulated_search" z1_gas1_tmbspg3
  expect "kubectl autotune report draws each model's search, its best named, in one page" \
    report_of_every_model "$job" "$h100_search" "$simulated_search"
  expect "kubectl autotune report -o svg asks which model's chart, exit 2" \
    eval '[[ $(plugin report "$job" -n "$case_ns" -o svg >/dev/null 2>&1; echo $?) == 2 ]]'
  check "the job is deleted" kubectl delete atj "$job" -n "$case_ns" --wait=false
  expect "its searches go with it within 60s" eventually 60 bash -c \
    "[[ -z \$(kubectl get atj -n $case_ns -l autotune.io/model-search-of=$job -o name) ]]"
}

# The report of the job $1's search of the GPU model $2 is that of the search's AutotuneJob $3,
# and names its best, $4.
report_of_model() {
  local report=$work/$1-$2-report.html
  plugin report "$1" -n "$case_ns" --gpu-model "$2" --output-file "$report" &&
    grep -q "$3" "$report" && grep -q "$4" "$report"
}

# The report of the job $1 is one page with a part per model, each naming its search (the
# AutotuneJobs $2...) and that search's best.
report_of_every_model() {
  local job=$1 report=$work/$1-report.html search best
  plugin report "$job" -n "$case_ns" --output-file "$report" || return 1
  [[ $(grep -o '<h1>GPU model ' "$report" | wc -l) == $(($# - 1)) ]] ||
    { echo "not one part per model"; return 1; }
  for search in "${@:2}"; do
    best=$(field "$search" '{.status.best.trial}')
    grep -q "AutotuneJob $search\. Best: <b>$best</b>" "$report" ||
      { echo "no part of $search with its best $best"; return 1; }
  done
}

# Every result of the job $1 names the GPU model $2 as the one it ran on.
ran_on_model() {
  job_has "$1" --results-at-least 1 --each-gpu-model "$2"
}

# Jobs $1 and $2 found the same best trial; every result of $1 was taken from kept measurements.
same_best() {
  local ours theirs
  ours=$(field "$1" '{.status.best.trial}') theirs=$(field "$2" '{.status.best.trial}')
  echo "$1: $ours; $2: $theirs"
  [[ -n $ours && $ours == "$theirs" ]] &&
    job_has "$1" --results-at-least 1 --all-reused
}

# The output ConfigMap of the job $1 holds the best config of each search ($3 of the model $2, and
# $4 of Simulated-GPU) and, as ds_config.json, the one of the search whose best is fastest.
output_per_model() {
  local job=$1 model=$2 first=$work/$3.json second=$work/$4.json configmap=$work/$1-optimal.json
  kubectl get atj "$3" -n "$case_ns" -o json >"$first" &&
    kubectl get atj "$4" -n "$case_ns" -o json >"$second" &&
    kubectl get configmap "$job-optimal" -n "$case_ns" -o json >"$configmap" &&
    inspect output-per-model "$configmap" "$model=$first" "Simulated-GPU=$second"
}

# GPUs through Dynamic Resource Allocation on a cluster of no other GPUs: a pool of one node that
# advertises no nvidia.com/gpu, has no GPU feature discovery labels, and publishes its 16 GPUs
# (32 GiB, as the cluster's own) as a ResourceSlice of the driver the operator counts, named as
# NVIDIA's driver names them ("Simulated DRA GPU"), for the kube-scheduler to allocate, while the
# cluster's own device-plugin nodes are cordoned. The slice alone names the model results record. The job of case gpu_models' 32 GiB search runs
# there twice: its trials taking a claim each from a ResourceClaimTemplate, then asking for
# nvidia.com/gpu as on any node, which a DeviceClass maps to the driver's devices (KEP-5004). Had
# the operator not counted the driver's GPUs, no node could hold a trial. Both find the device
# plugin's best, and no claim outlives its trial. A job whose claims give its trials half the GPUs
# they ask for measures another global batch: its trials are ConfigNotApplied, and it Fails.
case_dra() {
  begin_case dra
  local pool=dra model=Simulated-DRA-GPU claimed=claimed mapped=mapped
  if ! check "a pool of one node of 16 $model GPUs, published as a ResourceSlice, joins" \
    start_gpu_pool "$pool" "$model" 32Gi --dra-driver "$e2e_dra_driver"; then
    stop_gpu_pool "$pool"
    return 0
  fi
  expect "the node advertises no nvidia.com/gpu and has no GPU model label" eval \
    "[[ -z \$(kubectl get node $pool-0 -o jsonpath='{.status.allocatable.nvidia\.com/gpu}\
{.metadata.labels.nvidia\.com/gpu\.product}') ]]"
  if check "the cluster's own device-plugin nodes are cordoned" plugin_nodes cordon &&
    check "DeviceClasses of the driver's GPUs, one serving nvidia.com/gpu, are created" \
      device_classes &&
    check "ResourceClaimTemplates of 16 and 8 GPUs are created" claim_templates; then
    if check "a job whose trials take their GPUs from claims is created" \
      create_job "$claimed" claims=sixteen-gpus gpu_memory= stages='[1]' early=0; then
      dra_job_finds_the_best "$claimed" "$model"
      expect "each trial Pod of $claimed had the 16 GPUs of its own claim" \
        claimed_gpus "$claimed" "$pool" 16
    fi
    if check "a job whose claims give its trials 8 GPUs of the 16 it asks for is created" \
      create_job short claims=eight-gpus gpu_memory= stages='[1]' early=0 \
      extra_env='{name: DRA_PATH, value: eight}'; then
      expect "it Fails within 120s: each trial measured another global batch than it asked for" \
        ends_in short Failed 120
      expect "its trials are ConfigNotApplied, naming the GPUs" job_has short \
        --results-at-least 1 --every-outcome ConfigNotApplied \
        --each-reason "ConfigNotApplied=number of GPUs"
      expect "each of its trial Pods had the 8 GPUs of its claim" claimed_gpus short "$pool" 8
    fi
    if check "a job whose trials ask for nvidia.com/gpu, served by the driver, is created" \
      create_job "$mapped" gpu_memory= stages='[1]' early=0 \
      extra_env='{name: DRA_PATH, value: extended-resource}'; then
      dra_job_finds_the_best "$mapped" "$model"
    fi
  fi
  check "the cluster's own nodes are uncordoned" plugin_nodes uncordon
  check "the pool leaves" stop_gpu_pool "$pool"
  kubectl delete deviceclass dra-gpus dra-extended-gpus --ignore-not-found >/dev/null
  end_case
}

# Every trial Pod of the job $1 that the pool $2's node started had $3 GPUs of its ResourceClaims,
# as the node's kubelet read them from the claims' allocations.
claimed_gpus() {
  local job=$1 log=$work/$2.log gpus=$3 started claimed
  started=$(pods_started "$log" | awk -v job="$job" 'index($1, job "-") == 1 {print $1}')
  claimed=$(sed -n "s|.*pod $case_ns/\($job-[^ ]*\) has $gpus GPUs of its ResourceClaims\$|\1|p" \
    "$log" | sort -u)
  echo "started: ${started:-none}; with $gpus GPUs of claims: ${claimed:-none}"
  [[ -n $started && $started == "$claimed" ]]
}

# kubectl $1 (cordon or uncordon) on the cluster's own simulated nodes, not the pools'.
plugin_nodes() {
  kubectl "$1" -l autotune.io/node-sim=true,nvidia.com/gpu.product=Simulated-GPU >/dev/null
}

device_classes() {
  kubectl apply -f - <<CLASSES
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: dra-gpus}
spec:
  selectors: [{cel: {expression: 'device.driver == "$e2e_dra_driver"'}}]
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: dra-extended-gpus}
spec:
  extendedResourceName: nvidia.com/gpu
  selectors: [{cel: {expression: 'device.driver == "$e2e_dra_driver"'}}]
CLASSES
}

# ResourceClaimTemplates of 16 GPUs (a trial's) and of 8.
claim_templates() {
  local count
  for count in sixteen:16 eight:8; do
    kubectl apply -n "$case_ns" -f - <<TEMPLATE
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: ${count%:*}-gpus}
spec:
  spec:
    devices:
      requests:
      - name: gpus
        exactly: {deviceClassName: dra-gpus, allocationMode: ExactCount, count: ${count#*:}}
TEMPLATE
  done
}

# The job $1, on the DRA node of GPU model $2, Succeeds at the 32 GiB search's best, and no
# ResourceClaim of the case is left once its trials are gone.
dra_job_finds_the_best() {
  local job=$1 model=$2
  check "$job Succeeds within 180s" ends_in "$job" Succeeded 180 || return 0
  expect "$job finds the device plugin's 32 GiB best (z1_gas1_tmbspg3)" \
    job_has "$job" --best z1_gas1_tmbspg3
  expect "every result of $job ran on $model" ran_on_model "$job" "$model"
  expect "each trial of $job was launched once and recorded once" launched_once "$job"
  expect "no ResourceClaim is left within 60s" eventually 60 bash -c \
    "[[ -z \$(kubectl get resourceclaims -n $case_ns -o name) ]]"
}

# A Pod of another team's, labelled for the job $3 and asking for all 16 GPUs of a node, that is
# never placed: held by a scheduling gate ($4 = gated), or naming a scheduler nobody runs.
labelled_pod() {
  local ns=$1 name=$2 job=$3 held=$4
  local hold="schedulerName: nobody-serves-this"
  [[ $held == gated ]] && hold="schedulingGates: [{name: example.com/hold}]"
  kubectl apply -f - <<POD
apiVersion: v1
kind: Pod
metadata:
  name: $name
  namespace: $ns
  labels: {autotune.io/job: $job}
spec:
  $hold
  restartPolicy: Never
  containers:
    - name: main
      image: busybox
      command: [sleep, "3600"]
      resources: {limits: {nvidia.com/gpu: 16}}
POD
}

# A suspended batch Job, its template asking for 16 GPUs, and a headless Service in namespace $1,
# named $2 and labelled as trials of job $3 are: what any team may write.
labelled_job_and_service() {
  local ns=$1 name=$2 job=$3
  kubectl apply -f - <<OBJECTS
apiVersion: batch/v1
kind: Job
metadata: {name: $name, namespace: $ns, labels: {autotune.io/job: $job}}
spec:
  suspend: true
  template:
    metadata: {labels: {autotune.io/job: $job}}
    spec:
      restartPolicy: Never
      containers:
        - {name: main, image: busybox, command: [sleep, "60"],
           resources: {limits: {nvidia.com/gpu: 16}}}
---
apiVersion: v1
kind: Service
metadata: {name: $name, namespace: $ns, labels: {autotune.io/job: $job}}
spec:
  clusterIP: None
  selector: {autotune.io/job: $job}
OBJECTS
}

# The uids of the Jobs and Services labelled autotune.io/job in namespaces $@.
labelled_uids() {
  local ns
  for ns in "$@"; do
    uids_of "$ns" jobs,services -l autotune.io/job || return 1
  done
}

# A Job of the team's own, suspended so it runs nothing: what a forged Pod names as its controller.
suspended_job() {
  kubectl apply -f - <<JOB
apiVersion: batch/v1
kind: Job
metadata: {name: $1, namespace: $case_ns}
spec:
  suspend: true
  template:
    spec:
      restartPolicy: Never
      containers: [{name: etl, image: busybox, command: [sleep, "60"]}]
JOB
}

# A Pod dressed as a trial of job $1 on several nodes: its label, the annotations such Pods carry
# and a controller reference to the batch Job $2, which is no trial's.
forged_rank_pod() {
  local job=$1 controller=$2 job_uid controller_uid
  job_uid=$(field "$job" '{.metadata.uid}') || return 1
  controller_uid=$(kubectl get job "$controller" -n "$case_ns" -o jsonpath='{.metadata.uid}') ||
    return 1
  kubectl apply -f - <<POD
apiVersion: v1
kind: Pod
metadata:
  name: forged-rank
  namespace: $case_ns
  labels: {autotune.io/job: $job}
  annotations:
    autotune.io/owner-name: $job
    autotune.io/owner-uid: $job_uid
    autotune.io/trial-name: z1_gas1_tmbspg1
    autotune.io/attempt: "0"
    batch.kubernetes.io/job-completion-index: "0"
  ownerReferences:
    - {apiVersion: batch/v1, kind: Job, name: $controller, uid: $controller_uid, controller: true}
spec:
  schedulerName: nobody-serves-this
  restartPolicy: Never
  containers: [{name: main, image: busybox, command: [sleep, "3600"]}]
POD
}

# The uids of objects (`KIND NAME...`) in namespace $1, on one line; fails if one is missing.
uids_of() {
  local ns=$1
  shift
  kubectl get "$@" -n "$ns" -o custom-columns=UID:.metadata.uid --no-headers | tr '\n' ' '
  ((PIPESTATUS[0] == 0))
}

# $2 ConfigMaps in namespace $1 with the measurement label, as any team may write them: an
# identity.json of 200 KiB of nested {} and a result.json far better than measured, with a
# startTime that is no time. Created, not applied: kubectl apply would copy each into an annotation.
tenant_measurements() {
  local file=$work/tenant-measurements.json
  python3 - "$1" "$2" >"$file" <<'PY'
import json, sys
ns, count = sys.argv[1], int(sys.argv[2])
depth = 200 * 1024 // 6
nested = '{"a":' * depth + "{}" + "}" * depth
result = json.dumps({"outcome": "Succeeded", "value": 9000, "metrics": {"throughput": 9000},
                     "startTime": "yesterday"})
items = [{"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": f"autotune-m-tenant-{i:03d}", "namespace": ns,
                       "labels": {"autotune.io/measurement": "v2"}},
          "data": {"identity.json": nested, "result.json": result}} for i in range(count)]
json.dump({"apiVersion": "v1", "kind": "List", "items": items}, sys.stdout)
PY
  kubectl create -f "$file" >/dev/null
}

# The operator's peak resident memory (VmHWM) is below $1 MiB.
operator_peak_below() {
  local kib
  kib=$(awk '/^VmHWM:/ { print $2 }' "/proc/$(operator_pid)/status") || return 1
  echo "VmHWM: $((kib / 1024)) MiB"
  ((kib < $1 * 1024))
}

# The operator deleted nothing in namespaces $@ that it had not created itself, by the API server's
# audit log.
deleted_only_its_own() {
  inspect deleted-only-own "$E2E_AUDIT_LOG" "$(operator_user)" "$@"
}

# Another team's namespace holds two Pods labelled for a job, each asking for a whole node's GPUs
# and never placed (one gated, one for a scheduler nobody runs), and both namespaces a batch Job
# and a Service labelled as the job's trials: they hold no GPU, so a job here launches at once and
# Succeeds at its best, and they are left as they are. Once it has ended, a Pod made here with its
# label, the annotations of a multi-node trial's Pod and a controller reference to this team's
# suspended Job is told of with a Warning Event and ignored: neither it nor that Job is deleted.
case_tenants() {
  begin_case tenants
  local job=mine other=$case_ns-team-b ghosts etl forged labelled
  check "another team's namespace is created" kubectl create namespace "$other" || return 0
  check "it holds a gated Pod labelled autotune.io/job=ghost, asking for 16 GPUs" \
    labelled_pod "$other" ghost-gated ghost gated || return 0
  check "and one for a scheduler nobody runs" \
    labelled_pod "$other" ghost-unplaced ghost unplaced || return 0
  check "their uids are read" eval 'ghosts=$(uids_of "$other" pods ghost-gated ghost-unplaced)' ||
    return 0
  check "it holds 20 ConfigMaps labelled autotune.io/measurement, 200 KiB of nested {} each" \
    tenant_measurements "$other" 20 || return 0
  check "their uids are read" eval 'forged=$(uids_of "$other" configmaps -l autotune.io/measurement)' ||
    return 0
  check "each namespace holds a Job and a Service labelled as trials of $job" eval \
    'labelled_job_and_service "$other" mine-trial "$job" &&
     labelled_job_and_service "$case_ns" mine-trial "$job"' || return 0
  check "their four uids are read" eval 'labelled=$(labelled_uids "$other" "$case_ns") &&
    (($(wc -w <<<"$labelled") == 4))' || return 0
  check "a job of two trials, 16 GPUs each, is created" create_job "$job" \
    strategy=grid stages='[1]' micro='[1, 3]' early=0 || return 0
  expect "both its trials launch within 30s: the labelled Pods hold no GPU" \
    eventually 30 job_has "$job" --equals trials.launched=2
  check "it Succeeds within 120s" ends_in "$job" Succeeded 120 || return 0
  expect "its best is $published_best" best_is "$job" "$published_best"
  check "a suspended Job nightly-etl is created" suspended_job nightly-etl || return 0
  check "its uid is read" eval 'etl=$(uids_of "$case_ns" job nightly-etl)' || return 0
  check "a Pod dressed as a trial of $job, controlled by nightly-etl, is created" \
    forged_rank_pod "$job" nightly-etl || return 0
  expect "the job tells of it with one Warning Event, ForeignPod" \
    eventually 30 events_counted "$job" ForeignPod 1
  expect "nightly-etl is still there, the same object" \
    eval '[[ $(uids_of "$case_ns" job nightly-etl) == "$etl" ]]'
  expect "the forged Pod is still there" kubectl get pod forged-rank -n "$case_ns"
  expect "the other team's Pods are still there, the same objects" \
    eval '[[ $(uids_of "$other" pods ghost-gated ghost-unplaced) == "$ghosts" ]]'
  expect "the labelled Jobs and Services are still there, the same objects" \
    eval '[[ $(labelled_uids "$other" "$case_ns") == "$labelled" ]]'
  expect "the other team's measurement ConfigMaps are still there, the same objects" \
    eval '[[ $(uids_of "$other" configmaps -l autotune.io/measurement) == "$forged" ]]'
  expect "the operator deleted nothing it had not created (the audit log)" \
    deleted_only_its_own "$case_ns" "$other"
  expect "the operator's peak memory stayed within the chart's limit of 256 MiB" \
    operator_peak_below 256
  kubectl delete namespace "$other" --wait=false >/dev/null 2>&1 || true
  end_case
}

queued_column() {
  local row
  row=$(kubectl get atj "$1" -n "$case_ns" --no-headers)
  echo "$row"
  [[ $(awk '{print $(NF-1)}' <<<"$row") == "$2" ]]
}

# A ResourceQuota of 16 GPUs in the namespace, a job that would run two trials of 16 at once: every
# create the quota refuses is no attempt and no trial in flight. The job waits for quota, says so
# in the quota's words with one QuotaExceeded Event, and Succeeds with each trial launched once.
case_quota() {
  begin_case quota
  local job=quota
  check "a ResourceQuota of requests.nvidia.com/gpu: 16 is created" \
    kubectl create quota gpu -n "$case_ns" --hard=requests.nvidia.com/gpu=16 || return 0
  check "a job of three trials, 16 GPUs each, parallelism 2, is created" create_job "$job" \
    strategy=grid stages='[1]' micro='[1, 2, 3]' early=0 startup=4 || return 0
  expect "it shows that a trial waits for quota, in the quota's words" \
    eventually 60 job_has "$job" \
    --condition-reason Running=QuotaExceeded --condition-message "Running=exceeded quota: gpu" \
    --at-least trials.queued=1
  check "the job Succeeds within 180s" ends_in "$job" Succeeded 180 || return 0
  expect "one QuotaExceeded Event, however many creates were refused" \
    events_counted "$job" QuotaExceeded 1
  expect "the quota refused creates (the API server's audit log)" quota_refused_creates 2
  expect "no trial was relaunched: no refusal spent an attempt" \
    job_not_counted autotune_trials_relaunched_total "$job"
  expect "every trial Succeeded" job_has "$job" \
    --outcome-values Succeeded Succeeded Succeeded
  expect "each trial was launched once and recorded once" launched_once "$job"
  expect "no Pod name was created twice" created_once pods
  end_case
}

# At least $1 Pod creates in the case's namespace were refused as over quota.
quota_refused_creates() { inspect quota-refused "$E2E_AUDIT_LOG" "$case_ns" "$1"; }

# A namespace that enforces Pod Security restricted, a template that breaks it: the template can
# never run, so the job fails within seconds, with the API server's words, and nothing is
# created again.
case_pod_security() {
  begin_case pod-security
  local job=restricted
  check "the namespace enforces Pod Security restricted" \
    kubectl label namespace "$case_ns" pod-security.kubernetes.io/enforce=restricted || return 0
  check "a job whose template is not restricted is created" create_job "$job" || return 0
  check "it Fails within 30s" ends_in "$job" Failed 30 || return 0
  expect "reason LaunchRefused, with the server's words" job_has "$job" \
    --condition-reason Failed=LaunchRefused --condition-message "Failed=violates PodSecurity" \
    --equals trials.launched=0 --unset inFlight
  expect "no Pod exists and none is tried again" throughout 5 no_trial_pods "$job"
  expect "no trial was relaunched" job_not_counted autotune_trials_relaunched_total "$job"
  end_case
}

# A Pod of a higher PriorityClass, asking for a whole node's GPUs while both nodes run trials: the
# real kube-scheduler preempts a trial. The trial runs again, reason preempted, no attempt spent,
# and the job ends at the published best with no result recorded twice.
case_preemption() {
  begin_case preemption
  local job=gpt2-large
  check "PriorityClass autotune-e2e-urgent exists" urgent_class || return 0
  check "the GPT2-large job is created, trials of 8s" create_job "$job" startup=8 || return 0
  check "two of its trials run at once" eventually 120 two_running "$job" || return 0
  check "an urgent Pod asking for 16 GPUs is created" urgent_pod || return 0
  check "a trial is relaunched as preempted within 60s" \
    eventually 60 relaunched_because 'was preempted (PreemptionByScheduler' || return 0
  check "the job Succeeds within 300s" ends_in "$job" Succeeded 300 || return 0
  expect "the operator counts the relaunch as preempted" job_counted \
    autotune_trials_relaunched_total "$job" 1 'reason="preempted"'
  expect "its best is $published_best" best_is "$job" "$published_best"
  expect "no result is recorded twice" results_once "$job"
  end_case
}

urgent_class() {
  kubectl get priorityclass autotune-e2e-urgent >/dev/null 2>&1 ||
    kubectl create priorityclass autotune-e2e-urgent --value=1000000 \
      --description="preempts trials in the e2e tier"
}

urgent_pod() {
  kubectl apply -f - <<POD
apiVersion: v1
kind: Pod
metadata: {name: urgent, namespace: $case_ns}
spec:
  priorityClassName: autotune-e2e-urgent
  restartPolicy: Never
  containers:
    - name: urgent
      image: busybox
      command: [sleep, "5"]
      resources: {limits: {nvidia.com/gpu: 16}}
POD
}

# A job whose output name is taken ends its search holding nothing: a job in another namespace,
# created after it, launches at once, and the first job's trial Pods are gone while its output
# waits.
case_hold() {
  begin_case hold
  local job=held other_ns=$case_ns-other
  check "a ConfigMap of no owner named $job-optimal is created" \
    kubectl create configmap "$job-optimal" -n "$case_ns" \
      --from-literal=ds_config.json='{"theirs": true}' || return 0
  check "a job of 16 GPUs per trial, parallelism 2, is created" create_job "$job" \
    strategy=grid stages='[1]' micro='[1, 3]' early=0 || return 0
  check "its search ends with OutputConflict within 120s" eventually 120 job_has "$job" \
    --condition-reason OutputWritten=OutputConflict --results 2 || return 0
  expect "its trial Pods are gone while its output waits" eventually 30 no_trial_pods "$job"
  expect "it waits for no GPUs" job_has "$job" \
    --condition-reason-not Running=WaitingForGPUs
  check "namespace $other_ns exists" kubectl create namespace "$other_ns" || return 0
  local first=$case_ns
  case_ns=$other_ns
  check "a job in $other_ns is created after it" create_job other strategy=grid stages='[1]' \
    micro='[1, 3]' early=0 || return 0
  expect "it launches within 10s, well before any 30s recheck" eventually 10 job_has other \
    --at-least trials.launched=1
  expect "it Succeeds within 120s" ends_in other Succeeded 120
  end_case
  case_ns=$first
  kubectl delete configmap "$job-optimal" -n "$case_ns" >/dev/null
  expect "$job Succeeds once its output name is free" ends_in "$job" Succeeded 60
  end_case
}

# The operator's count of series $2 went up since it was $1.
counted_more() {
  local now
  now=$(operator_metric "$2") || return 1
  ((now > $1)) || { echo "$2 was $1 and is $now"; return 1; }
}

# The operator, if it has exited since it started (having lost its lease while the API server
# could not be reached: exit status 1, and its log says so), started again, as the kubelet restarts
# a Deployment's container.
revive_operator() {
  e2e_alive operator && return 0
  local status=0
  wait "$(operator_pid)" || status=$?
  if ((status != 1)) || ! grep -q '"msg":"lost the leader lease' "$E2E_OPERATOR_LOG"; then
    echo "the operator exited with status $status:"
    tail -5 "$E2E_OPERATOR_LOG"
    return 1
  fi
  echo "it had lost its lease and exited 1"
  e2e_start_operator
}

# Job $1 has $2 results, with the operator started again meanwhile if it lost its lease.
results_reviving() { revive_operator >/dev/null && results_at_least "$1" "$2"; }

# kube-apiserver, then etcd, stopped and started again while a job runs. The operator's watches
# and requests fail meanwhile; if its lease cannot be renewed for 10 s it exits and is started
# again, as its Deployment would be. The job ends at the published best with each trial launched
# and recorded once and no Pod created twice.
case_controlplane_restart() {
  begin_case controlplane-restart
  local job=gpt2-large
  check "the GPT2-large job is created" create_job "$job" startup=2 || return 0
  check "two results are recorded" eventually 120 results_at_least "$job" 2 || return 0
  check "kube-apiserver is stopped and started again" \
    "$source_dir/scripts/controlplane" restart kube-apiserver || return 0
  check "a fourth result is recorded (the operator started again if it lost its lease)" \
    eventually 120 results_reviving "$job" 4 || return 0
  check "etcd is stopped and started again" "$source_dir/scripts/controlplane" restart etcd ||
    return 0
  check "a fifth result is recorded (the operator started again if it lost its lease)" \
    eventually 120 results_reviving "$job" 5 || return 0
  check "the job Succeeds within 300s" ends_in "$job" Succeeded 300 || return 0
  expect "its best is $published_best" best_is "$job" "$published_best"
  expect "every trial was launched once, and each launch is recorded" launched_once "$job"
  expect "status.results has each trial once" results_once "$job"
  expect "no trial Pod name was created twice (audit log)" created_once pods
  end_case
}

# --- faults between the operator and the API server ---------------------------------------------

fault_proxy_dir() { echo "$work/fault-proxy"; }

# tests/e2e/fault_proxy.py in front of the API server, serving a certificate the cluster's CA
# signed for 127.0.0.1, and a copy of the operator's kubeconfig that points at it.
start_fault_proxy() {
  local dir pki=$AUTOTUNE_CONTROLPLANE_DIR/pki server
  dir=$(fault_proxy_dir)
  mkdir -p "$dir"
  openssl req -new -newkey rsa:2048 -nodes -subj /CN=fault-proxy -keyout "$dir/proxy.key" \
    -out "$dir/proxy.csr" 2>/dev/null &&
    openssl x509 -req -in "$dir/proxy.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
      -CAcreateserial -days 1 -out "$dir/proxy.crt" \
      -extfile <(printf 'subjectAltName=IP:127.0.0.1\n') 2>/dev/null || return 1
  server=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  python3 "$source_dir/tests/e2e/fault_proxy.py" --upstream "${server#https://}" \
    --ca "$pki/ca.crt" --cert "$dir/proxy.crt" --key "$dir/proxy.key" --state "$dir" \
    >"$dir/proxy.log" 2>&1 &
  echo $! >"$dir/pid"
  eventually 20 test -s "$dir/port" || { cat "$dir/proxy.log"; return 1; }
  cp "$E2E_STATE/operator.kubeconfig" "$dir/operator.kubeconfig"
  kubectl --kubeconfig "$dir/operator.kubeconfig" config set-cluster e2e \
    --server "https://127.0.0.1:$(cat "$dir/port")" >/dev/null
}

stop_fault_proxy() {
  local dir
  dir=$(fault_proxy_dir)
  [[ -f $dir/pid ]] || return 0
  kill "$(cat "$dir/pid")" 2>/dev/null || true
  wait "$(cat "$dir/pid")" 2>/dev/null || true
  rm -f "$dir/pid"
}

# Restarts the operator (SIGTERM, so that it hands the lease over) with kubeconfig $1.
operator_through() { e2e_stop_operator TERM && E2E_OPERATOR_KUBECONFIG=$1 e2e_start_operator; }

# Sends the fault proxy a command (fault_proxy.py) and prints its answer.
# The operator's Lease was renewed after time $1 (UTC, in microseconds, as the Lease's renewTime).
lease_renewed_after() {
  local renewed
  renewed=$(kubectl get lease autotune-operator -n "$e2e_operator_namespace" \
    -o jsonpath='{.spec.renewTime}')
  [[ $renewed > $1 ]] || { echo "last renewed at $renewed"; return 1; }
}

# Now, as lease_renewed_after takes it.
micro_now() { date -u +%Y-%m-%dT%H:%M:%S.%6NZ; }

fault() {
  local port reply
  port=$(cat "$(fault_proxy_dir)/control-port")
  exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
  echo "$*" >&3
  read -r reply <&3
  exec 3>&-
  echo "$reply"
  [[ $reply == ok* ]]
}

# The GPT2-large job with the operator talking through the fault proxy, which drops every
# connection, answers 4 requests 429 and 3 requests 500, and stalls all traffic for 5s, each
# after another result is recorded and the operator's lease renewed since the fault before. The
# counts are small enough that the lease, whose renewals go through the proxy too, cannot miss
# 10 s of renewals to one fault; faults piled into one renew deadline (two results can be recorded
# together) could cost it that, and it would rightly be given up. The
# job ends at the published best with each trial launched and recorded once and no Pod created
# twice; the operator never restarted, and its metrics count the 429s, the 500s and the watches it
# started again.
case_api_faults() {
  begin_case api-faults
  local job=gpt2-large pid throttled failed restarts
  check "a fault proxy starts in front of the API server" start_fault_proxy || return 0
  if ! check "the operator is restarted to talk through it" \
    operator_through "$(fault_proxy_dir)/operator.kubeconfig"; then
    stop_fault_proxy
    return 0
  fi
  pid=$(operator_pid)
  throttled=$(operator_metric 'autotune_kube_requests_total{code="429"') || throttled=0
  failed=$(operator_metric 'autotune_kube_requests_total{code="500"') || failed=0
  restarts=$(operator_metric autotune_watch_restarts_total) || restarts=0
  if check "the GPT2-large job is created" create_job "$job" startup=1 &&
    check "a result is recorded" eventually 120 results_at_least "$job" 1 &&
    check "every connection is dropped" fault drop &&
    check "the operator renews its lease since" eventually 30 lease_renewed_after "$(micro_now)" &&
    check "a second result is recorded" eventually 120 results_at_least "$job" 2 &&
    check "the next 4 requests are answered 429 with Retry-After" fault status 429 4 &&
    check "the operator renews its lease since" eventually 30 lease_renewed_after "$(micro_now)" &&
    check "a third result is recorded" eventually 120 results_at_least "$job" 3 &&
    check "the next 3 requests are answered 500" fault status 500 3 &&
    check "the operator renews its lease since" eventually 30 lease_renewed_after "$(micro_now)" &&
    check "a fourth result is recorded" eventually 120 results_at_least "$job" 4 &&
    check "all traffic stalls for 5s" fault stall 5 &&
    check "the job Succeeds within 300s" ends_in "$job" Succeeded 300; then
    expect "its best is $published_best" best_is "$job" "$published_best"
    expect "every trial was launched once, and each launch is recorded" launched_once "$job"
    expect "status.results has each trial once" results_once "$job"
    expect "no trial Pod name was created twice (audit log)" created_once pods
    expect "the operator never restarted" same_operator "$pid"
    expect "it counted the 429s" counted_more "$throttled" 'autotune_kube_requests_total{code="429"'
    expect "it counted the 500s" counted_more "$failed" 'autotune_kube_requests_total{code="500"'
    expect "it counted the watches it started again" \
      counted_more "$restarts" autotune_watch_restarts_total
  fi
  check "the operator is restarted to talk to the API server directly" \
    operator_through "$E2E_STATE/operator.kubeconfig"
  stop_fault_proxy
  end_case
}

# A grid job of two trials (z1_gas1_tmbspg1 and z1_gas1_tmbspg3) of $2 seconds each, created and
# seen running.
create_running_pair() {
  check "a job of two trials of ${2}s each is created" create_job "$1" strategy=grid \
    stages='[1]' micro='[1, 3]' early=0 startup="$2" &&
    check "a trial runs" eventually 60 some_running_pod "$1"
}

# The process of this run that is trial-sim running trial $1 (its environment says which).
trial_process() {
  local pid
  for pid in $(pgrep -f -- "--e2e-run $marker"); do
    if [[ $(cat "/proc/$pid/comm" 2>/dev/null) == trial-sim ]] &&
      tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "AUTOTUNE_TRIAL=$1"; then
      echo "$pid"
      return 0
    fi
  done
  return 1
}

# A trial's process killed with SIGKILL on its node, as a person or a runaway script might: the
# trial is Failed, killed by signal 9, recorded once; the search ends at the published best.
case_process_killed() {
  begin_case process-killed
  local job=process-killed pid
  create_running_pair "$job" 15 || return 0
  check "z1_gas1_tmbspg1's trial-sim process is found" eventually 60 trial_process z1_gas1_tmbspg1 ||
    return 0
  pid=$(trial_process z1_gas1_tmbspg1)
  check "it is killed with SIGKILL" kill -KILL "$pid" || return 0
  check "the job Succeeds within 120s" ends_in "$job" Succeeded 120 || return 0
  expect "z1_gas1_tmbspg1 is Failed, killed by signal 9, and each trial is recorded once" \
    job_has "$job" --outcome z1_gas1_tmbspg1=Failed \
      --reason "z1_gas1_tmbspg1=killed by signal 9" --unique-names --results 2
  expect "the operator counts a Failed trial (autotune_trials_finished_total)" \
    job_counted autotune_trials_finished_total "$job" 1 'outcome="Failed"'
  expect "its best is $published_best" best_is "$job" "$published_best"
  expect "no trial Pod name was created twice (audit log)" created_once pods
  end_case
}

# A running trial's Pod deleted by someone else: the trial runs again as its next attempt
# (<pod>-r1), whether a reconcile saw the Pod go or not; it is recorded once, and the search ends
# at the published best.
case_pod_deleted() {
  begin_case pod-deleted
  local job=pod-deleted pod
  create_running_pair "$job" 10 || return 0
  pod=$(running_pods "$job" | sed -n 1p)
  check "its Pod ($pod) is deleted" kubectl delete -n "$case_ns" "$pod" --wait=false || return 0
  check "the job Succeeds within 120s" ends_in "$job" Succeeded 120 || return 0
  expect "the trial was relaunched (a TrialRelaunched Event)" events_include "$job" TrialRelaunched
  expect "the operator counts the relaunch (autotune_trials_relaunched_total)" \
    job_counted autotune_trials_relaunched_total "$job" 1
  expect "both trials Succeeded, each recorded once" job_has "$job" \
    --outcome-values Succeeded Succeeded --results 2
  expect "no trial Pod name was created twice (audit log)" created_once pods
  expect "its best is $published_best" best_is "$job" "$published_best"
  end_case
}

# The node of a Running trial Pod of job $1.
running_node() {
  kubectl get pods -n "$case_ns" -l "autotune.io/job=$1" --field-selector=status.phase=Running \
    -o jsonpath='{.items[0].spec.nodeName}'
}

no_relaunch() {
  if events_include "$1" TrialRelaunched >/dev/null; then
    kubectl get events -n "$case_ns" --field-selector reason=TrialRelaunched \
      -o jsonpath='{.items[*].message}'
    return 1
  fi
}

# A Node deleted while a trial runs on it, and registered again by the node simulator's next
# heartbeat (within 10s): the operator's Node cache lacks it meanwhile and the API server answers
# 404 for it, then has it again. Its trials run on: none lost, relaunched or run twice.
case_node_return() {
  begin_case node-return
  local job=node-return node
  create_running_pair "$job" 20 || return 0
  node=$(running_node "$job")
  check "its node ($node) is deleted" kubectl delete node "$node" --wait=false || return 0
  check "the node simulator registers $node again within 30s" \
    eventually 30 kubectl get node "$node" -o name || return 0
  check "the job Succeeds within 120s" ends_in "$job" Succeeded 120 || return 0
  expect "no trial was relaunched (no TrialRelaunched Event)" no_relaunch "$job"
  expect "the operator counts no relaunch of it (autotune_trials_relaunched_total)" \
    job_not_counted autotune_trials_relaunched_total "$job"
  expect "each trial was launched once and recorded once" launched_once "$job"
  expect "its best is $published_best" best_is "$job" "$published_best"
  end_case
}

launched_event() {
  [[ -n $(kubectl get events -n "$case_ns" \
    --field-selector "involvedObject.name=$1,reason=TrialLaunched" -o name) ]]
}

# Every name in file $2 is still among the job's results.
still_recorded() {
  local missing
  missing=$(comm -23 <(sort "$2") \
    <(field "$1" '{range .status.results[*]}{.name}{"\n"}{end}' | sort))
  [[ -z $missing ]] || { echo "lost after the restart: $missing"; return 1; }
}

mid_search() { results_at_least "$1" 3 && some_running_pod "$1"; }

record_results() { field "$1" '{range .status.results[*]}{.name}{"\n"}{end}' >"$2"; }

case_restart() {
  begin_case restart
  local job=gpt2-large snapshots=()
  check "the GPT2-large job is created" create_job "$job" startup=1 || return 0
  check "a TrialLaunched Event appears" eventually 60 launched_event "$job" || return 0
  check "the operator is killed (SIGKILL) right after the first launch and restarted" \
    crash_operator || return 0
  check "a result is recorded" eventually 120 results_at_least "$job" 1 || return 0
  snapshots+=("$work/recorded.1")
  record_results "$job" "${snapshots[-1]}"
  check "the operator is killed after the first result is recorded and restarted" \
    crash_operator || return 0
  check "three results are recorded and a trial is in flight" \
    eventually 180 mid_search "$job" || return 0
  snapshots+=("$work/recorded.3")
  record_results "$job" "${snapshots[-1]}"
  check "the operator is killed with a trial in flight and restarted" crash_operator || return 0
  check "the job Succeeds within 300s" ends_in "$job" Succeeded 300 || return 0
  expect "its best is still $published_best" best_is "$job" "$published_best"
  expect "every trial was launched exactly once, and each launch is recorded" \
    launched_once "$job"
  expect "status.results has no duplicate" job_has "$job" \
    --recorded-once
  expect "the API server dates its last status write under the operator's field manager" \
    status_write_recorded "$job"
  local snapshot
  for snapshot in "${snapshots[@]}"; do
    expect "the $(wc -l <"$snapshot") results recorded before a kill are still there" \
      still_recorded "$job" "$snapshot"
  done
  expect "no trial Pod remains" eventually 30 no_trial_pods "$job"
  end_case
}

pod_phase_is() { [[ $(kubectl get -n "$case_ns" "$1" -o jsonpath='{.status.phase}') == "$2" ]]; }

# Pod $1 deleted, and kept by the API server: its deletion marked, the operator's finalizer on it.
deleted_and_held() {
  kubectl delete -n "$case_ns" "$1" --wait=false &&
    [[ -n $(kubectl get -n "$case_ns" "$1" -o jsonpath='{.metadata.deletionTimestamp}') ]] &&
    kubectl get -n "$case_ns" "$1" -o jsonpath='{.metadata.finalizers}' |
    grep -q autotune.io/trial-result
}

pod_gone() { ! kubectl get -n "$case_ns" "$1" >/dev/null 2>&1; }

# The operator stopped while a trial runs; the trial ends and its Pod is deleted, as a user or the
# Pod garbage collector would; the operator started again. The Pod, held by its finalizer, still
# tells how the trial ended: the result is recorded, nothing runs twice, and the Pod goes.
case_ended_while_down() {
  begin_case ended-while-down
  local job=ended-while-down pod
  check "a job of two trials of 5s each, one at a time, is created" create_job "$job" \
    strategy=grid stages='[1]' micro='[1, 3]' early=0 parallelism=1 startup=5 || return 0
  check "a trial runs" eventually 60 some_running_pod "$job" || return 0
  pod=$(running_pods "$job" | sed -n 1p)
  check "the operator is stopped" e2e_stop_operator TERM || return 0
  check "the trial's Pod ($pod) ends Succeeded" eventually 60 pod_phase_is "$pod" Succeeded ||
    return 0
  check "its Pod is deleted, and the API server keeps it for the operator" \
    deleted_and_held "$pod" || return 0
  check "the operator is started again" e2e_start_operator || return 0
  check "the job Succeeds within 120s" ends_in "$job" Succeeded 120 || return 0
  expect "no trial was relaunched" no_relaunch "$job"
  expect "every trial was launched exactly once, and each launch is recorded" launched_once "$job"
  expect "status.results has each trial once, both Succeeded" job_has "$job" \
    --outcome-values Succeeded Succeeded --results 2
  expect "the deleted Pod is gone" eventually 30 pod_gone "$pod"
  expect "no trial Pod remains" eventually 30 no_trial_pods "$job"
  end_case
}

# Whoever may create AutotuneJobs in a namespace may make one at the name of a job's search of a
# GPU model, naming the job as its controller (an owner reference is its writer's to set), with a
# search of their own: another config. The operator is stopped meanwhile, so that the job has not
# made its own search first. The job neither reads nor adopts it: that model's entry Fails saying
# so, the job's other model is searched, and what the tenant's search found is not the job's.
case_forged_search() {
  begin_case forged-search
  local job=forged forged=forged-nvidia-l40s uid
  check "the operator is stopped" e2e_stop_operator TERM || return 0
  if check "a job of the GPU models Simulated-GPU and NVIDIA-L40S is created" \
    create_job "$job" gpu_models='[Simulated-GPU, NVIDIA-L40S]' gpu_memory= stages='[1]' early=0
  then
    uid=$(field "$job" '{.metadata.uid}')
    check "a tenant's job at its NVIDIA-L40S search's name, controlled by it, is created" \
      forge_search "$forged" "$job" "$uid"
  fi
  check "the operator is started again" e2e_start_operator || return 0
  check "the job Succeeds within 180s" ends_in "$job" Succeeded 180 || return 0
  check "the tenant's job Succeeds within 180s: it has a best to take" \
    ends_in "$forged" Succeeded 180 || return 0
  expect "the job's NVIDIA-L40S entry is Failed, its search not the job's, with no best" \
    job_has "$job" --refused-search "NVIDIA-L40S=$forged=is not this job"
  expect "its Simulated-GPU search finds the 32 GiB search's best (z1_gas1_tmbspg3)" \
    job_has "$job" --best z1_gas1_tmbspg3
  expect "its output holds Simulated-GPU's config, and no NVIDIA-L40S config" \
    output_files "$job" ds_config.Simulated-GPU.json ds_config.json
  expect "its trials are its own search's, not the tenant's" eval \
    '[[ $(field "$job" "{.status.trials.launched}") == \
      $(field "$job-simulated-gpu" "{.status.trials.launched}") ]]'
  expect "the tenant's job is as they wrote it (generation 1)" \
    eval '[[ $(field "$forged" "{.metadata.generation}") == 1 ]]'
  end_case
}

# The AutotuneJob $1, of another config than the job $2's searches (ZeRO-0, micro-batch 1), with
# a controller reference to $2 by its UID $3.
forge_search() {
  local name=$1 job=$2 uid=$3
  job_manifest "$name" gpu_models='[Simulated-GPU]' gpu_memory= stages='[0]' micro='[1]' \
    early=0 | kubectl apply -f - >/dev/null &&
    kubectl patch atj "$name" -n "$case_ns" --type merge -p '{"metadata": {"ownerReferences": [
      {"apiVersion": "autotune.io/v1alpha1", "kind": "AutotuneJob", "name": "'"$job"'",
       "uid": "'"$uid"'", "controller": true}]}}' >/dev/null
}

# The output ConfigMap of the job $1 holds the files $2..., and no other.
output_files() {
  local files
  files=$(kubectl get configmap "$1-optimal" -n "$case_ns" -o json |
    inspect data-keys)
  echo "files: $files"
  [[ $files == "${*:2}" ]]
}

# The job $1's managedFields hold the operator's status entry (manager autotune-operator, its
# User-Agent's product), dated no earlier than the second of its completionTime: what paces its
# status writes across restarts.
status_write_recorded() {
  kubectl get atj "$1" -n "$case_ns" -o json --show-managed-fields |
    inspect status-written autotune-operator
}

# --- multi-node trials ---------------------------------------------------------------------------

two_ranks_running() {
  [[ $(kubectl get pods -n "$case_ns" -l "autotune.io/job=$1" \
    --field-selector=status.phase=Running -o name | wc -l) -ge 2 ]]
}

# GPT2-large with 16 GPUs per trial over 2 nodes of 8: each trial an Indexed Job whose two Pods
# run trial-sim on the two simulated nodes and meet over TCP. The operator is killed with SIGKILL
# while both ranks of a trial run.
case_multinode() {
  begin_case multinode
  local job=gpt2-large
  check "a job with nodesPerTrial 2 is created" create_job "$job" nodes=2 startup=2 \
    log_suffix="$rank_log_suffix" || return 0
  check "both ranks of a trial run" eventually 120 two_ranks_running "$job" || return 0
  check "the operator is killed (SIGKILL) with a multi-node trial in flight and restarted" \
    crash_operator || return 0
  check "it Succeeds within 300s" ends_in "$job" Succeeded 300 || return 0
  expect "its best is $published_best" best_is "$job" "$published_best"
  expect "status.best names 2 nodes and 16 GPUs" job_has "$job" \
    --equals best.nodes=2 --equals best.gpus=16
  expect "each trial's two Pods ran on different nodes" ranks_on_distinct_nodes 2
  expect "every trial was launched exactly once, and each launch is recorded (rank 0's log)" \
    launched_once "$job" "$(launch_log "$job").rank0"
  expect "status.results has each trial once" results_once "$job"
  expect "no trial's Job was created twice (audit log)" created_once jobs
  expect "cmd.txt says how to run the best config on each of the 2 nodes" \
    configmap_holds "$job-optimal" cmd.txt '# On each of 2 nodes with 8 GPUs each'
  expect "no trial Job, Service or Pod remains" eventually 60 no_trial_jobs "$job"
  expect "no trial Pod remains" eventually 60 no_trial_pods "$job"
  end_case
}

# One rank of each trial runs out of memory; the other sees its peer fail.
case_multinode_oom() {
  begin_case multinode-oom
  local job=rank-oom
  check "a two-node job whose rank 1 runs out of memory is created" create_job "$job" nodes=2 \
    stages='[1]' micro='[2]' parallelism=1 max_failed=1 \
    extra_env='{name: AUTOTUNE_SIM_OOM_RANK, value: "1"}' || return 0
  check "it ends Failed within 120s" ends_in "$job" Failed 120 || return 0
  expect "its one trial is OOM with the CUDA out-of-memory message" job_has "$job" \
    --results 1 --every-outcome OOM --each-reason "OOM=out of memory"
  expect "a TrialOOM Event" events_include "$job" TrialOOM
  expect "no trial Job, Service or Pod remains" eventually 60 no_trial_jobs "$job"
  end_case
}

# --- real DeepSpeed (the deepspeed tier runs this case alone: tests/deepspeed) --------------------

# tests/deepspeed/tiny-lm.yaml in the case's namespace, two ranks a trial, every trial Pod a real
# DeepSpeed launch on the CPU accelerator from the environment of scripts/deepspeed-env, meeting on
# the port AUTOTUNE_DS_PORT (the tier gives each of its tests its own; the two-node case below
# uses the operator's own, DeepSpeed's default).
deepspeed_port=${AUTOTUNE_DS_PORT:-29510}
deepspeed_job_manifest() {
  local venv=$1
  sed -e "s|@SCRIPT@|$source_dir/tests/deepspeed/tiny_lm.py|" -e 's|@RANKS@|2|' \
    -e "s|@PORT@|$deepspeed_port|" \
    -e "s|^  name: tiny-lm$|  name: tiny-lm\n  namespace: $case_ns|" \
    "$source_dir/tests/deepspeed/tiny-lm.yaml"
  deepspeed_env "$venv"
}

# The trainer container's env that runs DeepSpeed from the environment $1 on the CPU accelerator.
deepspeed_env() {
  local venv=$1
  cat <<ENV
          env:
            - {name: PATH, value: "$venv/bin:/usr/local/bin:/usr/bin:/bin"}
            - {name: DS_ACCELERATOR, value: cpu}
            - {name: TORCH_EXTENSIONS_DIR, value: "$venv/torch-extensions"}
ENV
}

# Every Succeeded trial's recorded metrics are those of the file DeepSpeed's engine wrote from
# rank 0, as its Pod's termination message (kept by the node simulator). $2 is what follows the
# trial in the name of the Pod that holds it: "-0-*" for rank 0 of a multi-node trial.
metrics_from_deepspeed() {
  kubectl get atj "$1" -n "$case_ns" -o json | python3 -c '
import glob, json, sys
sys.dont_write_bytecode = True  # nothing written beside the source
sys.path.insert(0, sys.argv[3])
import check_run
results = json.load(sys.stdin)["status"]["results"]
measured = [r for r in results if r["outcome"] == "Succeeded" and r["name"] != "profile_model_info"]
assert measured, "no trial was measured"
for record in measured:
    pod = record["name"].replace("_", "-")
    files = glob.glob(sys.argv[1] + "/" + sys.argv[2] + "_*" + pod + sys.argv[4] + "_*/termination-log")
    assert files, "no termination message for " + record["name"]
    check_run.expect_deepspeed_metrics(record["name"], record, json.load(open(files[0])))
assert not check_run.findings, check_run.findings
print(len(measured), "trials measured by DeepSpeed")
' "$E2E_STATE/node-sim" "$case_ns" "$source_dir/tests/deepspeed" "${2:-}"
}

# The ConfigMap's ds_config.json, given to the training script as the user's job would give it.
deepspeed_trains_with() {
  local venv=$1 configmap=$2
  configmap_data "$configmap" ds_config.json >"$work/tuned_ds_config.json"
  PATH=$venv/bin:$PATH DS_ACCELERATOR=cpu TORCH_EXTENSIONS_DIR=$venv/torch-extensions \
    deepspeed --num_gpus 2 --master_port "$deepspeed_port" \
    "$source_dir/tests/deepspeed/tiny_lm.py" --deepspeed "$work/tuned_ds_config.json" \
    >"$work/tuned.log" 2>&1 || {
    tail -20 "$work/tuned.log"
    return 1
  }
}

case_deepspeed() {
  begin_case deepspeed
  local job=tiny-lm venv
  venv=$("$source_dir/scripts/deepspeed-env" newest)
  check "a job whose trials are real two-rank DeepSpeed launches is created" \
    kubectl apply -f <(deepspeed_job_manifest "$venv") || return 0
  check "it Succeeds within 600s" ends_in "$job" Succeeded 600 || return 0
  expect "the profiling trial ran first and DeepSpeed measured tiny_lm.py's 536320 parameters" \
    job_has "$job" --first-trial profile_model_info \
      --equals model.numParameters=536320 --above model.activationMemoryPerSample=0
  expect "stages 0, 1 and 2 were each measured" job_has "$job" \
    --spaces-succeeded z0 z1 z2
  expect "every recorded metric is DeepSpeed's own, read from the termination message" \
    metrics_from_deepspeed "$job"
  expect "DeepSpeed trains tiny_lm.py with the ConfigMap's ds_config.json on two ranks" \
    deepspeed_trains_with "$venv" "$job-optimal"
  end_case
}

# tiny_lm.py on two simulated nodes, one rank each: each trial is DeepSpeed's own launcher run in
# both Pods of an Indexed Job without ssh, meeting at rank 0's host name over gloo. The launcher
# reads the world from a hostfile of one line a node, which each Pod writes first.
deepspeed_two_node_manifest() {
  local venv=$1
  cat <<JOB
apiVersion: autotune.io/v1alpha1
kind: AutotuneJob
metadata:
  name: tiny-lm-two-nodes
  namespace: $case_ns
spec:
  deepspeedConfig:
    train_micro_batch_size_per_gpu: [2, 4]
    gradient_accumulation_steps: 1
    optimizer: {type: AdamW, params: {lr: 0.0001, torch_adam: true}}
    zero_optimization: {stage: 1}
  model: {numParameters: 536320, activationMemoryPerSample: 1000000}
  resources: {gpusPerTrial: 2, nodesPerTrial: 2, gpuMemory: 1184Mi}
  search: {strategy: grid, metric: throughput}
  parallelism: 1
  trialTimeout: 5m
  template:
    spec:
      containers:
        - name: trainer
          image: deepspeed
          command:
            - sh
            - -c
            - >-
              seq 1 "\$AUTOTUNE_NUM_NODES" | sed 's/^/node-/; s/\$/ slots=1/' >hostfile &&
              exec deepspeed --hostfile hostfile --no_ssh --node_rank \${AUTOTUNE_NODE_RANK}
              --master_addr \${AUTOTUNE_MASTER_ADDR} --master_port \${AUTOTUNE_MASTER_PORT}
              $source_dir/tests/deepspeed/tiny_lm.py --deepspeed "\$AUTOTUNE_DS_CONFIG"
JOB
  deepspeed_env "$venv"
}

case_deepspeed_two_nodes() {
  begin_case deepspeed-two-nodes
  local job=tiny-lm-two-nodes venv
  venv=$("$source_dir/scripts/deepspeed-env" newest)
  check "a job whose trials are real DeepSpeed launches on two nodes is created" \
    kubectl apply -f <(deepspeed_two_node_manifest "$venv") || return 0
  check "it Succeeds within 600s" ends_in "$job" Succeeded 600 || return 0
  expect "both trials were measured" job_has "$job" \
    --results 2 --every-outcome Succeeded
  expect "every recorded metric is DeepSpeed's own, read from rank 0's termination message" \
    metrics_from_deepspeed "$job" "-0-*"
  expect "each trial's two Pods ran on different nodes" ranks_on_distinct_nodes 2
  end_case
}

# --- the run -------------------------------------------------------------------------------------

# The cases by theme. Each theme is a ctest test of its own (e2e.operator.THEME), on a cluster of
# its own, so that the themes run side by side; within a theme the cases run one after another,
# since most of them count every GPU of the cluster or stop its operator or its API server.
declare -A themes=(
  [search]="rbac example strategies oom profiling crash timeout unschedulable invalid configs
    sharing deletion hostile foreign hold pod_security multinode_oom wrapper gpu_models dra"
  [busy]="busy_cluster quota preemption tenants unwatched_nodes"
  [faults]="node_return pod_deleted process_killed controlplane_restart api_faults"
  [restarts]="restart ended_while_down multinode forged_search"
)

if [[ -n ${AUTOTUNE_E2E_CASES:-} ]]; then
  cases=$AUTOTUNE_E2E_CASES
elif [[ -n ${themes[${AUTOTUNE_E2E_THEME:-}]:-} ]]; then
  cases=${themes[$AUTOTUNE_E2E_THEME]}
else
  echo "$test_name: set AUTOTUNE_E2E_THEME to one of ${!themes[*]}, or AUTOTUNE_E2E_CASES" >&2
  exit 2
fi

kept_as=${AUTOTUNE_E2E_THEME:-cases}
forget_audit_log "$kept_as"
e2e_test_up

# shellcheck disable=SC2086  # a list of names
run_cases $cases no_secrets_in_logs
keep_audit_log "$kept_as"

e2e_test_end
