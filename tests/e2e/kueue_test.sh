#!/usr/bin/env bash
# The operator with Kueue: the environment of e2e_test.sh (a real control plane, simulated GPU
# nodes, the operator with the chart's RBAC) with a real Kueue admitting the Pods and Jobs of the
# namespaces it manages, the chart rendered with kueue.enabled=true and the operator run with
# --kueue. Every job here names a LocalQueue (spec.queueName); Kueue, not the operator, decides how
# many of its trials run.
#
# Cases, each in namespaces of its own that Kueue manages:
#   sharing        two jobs in two namespaces whose LocalQueues share a ClusterQueue of 16 GPUs on
#                  the 32-GPU cluster: never more than 16 GPUs of trials admitted or running, a job
#                  waiting for admission in Kueue's words, both at the published best, each trial
#                  launched once
#   preemption     a Pod of a higher WorkloadPriorityClass preempts a running trial: the trial runs
#                  again as preempted once quota returns, at the same best, no result lost or
#                  recorded twice
#   multinode      trials of two nodes each queue as one Job: admitted whole, one at a time
#   missing_queue  a job naming a LocalQueue that does not exist creates nothing and says so, and
#                  goes on once the queue exists; its afterTuning Job is admitted from that queue
#   restart        the operator killed with SIGKILL while trials wait for admission: nothing is
#                  created twice and the job Succeeds once the quota is free
#   unpullable     a trial whose image cannot be pulled, under Kueue's waitForPodsReady (30s, as
#                  scripts/kueue configures it): each PodsReadyTimeout eviction spends an attempt,
#                  the trial fails after three and the job says why, instead of relaunching for ever
#   gpu_model_flavors  a job of one GPU model (spec.gpuModels) in a ClusterQueue of a flavor per
#                  model: admitted to its model's flavor alone, every trial on that model's node
# Cases joined by + run side by side (each in a subshell, its output printed once it ends). At the
# end, the chart's RBAC with kueue.enabled is held to the audit log (the operator listed and
# watched Workloads and LocalQueues), and no log holds a secret.
#
# Usage: kueue_test.sh OPERATOR NODE_SIM TRIAL_SIM SOURCE_DIR
# AUTOTUNE_E2E_KEEP=1 keeps the work folder; AUTOTUNE_E2E_KUEUE_CASES (as the default list below,
# e.g. "sharing+preemption rights_used") runs only those.
set -euo pipefail

if (($# != 4)); then
  echo "usage: $0 OPERATOR NODE_SIM TRIAL_SIM SOURCE_DIR" >&2
  exit 2
fi
export AUTOTUNE_OPERATOR=$1 AUTOTUNE_NODE_SIM=$2 AUTOTUNE_TRIAL_SIM=$3
source_dir=$(cd "$4" && pwd)
# shellcheck source=tests/e2e/support.sh
source "$source_dir/tests/e2e/support.sh"

e2e_test_start autotune-e2e-kueue
with_kueue=true
# Reading a Pod, a Node or the output ConfigMap by name: e2e_test.sh's cases foreign, node_return
# and hold (a trial's Pod name taken, a Node gone, the output name taken) make the operator do so;
# creating an AutotuneJob per GPU model, its case gpu_models.
exercised_elsewhere=(core/pods/get core/nodes/get core/configmaps/get autotune.io/autotunejobs/create)

queue_label=kueue.x-k8s.io/queue-name
priority_label=kueue.x-k8s.io/priority-class
# Kueue's message for a trial of $1 GPUs that its ClusterQueue has no room for.
no_room() {
  echo "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in" \
    "flavor $e2e_kueue_flavor_name, $1 more needed"
}

# A failed check prints, once per case, what dump prints and Kueue's Workloads of the namespace.
on_check_failure() {
  [[ $dumped != "$case_ns" ]] || return 0
  dump
  {
    echo "--- kubectl get workloads -n $case_ns -o wide"
    kubectl get workloads.kueue.x-k8s.io -n "$case_ns" -o wide
  } 2>&1 | sed 's/^/    # /'
}

# --- namespaces and queues -----------------------------------------------------------------------

# Starts a case in a fresh namespace that Kueue manages (as begin_case does).
begin_kueue_case() {
  case_ns=e2e-$1
  echo
  note "case $1 (namespace $case_ns)"
  e2e_kueue_manage_namespace "$case_ns"
}

# A ClusterQueue $2 of $3 GPUs (preemption $4, default Never), and LocalQueue team in each of the
# namespaces $1 (space-separated) pointing at it.
team_queue() {
  local namespaces=$1 queue=$2 gpus=$3 preemption=${4:-Never} namespace
  e2e_kueue_cluster_queue "$queue" "$gpus" "$preemption" || return 1
  for namespace in $namespaces; do
    e2e_kueue_local_queue "$namespace" team "$queue" || return 1
  done
}

# A Pod of no job in LocalQueue team of the case's namespace, asking for $2 GPUs, sleeping $3
# seconds; $4 is its WorkloadPriorityClass, none by default.
queued_pod() {
  local name=$1 gpus=$2 seconds=$3 priority=${4:-}
  kubectl apply -f - <<POD
apiVersion: v1
kind: Pod
metadata:
  name: $name
  namespace: $case_ns
  labels: {$queue_label: team${priority:+, $priority_label: $priority}}
spec:
  restartPolicy: Never
  containers:
    - name: main
      image: busybox
      command: [sleep, "$seconds"]
      resources: {limits: {nvidia.com/gpu: $gpus}}
POD
}

pod_phase_is() {
  [[ $(kubectl get pod "$1" -n "$case_ns" -o jsonpath='{.status.phase}') == "$2" ]]
}

# Runs the command with case_ns set to $1, so that the job helpers look there.
in_namespace() {
  local case_ns=$1
  shift
  "$@"
}

# --- what Kueue admitted -------------------------------------------------------------------------

# One sample of ClusterQueue $1, whose namespaces are $2 (space-separated): the GPUs of the Pods
# there that are bound to a node and not finished; the GPUs that the Workloads it admitted hold
# (admitted, not finished, less the Pods Kueue counts as reclaimable: those of a Job that
# succeeded, whose quota Kueue releases before the Workload finishes; one pod set a Workload, as
# trials have); how many Workloads hold some; and how many batch Jobs there are neither suspended
# nor finished.
queue_sample() {
  local queue=$1 namespaces=" $2 " row
  row='{.kind}{"\t"}{.metadata.namespace}{"\t"}{.spec.nodeName}{"\t"}{.status.phase}{"\t"}'
  row+='{.spec.containers[*].resources.limits.nvidia\.com/gpu}{"\t"}'
  row+='{.status.admission.clusterQueue}{"\t"}{.status.conditions[?(@.type=="Admitted")].status}'
  row+='{"\t"}{.status.conditions[?(@.type=="Finished")].status}{"\t"}'
  row+='{.status.admission.podSetAssignments[*].resourceUsage.nvidia\.com/gpu}{"\t"}'
  row+='{.status.admission.podSetAssignments[*].count}{"\t"}'
  row+='{.status.reclaimablePods[*].count}{"\t"}'
  row+='{.spec.suspend}{"\t"}{.status.conditions[?(@.type=="Complete")].status}'
  row+='{.status.conditions[?(@.type=="Failed")].status}{"\n"}'
  local items
  # Nothing for this sample if the API server does not answer.
  items=$(kubectl get pods,workloads.kueue.x-k8s.io,jobs.batch -A \
    -o jsonpath="{range .items[*]}$row{end}" 2>/dev/null) || return 0
  awk -F'\t' -v namespaces="$namespaces" -v queue="$queue" '
    function total(list,    n, i, parts, sum) {
      n = split(list, parts, " ")
      for (i = 1; i <= n; i++) sum += parts[i]
      return sum
    }
    index(namespaces, " " $2 " ") == 0 { next }
    $1 == "Pod" && $3 != "" && $4 != "Succeeded" && $4 != "Failed" { pods += total($5) }
    $1 == "Workload" && $6 == queue && $7 == "True" && $8 != "True" && total($10) > total($11) {
      admitted++
      gpus += total($9) * (total($10) - total($11)) / total($10)
    }
    $1 == "Job" && $12 == "false" && $13 !~ /True/ { jobs++ }
    END { print pods + 0, gpus + 0, admitted + 0, jobs + 0 }' <<<"$items"
}

# Samples ClusterQueue $1 of namespaces $2 in the background into file $3 until stop_sampling.
start_sampling() {
  : >"$3"
  touch "$3.on"
  sample_while "$3.on" "$3" queue_sample "$1" "$2" &
  sampler=$!
}

stop_sampling() {
  rm -f "$1.on"
  wait "$sampler" || true
}

# In the samples of file $3, column $1 (queue_sample's) never exceeded $2, and was above 0 in some;
# $4 names it. At least 5 samples.
never_above() {
  local column=$1 limit=$2 samples=$3 what=$4 count most
  count=$(wc -l <"$samples")
  most=$(most "$column" "$samples")
  echo "$count samples, at most $most $what at once"
  ((count >= 5 && most >= 1 && most <= limit))
}

# Some sample of file $3 had column $1 at $2 or more.
reached() {
  local column=$1 least=$2 samples=$3
  (($(most "$column" "$samples") >= least)) || {
    echo "at most $(most "$column" "$samples") in column $column"
    return 1
  }
}

# The job says a trial waits for Kueue admission in LocalQueue $2, in the words Kueue gives for
# $3 GPUs that do not fit, counting it in status.trials.awaitingAdmission; Running is True when
# some trial runs, else False.
waits_for_admission() {
  job_has "$1" --at-least trials.awaitingAdmission=1 \
    --condition-reason Running=WaitingForAdmission \
    --condition-message "Running=waits for Kueue admission in LocalQueue $2: $(no_room "$3")" \
    --running-follows-trials
}

# Job $1 of namespace $2 or job $3 of namespace $4 waits for admission in LocalQueue team.
either_waits() {
  in_namespace "$2" waits_for_admission "$1" team 8 >/dev/null ||
    in_namespace "$4" waits_for_admission "$3" team 8
}

# The Workloads of the case's namespace: one line each, the kind of its owner and its priority.
workloads() {
  kubectl get workloads.kueue.x-k8s.io -n "$case_ns" \
    -o jsonpath='{range .items[*]}{.metadata.ownerReferences[0].kind} {.spec.priority}{"\n"}{end}'
}

# Every Workload of the case's namespace is owned by a $1 and has priority $2; there is one.
workloads_are() {
  local found
  found=$(workloads)
  echo "$found"
  [[ -n $found ]] && ! grep -qvx "$1 $2" <<<"$found"
}

# Every trial Pod of job $1 carries label $2 with value $3.
trial_pods_labelled() {
  local values
  values=$(kubectl get pods -n "$case_ns" -l "autotune.io/job=$1" \
    -o jsonpath="{range .items[*]}{.metadata.labels.${2//./\\.}}{\"\\n\"}{end}")
  echo "$values"
  [[ -n $values ]] && ! grep -qvx "$3" <<<"$values"
}

# The trial Jobs of job $1 carry queue label $2 and their Pod templates none.
trial_jobs_queued() {
  local rows key=${queue_label//./\\.}
  rows=$(kubectl get jobs -n "$case_ns" -l "autotune.io/job=$1" -o jsonpath="{range .items[*]}\
{.metadata.name} job={.metadata.labels.$key} pods={.spec.template.metadata.labels.$key}{\"\\n\"}\
{end}")
  echo "$rows"
  [[ -n $rows ]] && ! grep -qv " job=$2 pods=$" <<<"$rows"
}

# Every name launched (file $2) is a result of job $1 and the reverse: nothing lost, nothing run
# that is not recorded; relaunches show in the file more than once.
launches_recorded() {
  diff -u --label launched --label recorded <(sort -u "$2") \
    <(field "$1" '{range .status.results[*]}{.name}{"\n"}{end}' | sort)
}

# The trial the TrialRelaunched Event says was preempted is in job $1's launch log twice (it had
# started when it was preempted), and no other trial is.
launched_twice_if_preempted() {
  local preempted twice
  preempted=$(kubectl get events -n "$case_ns" --field-selector reason=TrialRelaunched \
    -o jsonpath='{range .items[*]}{.message}{"\n"}{end}' |
    sed -n 's/^Trial \(\S*\) was preempted .*/\1/p')
  twice=$(sort "$(launch_log "$1")" | uniq -d)
  echo "preempted: ${preempted:-none}; launched twice: ${twice:-none}"
  [[ -n $preempted && $twice == "$preempted" ]]
}

# --- the cases -----------------------------------------------------------------------------------

# Two jobs of 8 GPUs a trial, parallelism 2, in two namespaces whose LocalQueues share ClusterQueue
# sharing of 16 GPUs: the cluster has room for all four trials, Kueue for two.
case_sharing() {
  begin_kueue_case sharing
  local first=$case_ns second=$case_ns-other samples=$work/sharing.samples
  check "namespace $second is managed by Kueue too" e2e_kueue_manage_namespace "$second" &&
    check "ClusterQueue sharing of 16 GPUs, LocalQueue team in both namespaces" \
      team_queue "$first $second" sharing 16 || return 0
  start_sampling sharing "$first $second" "$samples"
  expect "job first is created: 8 GPUs a trial, parallelism 2, LocalQueue team" \
    create_job first gpus=8 queue=team startup=1
  expect "job second is created in $second alike" \
    in_namespace "$second" create_job second gpus=8 queue=team startup=1
  expect "a job shows WaitingForAdmission with Kueue's words, awaitingAdmission counted" \
    eventually 60 either_waits first "$first" second "$second"
  expect "first Succeeds within 300s" ends_in first Succeeded 300
  expect "second Succeeds within 300s" in_namespace "$second" ends_in second Succeeded 300
  stop_sampling "$samples"
  expect "first ends at $published_best" best_is first "$published_best"
  expect "second ends at $published_best" in_namespace "$second" best_is second "$published_best"
  expect "each trial of first was launched once and recorded once" launched_once first
  expect "each trial of second was launched once and recorded once" \
    in_namespace "$second" launched_once second
  expect "at no time were more than 16 GPUs of trial Pods bound to a node and not finished" \
    never_above 1 16 "$samples" "GPUs of trial Pods bound"
  expect "at no time did the ClusterQueue's Workloads hold more than 16 GPUs" \
    never_above 2 16 "$samples" "GPUs held by Workloads"
  expect "two trials ran at once at some time (16 GPUs)" reached 1 16 "$samples"
  expect "no trial of first was relaunched" job_not_counted autotune_trials_relaunched_total first
  expect "no trial of second was relaunched" \
    in_namespace "$second" job_not_counted autotune_trials_relaunched_total second
  in_namespace "$second" end_case
  end_case
}

# ClusterQueue preemption of 16 GPUs, preempting within itself by priority; a job of three trials,
# 8 GPUs each, parallelism 2, at WorkloadPriorityClass low through its template's label. A Pod of
# class high in the same LocalQueue, asking for 8 GPUs while two trials run, preempts one.
case_preemption() {
  begin_kueue_case preemption
  local job=preempted
  check "ClusterQueue preemption of 16 GPUs, preemption LowerPriority, LocalQueue team" \
    team_queue "$case_ns" preemption 16 LowerPriority || return 0
  check "a job of three trials of 10s is created: 8 GPUs each, priority class low" \
    create_job "$job" gpus=8 queue=team strategy=grid stages='[1]' micro='[1, 2, 3]' early=0 \
    startup=10 labels="{$priority_label: low}" || return 0
  check "two of its trials run at once" eventually 120 two_running "$job" || return 0
  expect "their Workloads are the Pods', at priority 100" workloads_are Pod 100
  # Before either ends: a trial that ended would leave room that needs no preemption.
  check "a Pod of priority class high asking for 8 GPUs is created in LocalQueue team" \
    queued_pod urgent 8 3 high || return 0
  expect "its trial Pods carry priority class low from the template" \
    trial_pods_labelled "$job" "$priority_label" low
  check "a trial is relaunched as preempted by Kueue within 60s" \
    eventually 60 relaunched_because 'was preempted (WorkloadEvictedDueToPreempted' || return 0
  expect "the Pod of priority class high runs to its end" \
    eventually 60 pod_phase_is urgent Succeeded
  check "the job Succeeds within 180s" ends_in "$job" Succeeded 180 || return 0
  expect "the operator counts the relaunch as preempted" job_counted \
    autotune_trials_relaunched_total "$job" 1 'reason="preempted"'
  expect "its best is $published_best" best_is "$job" "$published_best"
  expect "no result is recorded twice" results_once "$job"
  expect "every trial launched is recorded: no result lost" \
    launches_recorded "$job" "$(launch_log "$job")"
  expect "the preempted trial alone was launched twice" launched_twice_if_preempted "$job"
  end_case
}

# GPT2-large on 2 nodes of 8 GPUs a trial, parallelism 2, in ClusterQueue multinode of 16 GPUs:
# room for one trial. Each trial is an Indexed Job carrying the queue label (its Pods do not),
# admitted by Kueue as one Workload.
case_multinode() {
  begin_kueue_case multinode
  local job=gpt2-large samples=$work/multinode.samples
  check "ClusterQueue multinode of 16 GPUs, LocalQueue team" \
    team_queue "$case_ns" multinode 16 || return 0
  start_sampling multinode "$case_ns" "$samples"
  expect "a job with nodesPerTrial 2 and parallelism 2 is created in LocalQueue team" \
    create_job "$job" nodes=2 queue=team startup=1 log_suffix="$rank_log_suffix"
  expect "a trial waits for admission as one Job, in Kueue's words (16 GPUs)" \
    eventually 60 waits_for_admission "$job" team 16
  expect "its trial Jobs carry the queue label, their Pods none" trial_jobs_queued "$job" team
  expect "their Workloads are the Jobs'" workloads_are Job 0
  local ended=0
  check "it Succeeds within 300s" ends_in "$job" Succeeded 300 || ended=$?
  stop_sampling "$samples"
  ((ended == 0)) || return 0
  expect "its best is $published_best" best_is "$job" "$published_best"
  expect "at no time was more than one trial's Job unsuspended" \
    never_above 4 1 "$samples" "trial Jobs unsuspended"
  expect "at no time were more than one trial's Pods bound (16 GPUs)" \
    never_above 1 16 "$samples" "GPUs of trial Pods bound"
  expect "at no time did more than one Workload hold quota" \
    never_above 3 1 "$samples" "Workloads holding quota"
  expect "at no time did its Workloads hold more than 16 GPUs" \
    never_above 2 16 "$samples" "GPUs held by Workloads"
  expect "no trial was relaunched: nothing preempted them" \
    job_not_counted autotune_trials_relaunched_total "$job"
  expect "each trial's two Pods ran, on different nodes" ranks_on_distinct_nodes 2
  expect "every trial was launched exactly once, and each launch is recorded (rank 0's log)" \
    launched_once "$job" "$(launch_log "$job").rank0"
  expect "status.results has each trial once" results_once "$job"
  expect "no trial's Job was created twice (audit log)" created_once jobs
  expect "no trial Job, Service or Pod remains" eventually 60 no_trial_jobs "$job"
  end_case
}

# The afterTuning Job $1 carries queue label $2 and ran once Kueue admitted it (a Workload owned by
# it is Admitted).
after_tuning_queued() {
  local label admitted
  label=$(kubectl get job "$1" -n "$case_ns" -o jsonpath="{.metadata.labels.${queue_label//./\\.}}")
  admitted=$(kubectl get workloads.kueue.x-k8s.io -n "$case_ns" -o jsonpath="{range .items[*]}\
{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name} \
{.status.conditions[?(@.type==\"Admitted\")].status}{\"\\n\"}{end}")
  echo "label $queue_label: ${label:-none}; Workloads: $admitted"
  [[ $label == "$2" ]] && grep -qx "Job/$1 True" <<<"$admitted"
}

# A job naming LocalQueue late, which does not exist yet (ClusterQueue late does), with two trials
# and an afterTuning Job.
case_missing_queue() {
  begin_kueue_case missing-queue
  local job=early after=$work/after-tuning.args
  local not_found="Kueue LocalQueue late (spec.queueName) does not exist in namespace $case_ns:"
  not_found+=" no trial is created until it does"
  check "ClusterQueue late of 16 GPUs exists" e2e_kueue_cluster_queue late 16 || return 0
  check "a job naming LocalQueue late, which does not exist, is created" create_job "$job" \
    gpus=8 queue=late strategy=grid stages='[1]' micro='[1, 3]' early=0 \
    after_tuning="$(after_tuning_writing_to "$after")" || return 0
  check "Running=False, reason LocalQueueNotFound, naming the queue and the namespace" \
    eventually 30 job_has "$job" \
    --condition Running=False --condition-reason Running=LocalQueueNotFound \
    --condition-message-starts "Running=$not_found" \
    --equals trials.launched=0 || return 0
  expect "one Warning Event LocalQueueNotFound" warned_once "$job" LocalQueueNotFound
  expect "no trial Pod is created meanwhile" throughout 3 no_trial_pods "$job"
  check "LocalQueue late is created" e2e_kueue_local_queue "$case_ns" late late || return 0
  check "the job Succeeds within 120s" ends_in "$job" Succeeded 120 || return 0
  expect "its best is $published_best" best_is "$job" "$published_best"
  expect "each trial was launched once and recorded once" launched_once "$job"
  expect "still one LocalQueueNotFound Event" warned_once "$job" LocalQueueNotFound
  expect "status.afterTuningJob names $job-after-tuning" \
    job_has "$job" --equals "afterTuningJob=$job-after-tuning"
  expect "the afterTuning Job completes within 60s" eventually 60 job_complete "$job-after-tuning"
  expect "it carries the job's queue label, and Kueue admitted it" \
    after_tuning_queued "$job-after-tuning" late
  expect "its container ran with the best micro-batch, 3" ran_with_best "$after"
  end_case
}

# Job $1 has exactly one Event of reason $2, a Warning.
warned_once() {
  local types
  types=$(kubectl get events -n "$case_ns" --field-selector "involvedObject.name=$1,reason=$2" \
    -o jsonpath='{range .items[*]}{.type}{"\n"}{end}')
  [[ $types == Warning ]] || { echo "Events $2: ${types:-none}"; return 1; }
}

# The operator reconciled a job since it last started.
reconciled_since_start() {
  local count
  count=$(operator_metric 'autotune_reconcile_total{result="success"}') || return 1
  ((count >= 1))
}

# ClusterQueue restart of 16 GPUs, all held by a Pod of no job: the job's two trials wait for
# admission when the operator is killed with SIGKILL; it starts again, the Pod goes, and the
# trials run.
case_restart() {
  begin_kueue_case restart
  local job=held
  check "ClusterQueue restart of 16 GPUs, LocalQueue team" team_queue "$case_ns" restart 16 ||
    return 0
  check "a Pod of no job takes the queue's 16 GPUs" queued_pod holder 16 3600 || return 0
  check "Kueue admits it and it runs" eventually 60 pod_phase_is holder Running || return 0
  check "a job of two trials of 8 GPUs is created in LocalQueue team" create_job "$job" gpus=8 \
    queue=team strategy=grid stages='[1]' micro='[1, 3]' early=0 startup=1 || return 0
  check "both trials wait for admission, in Kueue's words (8 GPUs)" eventually 60 job_has \
    "$job" --equals trials.awaitingAdmission=2 --equals trials.launched=2 \
    --condition-reason Running=WaitingForAdmission --condition-message "Running=$(no_room 8)" ||
    return 0
  expect "no reconcile threw so far" no_new_exceptions 0
  check "the operator is killed (SIGKILL) while they wait, and restarted" crash_operator ||
    return 0
  expect "the restarted operator reconciles once the old one's lease expires" \
    eventually 60 reconciled_since_start
  expect "both trials still wait, none created again" throughout 3 job_has "$job" \
    --equals trials.awaitingAdmission=2 --equals trials.launched=2
  check "the Pod holding the quota is deleted" kubectl delete pod holder -n "$case_ns" \
    --wait=false || return 0
  check "the job Succeeds within 120s" ends_in "$job" Succeeded 120 || return 0
  expect "its best is $published_best" best_is "$job" "$published_best"
  expect "each trial was launched once and recorded once" launched_once "$job"
  expect "no trial Pod name was created twice (audit log)" created_once pods
  expect "no trial was relaunched" job_not_counted autotune_trials_relaunched_total "$job"
  expect "no reconcile threw since the restart" no_new_exceptions 0
  end_case
}

# Trial Pods created in the case's namespace: successful creates in the API server's audit log.
pods_created() { inspect pods-created "$E2E_AUDIT_LOG" "$case_ns" '' | wc -l; }

# ClusterQueue unpullable of 16 GPUs; a job of one trial whose image comes from a registry that
# does not resolve (the node simulator's registry.invalid). Kueue admits the trial, its container
# waits in ErrImagePull, and waitForPodsReady evicts it after 30s: a loss, not a preemption.
case_unpullable() {
  begin_kueue_case unpullable
  local job=unpullable trial=z1_gas1_tmbspg2 image=registry.invalid/team/trainer:1
  check "ClusterQueue unpullable of 16 GPUs, LocalQueue team" \
    team_queue "$case_ns" unpullable 16 || return 0
  check "a job of one trial, image $image, is created in LocalQueue team" create_job "$job" \
    gpus=8 queue=team strategy=grid stages='[1]' micro='[2]' early=0 image="$image" || return 0
  expect "while it waits, the job says its trial's container cannot start, in the kubelet's words" \
    eventually 60 job_has "$job" \
    --condition-reason Running=ContainerCannotStart \
    --message "ErrImagePull: failed to pull and unpack image \"$image\""
  check "the job ends Failed within 300s" ends_in "$job" Failed 300 || return 0
  local lost="lost on 3 attempts, last: WorkloadEvictedDueToPodsReadyTimeout"
  expect "its trial is Failed after three attempts, the last evicted for PodsReadyTimeout" \
    job_has "$job" \
    --outcomes "$trial=Failed" --reason-starts "$trial=$lost"
  expect "the job's message names the trial and why it failed" job_has "$job" \
    --message-starts "no trial succeeded: search complete (the last, $trial: $lost"
  expect "each attempt after the first is a TrialRelaunched Event naming the eviction" \
    relaunched_because "Trial $trial was lost (WorkloadEvictedDueToPodsReadyTimeout" 2
  expect "three Pods were created for it, no more (audit log)" eval '(($(pods_created) == 3))'
  expect "no trial Pod remains" eventually 60 no_trial_pods "$job"
  end_case
}

# Two ResourceFlavors, one per GPU model by its nvidia.com/gpu.product node label, in ClusterQueue
# models, the cluster's own model first; a pool of one H100 node. A queued job of the H100 model is
# admitted to the H100 flavor alone (Kueue matches its trials' nodeSelector against the flavors'
# nodeLabels, and skips the first), and every trial runs on the H100 node.
case_gpu_model_flavors() {
  begin_kueue_case gpu-model-flavors
  local pool=kueue-h100 model=NVIDIA-H100-80GB-HBM3 job=h100
  if ! check "a pool of one 16-GPU $model node (80Gi) joins" start_gpu_pool "$pool" "$model" 80Gi
  then
    stop_gpu_pool "$pool"
    return 0
  fi
  if check "ResourceFlavors of Simulated-GPU and $model in ClusterQueue models, LocalQueue team" \
    model_flavors "$model" &&
    check "a job of $model in LocalQueue team is created" \
      create_job "$job" queue=team gpu_models="[$model]" gpu_memory= stages='[1]' early=0; then
    expect "its running trials' Workloads are admitted to flavor h100 alone" \
      eventually 60 admitted_to_flavor h100
    expect "it Succeeds within 240s" ends_in "$job" Succeeded 240
    expect "every trial Pod ran on the $model node" ran_on_pool_only "$pool"
    expect "each trial was launched once and recorded once" launched_once "$job"
  fi
  check "the pool leaves" stop_gpu_pool "$pool"
  end_case
}

model_flavors() {
  kubectl apply -f - <<QUEUE
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: simulated-gpu}
spec: {nodeLabels: {nvidia.com/gpu.product: Simulated-GPU}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: h100}
spec: {nodeLabels: {nvidia.com/gpu.product: $1}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: models}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu, cpu, memory]
    flavors:
    - name: simulated-gpu
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 32}
      - {name: cpu, nominalQuota: 10k}
      - {name: memory, nominalQuota: 100Ti}
    - name: h100
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 16}
      - {name: cpu, nominalQuota: 10k}
      - {name: memory, nominalQuota: 100Ti}
QUEUE
  e2e_kueue_local_queue "$case_ns" team models
}

# Some Workload of the case's namespace is admitted, and every admitted one to flavor $1 alone.
admitted_to_flavor() {
  local flavors
  local path='{range .items[*]}{range .status.admission.podSetAssignments[*]}'
  path+='{.flavors.nvidia\.com/gpu}{"\n"}{end}{end}'
  flavors=$(kubectl get workloads.kueue.x-k8s.io -n "$case_ns" -o jsonpath="$path")
  echo "admitted to: ${flavors:-nothing}"
  [[ -n $flavors ]] && ! grep -qvx "$1" <<<"$flavors"
}

# The Kueue rights of the chart (kueue.enabled) were used: rights-used.txt, from case_rights_used.
case_kueue_rights_used() {
  local right
  for right in "workloads list" "workloads watch" "localqueues list" "localqueues watch"; do
    expect "the operator used its right to ${right#* } Kueue's ${right% *}" \
      grep -q "^used kueue.x-k8s.io $right: " "$work/rights-used.txt"
  done
}

# --- the run -------------------------------------------------------------------------------------

e2e_test_up
require "ResourceFlavor $e2e_kueue_flavor_name" e2e_kueue_flavor
require "WorkloadPriorityClasses low (100) and high (1000)" \
  eval 'e2e_kueue_priority_class low 100 && e2e_kueue_priority_class high 1000'

for group in ${AUTOTUNE_E2E_KUEUE_CASES:-sharing+preemption multinode+missing_queue \
  restart+unpullable gpu_model_flavors rights_used kueue_rights_used no_secrets_in_logs}; do
  run_group "$group"
done

e2e_test_end
