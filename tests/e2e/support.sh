# shellcheck shell=bash
# What the end-to-end tests (e2e_test.sh, kueue_test.sh, reuse_test.sh) share, sourced once they have set
# source_dir and exported the binaries (AUTOTUNE_OPERATOR, AUTOTUNE_NODE_SIM, AUTOTUNE_TRIAL_SIM):
# scripts/e2e-env and tests/support/checks.sh; the run's work folder and its cleanup; reporting
# and waiting; the AutotuneJob of GPT2-large (job_manifest, create_job) and what is checked of a
# job; the operator's metrics and restarts; sampling in the background; and the cases a run ends
# with (rights_used, no_secrets_in_logs). What is checked of kubectl's output and of the audit log
# is tests/e2e/inspect.py's, a subcommand each (inspect; job_has for a job's status).
#
#   e2e_test_start PREFIX       the work folder /tmp/PREFIX.XXXXXX ($work) and the traps; at exit
#                               the environment is stopped and the folder removed unless a check
#                               failed or AUTOTUNE_E2E_KEEP is set (on_cleanup, if the test
#                               defines it, runs first)
#   e2e_test_up                 the environment of scripts/e2e-env in $work, with Kueue when the
#                               test set with_kueue=true; or a "not ok" line and exit 1
#   run_cases NAME...           case_NAME for each
#   run_group A+B+...           case_A, case_B, ... side by side, each in its own subshell
#   e2e_test_end                the count of failed checks; exits 1 if any
# shellcheck source=scripts/e2e-env
source "${source_dir:?}/scripts/e2e-env"
# shellcheck source=tests/support/checks.sh
source "$source_dir/tests/support/checks.sh"

test_name=$(basename "$0" .sh)
command -v python3 >/dev/null || { echo "$test_name: python3 is needed"; exit 1; }

# Trial processes of this run carry it as an argument trial-sim ignores, so they can be found.
marker=autotune-e2e-$$
# DeepSpeed's published best for GPT2-large, which job_manifest's job ends at.
# shellcheck disable=SC2034  # read by the tests
published_best=z1_gas1_tmbspg3
case_ns=''
dumped=''
with_kueue=false
# Grants (GROUP/RESOURCE/VERB) that the test's cases do not exercise because another test's do:
# case_rights_used excuses them.
exercised_elsewhere=()

cleanup() {
  local status=$?
  if declare -F on_cleanup >/dev/null; then
    on_cleanup
  fi
  e2e_down
  if ((failures == 0 && status == 0)) && [[ -z ${AUTOTUNE_E2E_KEEP:-} ]]; then
    rm -rf "$work"
  else
    echo "$test_name: logs kept in $work (operator.log, node-sim.log, launches/," \
      "controlplane/logs/${E2E_KUEUE_STATE:+, kueue/kueue.log})"
  fi
}

e2e_test_start() {
  work=$(mktemp -d "/tmp/$1.XXXXXX")
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

# --- reporting -----------------------------------------------------------------------------------

# What a failure needs to be understood: the operator's last words, the case's jobs and Pods.
# Once per case, however many of its checks fail.
dump() {
  [[ $dumped != "$case_ns" ]] || return 0
  dumped=$case_ns
  {
    echo "--- operator log (last 40 lines)"
    tail -40 "$E2E_OPERATOR_LOG"
    if [[ -n $case_ns ]]; then
      echo "--- kubectl get atj -n $case_ns -o yaml"
      kubectl get atj -n "$case_ns" -o yaml | head -250
      echo "--- kubectl get events -n $case_ns"
      kubectl get events -n "$case_ns" --sort-by=.metadata.creationTimestamp | tail -40
    fi
    echo "--- kubectl get pods -A -l autotune.io/job -o wide"
    kubectl get pods -A -l autotune.io/job -o wide
  } 2>&1 | sed 's/^/    # /'
}

on_check_failure() { dump; }

note() { echo "# $*"; }

# Starts a case in a fresh namespace.
begin_case() {
  case_ns=e2e-$1
  echo
  note "case $1 (namespace $case_ns)"
  kubectl create namespace "$case_ns" >/dev/null
}

# Removes a finished case's namespace in the background; what it held no longer matters.
end_case() { kubectl delete namespace "$case_ns" --wait=false >/dev/null 2>&1 || true; }

# --- waiting -------------------------------------------------------------------------------------

# The command succeeds every time it is tried over $1 seconds: something does not happen.
throughout() {
  local seconds=$1
  shift
  local deadline=$((SECONDS + seconds))
  while ((SECONDS < deadline)); do
    "$@" || return 1
    sleep 0.3
  done
}

not() { ! "$@"; }

# No trial process of this run whose command line holds $1 is left.
no_process_with() { ! pgrep -f -- "$1" >/dev/null; }

# Runs the command every 0.2 s until file $1 is removed, appending what it prints to file $2.
sample_while() {
  local flag=$1 samples=$2
  shift 2
  while [[ -f $flag ]]; do
    "$@" >>"$samples"
    sleep 0.2
  done
}

# Column $1 of the samples in $2, at its largest.
most() { cut -d' ' -f"$1" "$2" | sort -n | tail -1; }

# --- GPU pools ----------------------------------------------------------------------------------

# A pool of one 16-GPU node of GPU model $2 with $3 of memory per GPU, named $1-0, run by a node
# simulator of its own (logging to $work/$1.log) beside the cluster's: stop_gpu_pool removes it.
# More arguments go to the simulator.
start_gpu_pool() {
  local pool=$1 model=$2 memory=$3
  "$E2E_NODE_SIM" --kubeconfig "$E2E_ADMIN_KUBECONFIG" --nodes 1 --gpus-per-node 16 \
    --gpu-memory "$memory" --gpu-product "$model" --name-prefix "$pool" "${@:4}" \
    --work-dir "$work/$pool" --bin-dir "$(dirname "$E2E_TRIAL_SIM")" \
    --delete-nodes-on-exit >>"$work/$pool.log" 2>&1 </dev/null &
  echo $! >"$work/$pool.pid"
  eventually 60 kubectl wait --for=condition=Ready "node/$pool-0" --timeout=1s >/dev/null
}

stop_gpu_pool() {
  kill -TERM "$(cat "$work/$1.pid")" 2>/dev/null || true
  eventually 30 bash -c "! kubectl get node $1-0 >/dev/null 2>&1"
}

# The Pods of the case that node simulator log $1 started, as "pod node" lines.
pods_started() {
  sed -n "s|.*started pod $case_ns/\([^ ]*\) on \([^ ]*\) .*|\1 \2|p" "$1" | sort -u
}

# Every Pod of the case ran on the pool $1's node, and the cluster's own nodes ran none.
ran_on_pool_only() {
  local on_pool elsewhere
  on_pool=$(pods_started "$work/$1.log")
  elsewhere=$(pods_started "$E2E_NODE_SIM_LOG")
  echo "on the pool: ${on_pool:-none}; elsewhere: ${elsewhere:-none}"
  [[ -n $on_pool && -z $elsewhere ]] && ! grep -qv " $1-0\$" <<<"$on_pool"
}

# --- the jobs ------------------------------------------------------------------------------------

# An AutotuneJob of GPT2-large on 16 V100-32GB GPUs per trial, its trials running trial-sim, in the
# case's namespace. Settings as key=value override the defaults below (startup: trial-sim's
# --startup-seconds; command replaces the whole command, args its args; after_tuning is
# spec.afterTuning, none by default; scheduling_timeout is spec.schedulingTimeout, its default
# when empty; nodes is
# spec.resources.nodesPerTrial; log_suffix is appended to the launch log's path; extra_env is one
# more env entry; queue is spec.queueName, a Kueue LocalQueue, none by default; labels is the
# template's metadata.labels, a YAML flow map; image is the trial container's image; claims names
# a ResourceClaimTemplate the trial container takes its GPUs from, as the Pod's claim gpus); YAML flow
# values are written as they go into the manifest. Every trial appends its name to
# launches/<ns>-<name>.log.
job_manifest() {
  local name=$1
  shift
  local strategy=deepspeed stages='[0, 1, 2, 3]' micro=auto gpus=16 parallelism=2 timeout=2m
  local max_failed=10 early=5 max_trials=50 startup=0.5 command='' after_tuning=''
  local args='[--deepspeed, /etc/autotune/ds_config.json]'
  local scheduling_timeout='' nodes=1 log_suffix='' extra_env='' queue='' labels=''
  local gpu_memory=32Gi gpu_models='' claims=''
  local image=ghcr.io/autotune-operator/trial-sim:0.1.0
  local model='{numParameters: 774000000, activationMemoryPerSample: 9600000000}'
  local arg_mappings='{train_micro_batch_size_per_gpu: --per_device_train_batch_size}'
  local setting
  for setting in "$@"; do
    case ${setting%%=*} in
      strategy | stages | micro | gpus | parallelism | timeout | max_failed | early | max_trials | \
        startup | command | args | arg_mappings | model | after_tuning | scheduling_timeout | \
        nodes | log_suffix | extra_env | queue | labels | image | gpu_memory | gpu_models | \
        claims)
          local "$setting"
          ;;
      *)
        echo "job_manifest: unknown setting $setting" >&2
        return 1
        ;;
    esac
  done
  if [[ -z $command ]]; then
    command="[trial-sim, --profile, gpt2-large, --startup-seconds, \"$startup\","
    command+=" --e2e-run, $marker]"
  fi
  cat <<JOB
apiVersion: autotune.io/v1alpha1
kind: AutotuneJob
metadata:
  name: $name
  namespace: $case_ns
spec:
  deepspeedConfig:
    train_micro_batch_size_per_gpu: $micro
    gradient_accumulation_steps: 1
    fp16: {enabled: true}
    zero_optimization: {stage: $stages}
  model: $model
  resources: {gpusPerTrial: $gpus, nodesPerTrial: $nodes${gpu_memory:+, gpuMemory: $gpu_memory}}${gpu_models:+
  gpuModels: $gpu_models}
  search:
    strategy: $strategy
    metric: throughput
    maxTrials: $max_trials
    earlyStopping: $early
    seed: 1
  parallelism: $parallelism
  trialTimeout: $timeout${scheduling_timeout:+
  schedulingTimeout: $scheduling_timeout}
  maxFailedTrials: $max_failed
  argMappings: $arg_mappings${after_tuning:+
  afterTuning: $after_tuning}${queue:+
  queueName: $queue}
  template:${labels:+
    metadata: {labels: $labels\}}
    spec:${claims:+
      resourceClaims: [{name: gpus, resourceClaimTemplateName: $claims\}]}
      containers:
        - name: trainer
          image: $image
          command: $command
          args: $args${claims:+
          resources: {claims: [{name: gpus\}]\}}
          env:
            - {name: AUTOTUNE_SIM_LAUNCH_LOG, value: "$(launch_log "$name")$log_suffix"}${extra_env:+
            - $extra_env}
JOB
}

launch_log() { echo "$work/launches/$case_ns-$1.log"; }

# Creates a job from job_manifest's settings.
create_job() { job_manifest "$@" | kubectl apply -f -; }

field() { kubectl get atj "$1" -n "$case_ns" -o jsonpath="$2"; }

phase_of() { field "$1" '{.status.phase}'; }

terminal() {
  case $(phase_of "$1") in
    Succeeded | Failed) return 0 ;;
    *) return 1 ;;
  esac
}

# The job ends within $3 seconds in phase $2.
ends_in() {
  local job=$1 phase=$2 seconds=$3
  if ! eventually "$seconds" terminal "$job"; then
    echo "still $(phase_of "$job") after ${seconds}s: $(field "$job" '{.status.message}')"
    return 1
  fi
  local actual
  actual=$(phase_of "$job")
  [[ $actual == "$phase" ]] || {
    echo "ended $actual: $(field "$job" '{.status.message}')"
    return 1
  }
}

best_is() {
  local best
  best=$(field "$1" '{.status.best.trial}')
  [[ $best == "$2" ]] || {
    echo "best is '${best}', expected $2"
    return 1
  }
}

# tests/e2e/inspect.py, whose subcommands hold the checks of what kubectl and the audit log say.
inspect() { python3 "$source_dir/tests/e2e/inspect.py" "$@"; }

# Job $1 passes every check of inspect.py job given (the rest: --phase Succeeded, --results 4,
# --outcome t1=OOM, ...; inspect.py job --help lists them). On failure it prints what was not true
# and the status.
job_has() {
  local job=$1
  shift
  kubectl get atj "$job" -n "$case_ns" -o json | inspect job "$@"
}

# The job's Events include every reason given.
events_include() {
  local job=$1 reasons
  shift
  reasons=$(kubectl get events -n "$case_ns" --field-selector "involvedObject.name=$job" \
    -o jsonpath='{range .items[*]}{.reason}{"\n"}{end}')
  local reason
  for reason in "$@"; do
    grep -qx "$reason" <<<"$reasons" || {
      echo "no $reason event; the job has: $(sort -u <<<"$reasons" | tr '\n' ' ')"
      return 1
    }
  done
}

# The job's Events of reason $2 number exactly $3.
events_counted() {
  local count
  count=$(kubectl get events -n "$case_ns" --field-selector "involvedObject.name=$1,reason=$2" \
    -o name | wc -l)
  ((count == $3)) || { echo "$count $2 Events"; return 1; }
}

trial_pods() { kubectl get pods -n "$case_ns" -l "autotune.io/job=$1" -o name; }

no_trial_pods() { [[ -z $(trial_pods "$1") ]]; }

# Trial Pods of the job in phase Running.
running_pods() {
  kubectl get pods -n "$case_ns" -l "autotune.io/job=$1" --field-selector status.phase=Running \
    -o name
}

no_running_pods() { [[ -z $(running_pods "$1") ]]; }

some_running_pod() { [[ -n $(running_pods "$1") ]]; }

two_running() { [[ $(running_pods "$1" | wc -l) -eq 2 ]]; }

# Every trial of job $1 was launched once and recorded; $2 names another launch log than the job's.
launched_once() {
  local job=$1 log=${2:-$(launch_log "$1")}
  [[ -s $log ]] || { echo "nothing in $log"; return 1; }
  local twice
  twice=$(sort "$log" | uniq -d)
  [[ -z $twice ]] || { echo "launched more than once: $twice"; return 1; }
  diff -u --label launched --label recorded <(sort "$log") \
    <(field "$job" '{range .status.results[*]}{.name}{"\n"}{end}' | sort)
}

results_once() { job_has "$1" --recorded-once; }

results_at_least() {
  [[ $(field "$1" '{range .status.results[*]}{.name}{"\n"}{end}' | grep -c .) -ge $2 ]]
}

# At least $2 (default 1) TrialRelaunched Events of the case say $1.
relaunched_because() {
  local said
  said=$(kubectl get events -n "$case_ns" --field-selector reason=TrialRelaunched \
    -o jsonpath='{range .items[*]}{.message}{"\n"}{end}')
  [[ $(grep -c -F -- "$1" <<<"$said") -ge ${2:-1} ]] || { echo "relaunches: $said"; return 1; }
}

# No name of resource $1 (pods, jobs) in the case's namespace was created twice: the API server's
# audit log holds one successful create of each (a relaunch is a new name).
created_once() { inspect created-once "$E2E_AUDIT_LOG" "$case_ns" "$1"; }

# The afterTuning Job's one container: it writes the arguments it was given to file $1.
# shellcheck disable=SC2016  # "$*" is expanded by the container's shell
after_tuning_writing_to() {
  printf '{spec: {backoffLimit: 0, template: {spec: {restartPolicy: Never, containers: [%s]}}}}' \
    "{name: trainer, image: busybox, command: [sh, -c, 'echo \"\$*\" > $1', after-tuning]}"
}

job_complete() {
  [[ $(kubectl get job "$1" -n "$case_ns" \
    -o jsonpath='{.status.conditions[?(@.type=="Complete")].status}') == True ]]
}

# The file holds the best trial's micro-batch as its argument mapping passes it.
ran_with_best() { grep -q -- '--per_device_train_batch_size 3' "$1" || { cat "$1"; return 1; }; }

# --- multi-node trials ---------------------------------------------------------------------------

# The launch log's path holds ${AUTOTUNE_NODE_RANK}, which each Pod expands to its completion
# index; trial-sim's rank 0 writes it, once a trial.
# shellcheck disable=SC2016,SC2034  # expanded by each Pod, not here; read by the tests
rank_log_suffix='.rank${AUTOTUNE_NODE_RANK}'

# Every multi-node trial Pod of the case that the node simulator started ran on a node none of its
# trial's other Pods ran on, and each trial had $1 of them.
ranks_on_distinct_nodes() { inspect ranks-on-distinct-nodes "$E2E_NODE_SIM_LOG" "$case_ns" "$1"; }

# No batch Job or Service of job $1 is left.
no_trial_jobs() {
  [[ -z $(kubectl get jobs,services -n "$case_ns" -l "autotune.io/job=$1" -o name) ]]
}

# --- the operator --------------------------------------------------------------------------------

operator_pid() { cat "$E2E_STATE/operator.pid"; }

# The operator is still process $1.
same_operator() {
  if [[ $(operator_pid) == "$1" ]] && kill -0 "$1" 2>/dev/null; then
    return 0
  fi
  echo "the operator was $1 and is now $(operator_pid)"
  return 1
}

# Kills the operator with SIGKILL and starts it again (it campaigns for the Lease anew).
crash_operator() { e2e_stop_operator KILL && e2e_start_operator; }

# The sum of the operator's series whose name and labels begin with $1, from /metrics on the port
# its last start logged.
operator_metric() {
  local port
  port=$(grep '"msg":"starting"' "$E2E_OPERATOR_LOG" | tail -1 |
    sed -n 's/.*"metricsPort":\([0-9]*\).*/\1/p')
  [[ -n $port ]] || { echo "the operator logged no metrics port"; return 1; }
  e2e_scrape "$port" |
    awk -v prefix="$1" 'index($0, prefix) == 1 { sum += $NF } END { print sum + 0 }'
}

reconcile_exceptions() { operator_metric 'autotune_reconcile_total{result="exception"}'; }

# No reconcile threw since the count was $1.
no_new_exceptions() {
  local now
  now=$(reconcile_exceptions) || { echo "$now"; return 1; }
  [[ -n $1 && $now == "$1" ]] || {
    echo "reconcile_total{result=\"exception\"} was ${1:-unread} and is now ${now:-unread}"
    return 1
  }
}

# The operator's series $1 for job $2 of the case, summed over its other labels, or only those
# with label $3 (such as reason="lost").
job_metric() {
  operator_metric "$1{autotunejob=\"$2\",namespace=\"$case_ns\"${3:+,$3}"
}

# That sum is at least $3 ($4: the one label, as in job_metric).
job_counted() {
  local now
  now=$(job_metric "$1" "$2" "${4:-}") || return 1
  ((now >= $3)) || { echo "$1 for $2${4:+ with $4} is $now, less than $3"; return 1; }
}

job_not_counted() {
  local now
  now=$(job_metric "$1" "$2") || return 1
  ((now == 0)) || { echo "$1 for $2 is $now"; return 1; }
}

# --- the cases every run ends with ---------------------------------------------------------------

# The operator's requests as the API server's audit log recorded them over the whole run, against
# the rules the chart grants: none refused, and no verb granted that the operator never used.
read_rbac() { kubectl get -f "$E2E_STATE/rbac/rbac.yaml" -o json >"$1"; }

case_rights_used() {
  echo
  note "case rights_used: the chart's RBAC against the operator's requests in the audit log"
  local rules=$work/rbac.json
  check "the chart's Roles and ClusterRoles are read back" read_rbac "$rules" || return 0
  expect "every granted verb was used, and no request was refused" rights_used "$rules"
}

# tests/e2e/rights_used.py on the run's audit log and the rules in file $1, excusing the grants
# of exercised_elsewhere; what it says (each right used, with its count) is kept in
# rights-used.txt.
rights_used() {
  python3 "$source_dir/tests/e2e/rights_used.py" "$1" "$(operator_user)" "$E2E_AUDIT_LOG" \
    --elsewhere "${exercised_elsewhere[@]}" | tee "$work/rights-used.txt"
}

operator_user() { echo "system:serviceaccount:$e2e_operator_namespace:$E2E_OPERATOR_ACCOUNT"; }

# Where AUTOTUNE_E2E_AUDIT_DIR names a folder, the run's audit log, the chart's rules and the
# operator's user name are kept there as $1.audit.log, $1.rbac.json and $1.user, for a test that
# holds the rules to what the runs of several clusters used together (rights_used_test.sh).
keep_audit_log() {
  [[ -n ${AUTOTUNE_E2E_AUDIT_DIR:-} ]] || return 0
  require "the audit log and the chart's rules are kept in $AUTOTUNE_E2E_AUDIT_DIR" \
    keep_audit_files "$AUTOTUNE_E2E_AUDIT_DIR/$1"
}

# What an earlier run kept as $1 goes first: a run that ends before keep_audit_log must leave
# nothing that rights_used_test.sh would read as its own.
forget_audit_log() {
  [[ -n ${AUTOTUNE_E2E_AUDIT_DIR:-} ]] || return 0
  rm -f "$AUTOTUNE_E2E_AUDIT_DIR/$1".{audit.log,rbac.json,user}
}

keep_audit_files() {
  mkdir -p "$(dirname "$1")" && cp "$E2E_AUDIT_LOG" "$1.audit.log" && read_rbac "$1.rbac.json" &&
    operator_user >"$1.user"
}

# The operator's bearer token and every private key of the control plane, if any log of the run
# (the operator's, the node simulator's, the control plane's, the trials') holds them.
secrets_logged() {
  local token
  token=$(kubectl --kubeconfig "$E2E_OPERATOR_KUBECONFIG" config view --raw \
    -o jsonpath='{.users[0].user.token}')
  [[ ${#token} -gt 100 ]] || { echo "no token in $E2E_OPERATOR_KUBECONFIG"; return 1; }
  local logs
  mapfile -t logs < <(find "$work" -type f \( -name '*.log' -o -path '*/node-sim/*' \))
  echo "${#logs[@]} logs searched"
  ! grep -l -F -e "$token" -e "PRIVATE KEY" "${logs[@]}"
}

case_no_secrets_in_logs() {
  echo
  note "case no_secrets_in_logs"
  expect "no log of the run holds the operator's token or a private key" secrets_logged
}

# --- the run -------------------------------------------------------------------------------------

e2e_test_up() {
  mkdir -p "$work/launches"
  e2e_init "$work"
  local flags=() kueue='' kueue_flag=''
  if [[ $with_kueue == true ]]; then
    flags=(--with-kueue) kueue=' Kueue,' kueue_flag=' --kueue'
  fi
  if ! e2e_up "${flags[@]}"; then
    echo "not ok - the environment comes up (control plane, CRD,$kueue RBAC, nodes, operator)"
    tail -20 "$E2E_OPERATOR_LOG" 2>/dev/null | sed 's/^/    /'
    exit 1
  fi
  echo "ok - the environment comes up (control plane, CRD,$kueue RBAC, 2 nodes × 16 GPUs," \
    "operator$kueue_flag)"
}

run_cases() {
  local name
  for name in "$@"; do
    timed_case "$name"
  done
}

e2e_test_end() {
  echo
  if ((failures > 0)); then
    echo "$test_name: $failures check(s) failed"
    exit 1
  fi
  echo "$test_name: every check passed"
}

# Runs the cases of a group (names joined by +) side by side, each in a subshell whose output is
# printed, whole, once all have ended; their failed checks add to this shell's. A case alone runs
# here. Each says how long it took.
run_group() {
  local group=$1 names name pids=() i
  IFS=+ read -ra names <<<"$group"
  if ((${#names[@]} == 1)); then
    timed_case "$group"
    return
  fi
  mkdir -p "$work/cases"
  for name in "${names[@]}"; do
    case_apart "$name" >"$work/cases/$name.out" 2>&1 &
    pids+=($!)
  done
  for i in "${!names[@]}"; do
    name=${names[i]}
    wait "${pids[i]}" || true
    cat "$work/cases/$name.out"
    if [[ -f $work/cases/$name.failures ]]; then
      failures=$((failures + $(cat "$work/cases/$name.failures")))
    else
      echo "not ok - case $name ran to its end"
      failures=$((failures + 1))
    fi
  done
}

# Case $1 with a count of failed checks of its own, left in cases/$1.failures: run in the
# background, in a subshell.
case_apart() {
  failures=0
  timed_case "$1"
  echo "$failures" >"$work/cases/$1.failures"
}

timed_case() {
  local started=$SECONDS
  "case_$1"
  note "case $1 took $((SECONDS - started))s"
}
