#!/usr/bin/env bash
# Never paying twice for a measurement, against the real API server: the environment of
# e2e_test.sh (a control plane, simulated GPU nodes, the operator with the chart's RBAC) on a
# control plane of its own. Every trial that finishes on a node is kept in the job's namespace, under
# the SHA-256 of its identity, in a ConfigMap autotune-m-... that holds the measurements one
# reconcile recorded; a later job looks each trial up there before launching it and takes a hit as
# its result (reusedFrom: that ConfigMap), launching no Pod for it.
#
# Cases, each in namespaces of its own:
#   rerun         a job runs to the published best and is deleted; its measurements stay, each
#                 named for its identity; the same manifest applied again Succeeds at the same best
#                 with every result reused: no trial launched (status, launch log, audit log), no
#                 GPU-hour used and the first run's saved (status, SAVED column, metrics), each
#                 reused trial named in a TrialReused Event
#   widened       a job over ZeRO stages 0-3 after one over stages 0-1: it launches exactly the
#                 trials the first did not measure, and reuses every one it did
#   isolation     the same manifest in another namespace, and in the measured namespace with
#                 another image tag or with 8 GPUs a trial: each reuses nothing and runs its trials
#   disabled      spec.reuse Disabled launches every trial again, and its measurements are kept
#                 beside the first's, which stay as they were
#   bad_cache     measurements of a job of one trial at a time, one to a ConfigMap, edited by hand
#                 (result.json not JSON, or forged far better than measured; the label at another
#                 version; identity.json of another trial) are ignored with a Warning Event naming
#                 each: their trials alone run again, the job ends at the same best, and those no
#                 longer sealed are left as edited
#   not_ours      a measurement ConfigMap whose label was removed, and one grown to 1 MiB (it
#                 bears no seal), are left alone; their trials run again and are kept anew
#   bounded       last, with the operator restarted with --measurements-per-namespace 2: a job's
#                 three trials that end while the operator is stopped are kept in one ConfigMap,
#                 made in one request (audit log); a job of three trials one at a time after it
#                 leaves its two newest, having deleted the ConfigMaps before them (audit log),
#                 and a tenant's unsealed ConfigMap with the label is neither counted nor deleted
#   node_product  the nodes' nvidia.com/gpu.product changed between runs: nothing reused; nodes of
#                 two products: nothing looked up; the product back: everything reused
#   operator      the operator never restarted and no reconcile threw; none of its requests was
#                 refused; a scrape of its metrics passes promtool check metrics
#   recreated     a job deleted and created again under its name with spec.reuse Disabled runs
#                 every trial again: the Pods of the job before it, deleted, hold no names
# Cases joined by + run side by side (each in a subshell, its output printed once it ends);
# node_product changes the labels of every node, so it runs alone.
#
# Usage: reuse_test.sh OPERATOR NODE_SIM TRIAL_SIM SOURCE_DIR
# AUTOTUNE_E2E_KEEP=1 keeps the work folder; AUTOTUNE_E2E_REUSE_CASES (as the default list below,
# e.g. "rerun+widened operator") runs only those.
set -euo pipefail

if (($# != 4)); then
  echo "usage: $0 OPERATOR NODE_SIM TRIAL_SIM SOURCE_DIR" >&2
  exit 2
fi
export AUTOTUNE_OPERATOR=$1 AUTOTUNE_NODE_SIM=$2 AUTOTUNE_TRIAL_SIM=$3
source_dir=$(cd "$4" && pwd)
# shellcheck source=tests/e2e/support.sh
source "$source_dir/tests/e2e/support.sh"

e2e_test_start autotune-e2e-reuse

measurement_label=autotune.io/measurement
product_label=nvidia.com/gpu.product
# What autotune-node-sim labels its nodes with.
simulated_product=Simulated-GPU
# Trials of a second or more: every trial's durationSeconds, and so its GPU-hours, is above 0.
published=(startup=1)
# Three trials of ZeRO stage 1, micro-batches 1 to 3, all of which fit.
small=(strategy=grid stages='[1]' micro='[1, 2, 3]' early=0 startup=1)
# The same, one trial at a time: each recorded on its own, and so kept in a ConfigMap of its own.
small_one_by_one=("${small[@]}" parallelism=1)
# Six trials of ZeRO stages 1 and 2, micro-batches 1 to 3, one at a time.
six_one_by_one=(strategy=grid stages='[1, 2]' micro='[1, 2, 3]' early=0 startup=1 parallelism=1)

# --- the jobs ------------------------------------------------------------------------------------

# Runs the command with case_ns set to $1, so that the job helpers look there.
in_namespace() {
  local case_ns=$1
  shift
  "$@"
}

# Creates job $1 from job_manifest's settings (the rest), its manifest edited by sed script $2.
create_edited() {
  local name=$1 script=$2
  shift 2
  job_manifest "$name" "$@" | sed "$script" | kubectl apply -f -
}

with_reuse_disabled='s/^spec:$/spec:\n  reuse: Disabled/'
with_image_tag='s|image: ghcr.io/autotune-operator/trial-sim:0.1.0$|image: registry.example/other-trainer:2|'

# Job $1 Succeeds within $2 seconds at the published best.
succeeds_at_best() { ends_in "$1" Succeeded "$2" && best_is "$1" "$published_best"; }

# Job $1 measured every trial itself: none reused, each launched (its launch log) and recorded.
reused_nothing() {
  job_has "$1" --equals trials.reused=0 --counts-results trials.launched --results-at-least 1 \
    --none-reused && launched_once "$1"
}

# The trials in job $1's launch log, sorted, on one line.
launched_trials() { sort "$(launch_log "$1")" 2>/dev/null | tr '\n' ' '; }

# Job $1's trials in launch log and status: those launched are the names given (the rest of the
# arguments) and no other, and each of its other results is reused.
launched_exactly() {
  local job=$1 expected actual
  shift
  expected=$(printf '%s\n' "$@" | sort | tr '\n' ' ')
  actual=$(launched_trials "$job")
  [[ $actual == "$expected" ]] || { echo "launched: $actual; expected: $expected"; return 1; }
  job_has "$job" --fresh "$@" --equals "trials.launched=$#" --reused-counted
}

# Job $1 has more results than the names given, and they are some: it needed trials of its own
# and others too.
some_but_not_all() {
  local job=$1
  shift
  (($# > 0)) || { echo "no name given"; return 1; }
  job_has "$job" --results-more-than "$#"
}

# The uid of job $1.
uid_of() { field "$1" '{.metadata.uid}'; }

# "TYPE MESSAGE" of each Event of reason $2 about job $1 (this job, by its uid), one a line.
event_lines() {
  local uid
  uid=$(uid_of "$1") || return 1
  kubectl get events -n "$case_ns" --field-selector "involvedObject.uid=$uid,reason=$2" \
    -o jsonpath='{range .items[*]}{.type} {.message}{"\n"}{end}'
}

# Some Event of reason $2 about job $1 is a Warning whose message holds every text given.
warned_with() {
  local job=$1 reason=$2 lines
  shift 2
  lines=$(event_lines "$job" "$reason") || return 1
  inspect warning "$@" <<<"$lines"
}

# The TrialReused Events about job $1 name each reused result of its status with the ConfigMap it
# came from, and no other trial.
reuse_events_match() {
  local lines
  lines=$(event_lines "$1" TrialReused) || return 1
  kubectl get atj "$1" -n "$case_ns" -o json | inspect reuse-events "$lines"
}

# No TrialLaunched Event about job $1 (this job, by its uid).
no_launch_events() { [[ -z $(event_lines "$1" TrialLaunched) ]]; }

# --- the measurements ----------------------------------------------------------------------------

# The case's measurement ConfigMaps (labelled autotune.io/measurement, whatever its value) as
# kubectl lists them, into file $1.
save_kept() { kubectl get configmaps -n "$case_ns" -l "$measurement_label" -o json >"$1"; }

# The key that seals the operator's measurements, as its Secret holds it (base64 text).
seal_key() {
  kubectl get secret "$e2e_measurement_key" -n "$e2e_operator_namespace" -o jsonpath='{.data.key}'
}

# What the operator reads of measurement ConfigMaps (tests/e2e/measurements_of.cpp), built beside
# the operator.
measurements_of() { "$(dirname "$AUTOTUNE_OPERATOR")/measurements_of" "$@"; }

# The case's measurement ConfigMaps and jobs pass every check of inspect.py kept given (--count 3,
# --all-sound, --measured JOB TRIAL..., ...; inspect.py kept --help lists them), with what the
# operator reads of each ConfigMap (its seal, identity hash and environment label) from
# measurements_of; --before FILE names the ConfigMaps as save_kept left them earlier, for
# --unchanged and --all-unchanged. On failure it prints what was not true and the ConfigMaps.
kept_has() {
  local now jobs facts
  now=$(mktemp -p "$work") jobs=$(mktemp -p "$work") facts=$(mktemp -p "$work")
  save_kept "$now" && kubectl get atj -n "$case_ns" -o json >"$jobs" || return 1
  measurements_of "$(seal_key)" <"$now" >"$facts" || return 1
  inspect kept --namespace "$case_ns" --configmaps "$now" --jobs "$jobs" --facts "$facts" "$@"
}

# --- the audit log -------------------------------------------------------------------------------

now_micro() { date -u +%Y-%m-%dT%H:%M:%S.%6NZ; }

# The Pods the operator created in the case's namespace (successful creates in the audit log),
# sorted, one a line: those whose name begins with $1, received at or after time $2 (now_micro's
# format, as the audit log's) if given.
pods_created() { inspect pods-created "$E2E_AUDIT_LOG" "$case_ns" "$1" "${2:-}"; }

# The Pods the operator created for job $1 (audit log entries from time $2 on, all if empty) are
# one for each trial of its status that it did not reuse, named after the job and the trial (_ as
# -), and no other.
pods_match_launches() {
  local job=$1 since=$2 created expected
  created=$(pods_created "$job-" "$since" | tr '\n' ' ')
  expected=$(field "$job" '{range .status.results[*]}{.name} {.reusedFrom}{"\n"}{end}' |
    awk -v job="$job" 'NF == 1 { gsub("_", "-"); print job "-" $1 }' | sort | tr '\n' ' ')
  echo "created: ${created:-none}"
  [[ $created == "$expected" ]] || { echo "expected: ${expected:-none}"; return 1; }
}

# The operator created no Pod in the case's namespace from time $1 on (the audit log).
no_pods_created_since() {
  local created
  created=$(pods_created '' "$1")
  [[ -z $created ]] || { echo "created: $created"; return 1; }
}

# No request of the operator in the audit log was refused (403).
nothing_refused() { inspect nothing-refused "$E2E_AUDIT_LOG"; }

# --- metrics and columns -------------------------------------------------------------------------

# The operator's series $1 for job $2 of the case, summed, is $3 (within 0.5).
metric_is() {
  local now
  now=$(job_metric "$1" "$2") || { echo "$now"; return 1; }
  inspect within "$now" "$3" 0.5 || { echo "$1 for $2 is $now, not $3"; return 1; }
}

# `kubectl get atj -o wide` shows job $1 with GPU-HOURS $2 and SAVED $3.
wide_columns() {
  local table
  table=$(kubectl get atj "$1" -n "$case_ns" -o wide) || return 1
  echo "$table"
  inspect wide-columns "$2" "$3" <<<"$table"
}

# Job $1 wrote its output ConfigMap (OutputWritten), holding the published best's config.
output_is_best() {
  job_has "$1" --condition OutputWritten=True &&
    kubectl get configmap "$1-optimal" -n "$case_ns" -o jsonpath='{.data.ds_config\.json}' |
    inspect ds-config --micro-batch 3 --zero-stage 1
}

# --- the cases -----------------------------------------------------------------------------------

# GPT2-large to the published best; deleted, then the same manifest applied again.
case_rerun() {
  begin_case rerun
  local job=gpt2-large manifest=$work/rerun.yaml first=$work/rerun-first.json
  local trials used gpu_seconds since
  job_manifest "$job" "${published[@]}" >"$manifest"
  check "the job is applied" kubectl apply -f "$manifest" || return 0
  check "it Succeeds at $published_best within 180s" succeeds_at_best "$job" 180 || return 0
  kubectl get atj "$job" -n "$case_ns" -o json >"$first"
  trials=$(field "$job" '{.status.trials.launched}')
  used=$(field "$job" '{.status.gpuHours.used}')
  expect "it launched each trial once ($trials), used GPU-hours ($used)" job_has "$job" \
    --equals trials.reused=0 --counts-results trials.launched --above gpuHours.used=0 \
    --equals gpuHours.saved=0
  expect "the audit log: the operator created a Pod for each of its trials" \
    pods_match_launches "$job" ''
  expect "a sound measurement for each of its results, under its identity's name" \
    kept_has --measured-results "$job" --trials-are-results-of "$job" --all-sound \
      --outcomes-kept "$job"
  gpu_seconds=$(python3 -c 'import sys; print(round(float(sys.argv[1]) * 3600, 4))' "$used")
  expect "autotune_trial_gpu_seconds_total for it is its GPU-hours in seconds ($gpu_seconds)" \
    eventually 10 metric_is autotune_trial_gpu_seconds_total "$job" "$gpu_seconds"
  gpu_seconds=$(job_metric autotune_trial_gpu_seconds_total "$job")
  # In the foreground: gone once what it owns is (its output ConfigMap), as a new job needs.
  check "the job is deleted, and gone" eval "kubectl delete atj $job -n $case_ns \
    --cascade=foreground --timeout=60s && ! kubectl get atj $job -n $case_ns" || return 0
  expect "its measurements stay" kept_has --count "$trials"
  since=$(now_micro)
  check "the same manifest is applied again" kubectl apply -f "$manifest" || return 0
  check "it Succeeds at $published_best within 180s" succeeds_at_best "$job" 180 || return 0
  expect "it launched nothing and reused every one of the first run's $trials results" \
    job_has "$job" --equals trials.launched=0 --equals "trials.reused=$trials" \
      --results "$trials" --reused-from-prefix autotune-m-
  expect "its results are the first run's: names, outcomes, values, durations" \
    job_has "$job" --same-results-as "$first"
  expect "each came from the ConfigMap that holds the first run's measurement of its trial" kept_has \
    --reused-from-kept "$job"
  expect "gpuHours: used 0, saved the first run's $used" job_has "$job" \
    --equals gpuHours.used=0 --all-zero gpuHours.usedByOutcome --near "gpuHours.saved=$used"
  expect "kubectl get atj -o wide: GPU-HOURS 0, SAVED $used" wide_columns "$job" 0 "$used"
  expect "it wrote its output ConfigMap: ZeRO stage 1, micro-batch 3" output_is_best "$job"
  expect "no trial ran again (launch log)" test "$(wc -l <"$(launch_log "$job")")" -eq "$trials"
  expect "the audit log: no Pod created in the namespace since the re-apply" \
    no_pods_created_since "$since"
  expect "a TrialReused Event names each reused trial with its ConfigMap" reuse_events_match "$job"
  expect "no TrialLaunched Event about it" no_launch_events "$job"
  expect "autotune_trials_reused_total for it is $trials" eventually 10 \
    metric_is autotune_trials_reused_total "$job" "$trials"
  expect "autotune_reused_gpu_seconds_total for it is the first run's GPU-seconds ($gpu_seconds)" \
    metric_is autotune_reused_gpu_seconds_total "$job" "$gpu_seconds"
  expect "autotune_trial_gpu_seconds_total for it is 0" \
    metric_is autotune_trial_gpu_seconds_total "$job" 0
  expect "a scrape of /metrics with these counters passes promtool check metrics" \
    scrape_checks "$work/rerun-scrape.txt" autotune_trials_reused_total \
    autotune_reused_gpu_seconds_total
  end_case
}

# Over ZeRO stages 0 and 1, then over stages 0 to 3 in the same namespace.
case_widened() {
  begin_case widened
  local narrow=narrow wide=wide since fresh
  check "job narrow over ZeRO stages [0, 1] is created" \
    create_job "$narrow" "${published[@]}" stages='[0, 1]' || return 0
  check "it Succeeds at $published_best within 180s" succeeds_at_best "$narrow" 180 || return 0
  since=$(now_micro)
  check "job wide over stages [0, 1, 2, 3] is created once it ended" \
    create_job "$wide" "${published[@]}" || return 0
  check "it Succeeds at $published_best within 180s" succeeds_at_best "$wide" 180 || return 0
  # Its trials less those narrow measured.
  fresh=$(kubectl get atj -n "$case_ns" -o json | inspect new-trials "$narrow" "$wide")
  # shellcheck disable=SC2086  # a list of names
  expect "it needed trials narrow measured, and others: ${fresh:-none}" \
    some_but_not_all "$wide" $fresh
  # shellcheck disable=SC2086  # a list of names
  expect "it launched exactly those (launch log, status), reusing the rest" \
    launched_exactly "$wide" $fresh
  expect "the audit log: the operator created their Pods alone" \
    pods_match_launches "$wide" "$since"
  expect "each result of a trial narrow measured came from narrow's ConfigMap, of equal value" \
    kept_has --reused-where-measured "$wide=$narrow"
  expect "a TrialReused Event names each reused trial with its ConfigMap" reuse_events_match "$wide"
  # shellcheck disable=SC2086  # a list of names
  expect "its fresh trials were kept too: one sound measurement for each trial of the two" \
    kept_has --one-per-trial "$narrow" "$wide" --all-sound --measured "$wide" $fresh
  end_case
}

# Three trials measured in the namespace; then the same manifest in another namespace, and in this
# one with another image tag, or 8 GPUs a trial (which gives each trial its own train_batch_size
# too), all at once.
case_isolation() {
  begin_case isolation
  local other=$case_ns-other job
  check "a job of three trials is created" create_job first "${small[@]}" || return 0
  check "it Succeeds within 180s" ends_in first Succeeded 180 || return 0
  check "namespace $other is created" kubectl create namespace "$other" || return 0
  expect "the same manifest is created in $other" \
    in_namespace "$other" create_job first "${small[@]}"
  expect "job new-image, with image registry.example/other-trainer:2, is created" \
    create_edited new-image "$with_image_tag" "${small[@]}"
  expect "job eight-gpus, with gpusPerTrial 8, is created" \
    create_job eight-gpus "${small[@]}" gpus=8
  expect "first in $other Succeeds within 180s" in_namespace "$other" ends_in first Succeeded 180
  expect "in $other it reused nothing and ran every trial" \
    in_namespace "$other" reused_nothing first
  expect "the audit log: the operator created a Pod for each of its trials in $other" \
    in_namespace "$other" pods_match_launches first ''
  for job in new-image eight-gpus; do
    expect "$job Succeeds within 180s" ends_in "$job" Succeeded 180
    expect "$job reused nothing and ran every trial" reused_nothing "$job"
    expect "the audit log: the operator created a Pod for each trial of $job" \
      pods_match_launches "$job" ''
  done
  expect "each job kept its own measurements: image and gpusPerTrial in their identities" \
    kept_has --count-is-results first new-image eight-gpus --all-sound \
    --identity new-image container.image=registry.example/other-trainer:2 \
    --identity eight-gpus gpusPerTrial=8
  in_namespace "$other" end_case
  end_case
}

# Three trials measured; the same manifest with spec.reuse Disabled.
case_disabled() {
  begin_case disabled
  local before=$work/disabled-before.json
  check "a job of three trials is created" create_job first "${small[@]}" || return 0
  check "it Succeeds within 180s" ends_in first Succeeded 180 || return 0
  check "its 3 measurements are read" save_kept "$before" || return 0
  check "job again, with spec.reuse Disabled, is created" \
    create_edited again "$with_reuse_disabled" "${small[@]}" || return 0
  check "it Succeeds within 180s" ends_in again Succeeded 180 || return 0
  expect "it reads spec.reuse Disabled back" test "$(field again '{.spec.reuse}')" = Disabled
  expect "it reused nothing and launched all 3 trials again" reused_nothing again
  expect "no TrialReused Event about it" test -z "$(event_lines again TrialReused)"
  expect "its measurements are kept beside the first's, which are as they were" \
    kept_has --before "$before" --count 6 --all-unchanged --all-sound --measured-results again \
      --measured-afresh again=first
  end_case
}

# Measurement $1's data key $2 set to $3.
set_data() {
  local patch
  patch=$(python3 -c 'import json, sys; print(json.dumps({"data": {sys.argv[1]: sys.argv[2]}}))' \
    "$2" "$3")
  kubectl patch configmap "$1" -n "$case_ns" --type=merge -p "$patch"
}

data_of() {
  kubectl get configmap "$1" -n "$case_ns" -o go-template="{{index .data \"$2\"}}"
}

# The data key of measurement ConfigMap $1 (of one measurement) that ends in $2.
key_of() { kubectl get configmap "$1" -n "$case_ns" -o json | inspect measurement-keys "$2"; }

# The trial measurement ConfigMap $1 (of one measurement) holds.
trial_of() { kubectl get configmap "$1" -n "$case_ns" -o json | inspect measurement-keys --trials; }

# Six trials measured one at a time, each kept in a ConfigMap of its own; four measurements edited
# as anyone who may write ConfigMaps in the namespace could: a result that is not JSON, a forged
# result far better than any measured (throughput 9000), the label at another version, the identity
# of another trial. Then the same manifest.
case_bad_cache() {
  begin_case bad-cache
  local kept name spoilt=() trials=() pid before=$work/bad-cache-before.json forged best
  pid=$(operator_pid)
  check "a search of six trials, one at a time, is created" \
    create_job first "${six_one_by_one[@]}" || return 0
  check "it Succeeds within 180s" ends_in first Succeeded 180 || return 0
  best=$(field first '{.status.best.trial}')
  mapfile -t kept < <(kubectl get configmaps -n "$case_ns" -l "$measurement_label" \
    -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort)
  check "it kept 6 measurements, one to a ConfigMap" kept_has --count 6 &&
    check "in 6 ConfigMaps" test "${#kept[@]}" -eq 6 || return 0
  spoilt=("${kept[@]:0:4}")
  for name in "${spoilt[@]}"; do
    trials+=("$(trial_of "$name")")
  done
  forged='{"name": "'"${trials[1]}"'", "space": "z1", "outcome": "Succeeded", "value": 9000,
    "metrics": {"throughput": 9000}, "startTime": "2026-01-01T00:00:00Z", "durationSeconds": 1}'
  check "${kept[0]}: its result.json is made not JSON" \
    set_data "${kept[0]}" "$(key_of "${kept[0]}" result.json)" 'not {json' &&
    check "${kept[1]}: its result.json is forged: Succeeded at throughput 9000" \
      set_data "${kept[1]}" "$(key_of "${kept[1]}" result.json)" "$forged" &&
    check "${kept[2]}: its label is made $measurement_label=v0" \
      kubectl label --overwrite configmap "${kept[2]}" -n "$case_ns" "$measurement_label=v0" &&
    check "${kept[3]}: its identity.json is made that of ${kept[4]}" \
      set_data "${kept[3]}" "$(key_of "${kept[3]}" identity.json)" \
        "$(data_of "${kept[4]}" "$(key_of "${kept[4]}" identity.json)")" &&
    check "the edited measurements are saved" save_kept "$before" || return 0
  check "the same manifest is created as job again" \
    create_job again "${six_one_by_one[@]}" || return 0
  check "it Succeeds within 180s at first's best, $best, not at the forged 9000" eval \
    'ends_in again Succeeded 180 && best_is again "$best"' || return 0
  expect "it launched exactly the 4 trials of the spoilt measurements, reusing the 2 others" \
    launched_exactly again "${trials[@]}"
  expect "a MeasurementIgnored Warning: ${kept[0]}, edited, bears no seal" warned_with again \
    MeasurementIgnored "ConfigMap ${kept[0]} (trial ${trials[0]})" "bears no seal"
  expect "a MeasurementIgnored Warning: ${kept[1]}, forged, bears no seal" warned_with again \
    MeasurementIgnored "ConfigMap ${kept[1]} (trial ${trials[1]})" "bears no seal"
  expect "a MeasurementIgnored Warning: ${kept[2]}, label v0" warned_with again \
    MeasurementIgnored "ConfigMap ${kept[2]} (trial ${trials[2]})" "\"v0\", not v3"
  expect "a MeasurementIgnored Warning: ${kept[3]}, another identity, bears no seal" warned_with \
    again MeasurementIgnored "ConfigMap ${kept[3]} (trial ${trials[3]})" "bears no seal"
  expect "exactly 4 MeasurementIgnored Events about it" \
    test "$(event_lines again MeasurementIgnored | wc -l)" -eq 4
  expect "the spoilt are as they were edited, the others sound; again kept its 4 anew" \
    kept_has --before "$before" --count 10 --all-unchanged \
      --unsealed "${kept[0]}" "${kept[1]}" "${kept[3]}" --sound "${kept[4]}" "${kept[5]}" \
      --measured again "${trials[@]}" --sound-by again
  expect "the operator is still process $pid" same_operator "$pid"
  end_case
}

# Three trials measured one at a time; one measurement's label removed (it is someone else's
# ConfigMap now), another grown to 1 MiB; the same manifest again.
case_not_ours() {
  begin_case not-ours
  local kept foreign huge good foreign_rv pid patch=$work/huge-patch.json
  pid=$(operator_pid)
  check "a job of three trials, one at a time, is created" \
    create_job first "${small_one_by_one[@]}" || return 0
  check "it Succeeds within 180s" ends_in first Succeeded 180 || return 0
  mapfile -t kept < <(kubectl get configmaps -n "$case_ns" -l "$measurement_label" \
    -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort)
  check "it kept 3 measurements, one to a ConfigMap" test "${#kept[@]}" -eq 3 || return 0
  foreign=${kept[0]} huge=${kept[1]} good=${kept[2]}
  python3 -c 'import json, sys; json.dump({"data": {sys.argv[1]: "x" * 1000000}}, sys.stdout)' \
    "$(key_of "$huge" result.json)" >"$patch"
  local foreign_trial huge_trial
  foreign_trial=$(trial_of "$foreign") huge_trial=$(trial_of "$huge")
  check "$foreign loses its label $measurement_label" \
    kubectl label configmap "$foreign" -n "$case_ns" "$measurement_label-" &&
    check "$huge: its result.json is made 1,000,000 bytes of x" \
      kubectl patch configmap "$huge" -n "$case_ns" --type=merge --patch-file "$patch" || return 0
  foreign_rv=$(kubectl get configmap "$foreign" -n "$case_ns" \
    -o jsonpath='{.metadata.resourceVersion}')
  check "the same manifest is created as job again" \
    create_job again "${small_one_by_one[@]}" || return 0
  check "it Succeeds within 180s" ends_in again Succeeded 180 || return 0
  expect "it launched the trials of $foreign and $huge, reusing that of $good" \
    launched_exactly again "$foreign_trial" "$huge_trial"
  expect "$foreign is as it was: the same resourceVersion, no measurement label" test \
    "$(kubectl get configmap "$foreign" -n "$case_ns" \
      -o jsonpath='{.metadata.resourceVersion} {.metadata.labels.autotune\.io/measurement}')" \
    = "$foreign_rv "
  expect "a MeasurementIgnored Warning names $huge" warned_with again MeasurementIgnored \
    "ConfigMap $huge (trial $huge_trial)" "bears no seal"
  expect "$huge is left alone, as edited; again kept the two trials it ran anew" kept_has \
    --unsealed "$huge" --larger-than "$huge=1000000" --sound "$good" \
    --measured again "$foreign_trial" "$huge_trial" --sound-by again
  expect "the operator is still process $pid" same_operator "$pid"
  end_case
}

# Three trials measured; the job deleted, and created again under its name with spec.reuse
# Disabled, as one measures again after a driver update.
case_recreated() {
  begin_case recreated
  check "a job of three trials is created" create_job first "${small[@]}" || return 0
  check "it Succeeds within 180s" ends_in first Succeeded 180 || return 0
  check "the job is deleted, and gone" eval "kubectl delete atj first -n $case_ns \
    --cascade=foreground --timeout=60s && ! kubectl get atj first -n $case_ns" || return 0
  check "it is created again, with spec.reuse Disabled" \
    create_edited first "$with_reuse_disabled" "${small[@]}" || return 0
  check "it Succeeds within 60s" ends_in first Succeeded 60 || return 0
  expect "it ran every trial again" job_has first \
    --counts-results trials.launched --results 3 --equals trials.failed=0 --equals trials.reused=0
  end_case
}

# Every simulated node's nvidia.com/gpu.product set to $1, or only node $2's if given.
label_product() {
  if [[ -n ${2:-} ]]; then
    kubectl label --overwrite node "$2" "$product_label=$1" >/dev/null
  else
    kubectl label --overwrite nodes -l autotune.io/node-sim=true "$product_label=$1" >/dev/null
  fi
}

# Three trials measured on nodes of product Simulated-GPU; then the same manifest on nodes
# relabelled Other-GPU, on nodes of the two products, and on Simulated-GPU nodes again.
case_node_product() {
  begin_case node-product
  local node
  node=$(kubectl get nodes -l autotune.io/node-sim=true -o jsonpath='{.items[0].metadata.name}')
  check "a job of three trials is created" create_job first "${small[@]}" || return 0
  check "it Succeeds within 90s" ends_in first Succeeded 90 || return 0
  check "every node is labelled $product_label=Other-GPU" label_product Other-GPU || return 0
  check "the same manifest is created as job relabelled" create_job relabelled "${small[@]}" &&
    check "it Succeeds within 90s" ends_in relabelled Succeeded 90 || return 0
  expect "it reused nothing and ran every trial" reused_nothing relabelled
  expect "its measurements name GPU Other-GPU, the first's $simulated_product" kept_has \
    --count 6 --all-sound --identity relabelled gpu.product=Other-GPU \
    --identity first "gpu.product=$simulated_product"
  check "node $node is labelled $product_label=$simulated_product again, the other not" \
    label_product "$simulated_product" "$node" || return 0
  check "the same manifest is created as job mixed" create_job mixed "${small[@]}" &&
    check "it Succeeds within 90s" ends_in mixed Succeeded 90 || return 0
  expect "it looked nothing up: measured for both products, it ran every trial" reused_nothing mixed
  check "every node is labelled $product_label=$simulated_product again" \
    label_product "$simulated_product" || return 0
  check "the same manifest is created as job restored" create_job restored "${small[@]}" &&
    check "it Succeeds within 90s" ends_in restored Succeeded 90 || return 0
  expect "it reused all 3 trials, launching none" job_has restored \
    --equals trials.launched=0 --counts-results trials.reused --results 3
  end_case
}

# A scrape of the operator's metrics, into file $1, passes promtool check metrics and holds the
# counters given (their # TYPE lines).
scrape_checks() {
  local scrape=$1 port problems family
  shift
  port=$(grep '"msg":"starting"' "$E2E_OPERATOR_LOG" | tail -1 |
    sed -n 's/.*"metricsPort":\([0-9]*\).*/\1/p')
  e2e_scrape "$port" >"$scrape" || return 1
  problems=$(promtool check metrics <"$scrape" 2>&1) || { echo "$problems"; return 1; }
  [[ -z $problems ]] || { echo "$problems"; return 1; }
  for family in "$@"; do
    grep -q "^# TYPE $family counter$" "$scrape" || { echo "no counter $family"; return 1; }
  done
}

# The operator's log holds no sign of a crash.
no_crash_logged() {
  ! grep -E -m5 'terminate called|Abort|Segmentation fault|core dumped|"level":"(fatal|critical)"' \
    "$E2E_OPERATOR_LOG"
}

case_operator() {
  echo
  note "case operator"
  expect "the operator is the process that started ($operator_at_start), alive" \
    same_operator "$operator_at_start"
  expect "its log shows no crash" no_crash_logged
  expect "no reconcile threw" no_new_exceptions 0
  expect "the audit log: no request of the operator was refused" nothing_refused
  expect "a scrape of /metrics passes promtool check metrics" scrape_checks "$work/scrape.txt"
}

# The ConfigMaps the operator deleted in the case's namespace (successful deletes in the audit
# log), sorted, one a line.
configmaps_deleted() { inspect configmaps-deleted "$E2E_AUDIT_LOG" "$case_ns"; }

bounded_flags="--workers 4 --qps 50 --burst 100 --measurements-per-namespace 2"
start_bounded() { E2E_OPERATOR_FLAGS=$bounded_flags e2e_start_operator; }
restart_bounded() { e2e_stop_operator && start_bounded; }

# A tenant's ConfigMap $1 with the measurement label and the shape of a measurement, unsealed.
create_tenant_measurement() {
  kubectl create configmap "$1" -n "$case_ns" --from-literal=identity.json='{}' \
    --from-literal=result.json='{"outcome": "OOM", "startTime": "2020-01-01T00:00:00Z"}' &&
    kubectl label configmap "$1" -n "$case_ns" "$measurement_label=v2" >/dev/null
}

# Job $1 has $2 trial Pods in phase $3.
trial_pods_in_phase() {
  [[ $(kubectl get pods -n "$case_ns" -l "autotune.io/job=$1" --field-selector "status.phase=$3" \
    -o name | wc -l) -eq $2 ]]
}

# The measurement ConfigMaps the operator created in the case's namespace from time $1 on (the
# audit log), one a line.
measurements_created_since() {
  inspect pods-created --resource configmaps "$E2E_AUDIT_LOG" "$case_ns" autotune-m- "$1"
}

# Last, as it restarts the operator: a bound of two measurements a namespace.
case_bounded() {
  begin_case bounded
  local tenant=autotune-m-0000000000000000000000000000000000000000 tenant_rv since created
  check "the operator is restarted with --measurements-per-namespace 2" restart_bounded || return 0
  check "a tenant's unsealed ConfigMap $tenant with the label is created" \
    create_tenant_measurement "$tenant" || return 0
  tenant_rv=$(kubectl get configmap "$tenant" -n "$case_ns" -o jsonpath='{.metadata.resourceVersion}')
  # Trials of 20 s: time to stop the operator once they run, so that they all end while it is
  # stopped and its first reconcile after records them together.
  check "a job of three trials of 8 GPUs, all at once, is created" \
    create_job first "${small[@]}" gpus=8 parallelism=3 startup=20 &&
    check "its three trial Pods run within 60s" eventually 60 trial_pods_in_phase first 3 Running &&
    check "the operator is stopped" e2e_stop_operator &&
    check "the three trials end within 60s" eventually 60 trial_pods_in_phase first 3 Succeeded ||
    return 0
  since=$(now_micro)
  check "the operator is started again" start_bounded &&
    check "first Succeeds within 120s" ends_in first Succeeded 120 || return 0
  created=$(measurements_created_since "$since")
  expect "its 3 measurements are held in one sound ConfigMap" \
    kept_has --held-together first=3 --sound-by first
  expect "the audit log: that ConfigMap was made in one request (created: ${created//$'\n'/ })" \
    test "$(wc -l <<<"$created")" -eq 1
  check "a job of three trials of ZeRO stage 2, one at a time, is created" \
    create_job second strategy=grid stages='[2]' micro='[1, 2, 3]' early=0 startup=1 \
      parallelism=1 &&
    check "it Succeeds within 180s" ends_in second Succeeded 180 || return 0
  expect "the two newest measurements are kept, both of second, sealed; the tenant's is as it was" \
    kept_has --count 3 --resource-version "$tenant=$tenant_rv" --unsealed "$tenant" \
      --measured-count second=2 --measured-count first=0 --sound-by second
  expect "the operator deleted exactly first's ConfigMap and second's oldest, not the tenant's" \
    test "$(configmaps_deleted | wc -l) $(configmaps_deleted | grep -c "$tenant")" = "2 0"
  end_case
}

# --- the run -------------------------------------------------------------------------------------

e2e_test_up
operator_at_start=$(operator_pid)

for group in ${AUTOTUNE_E2E_REUSE_CASES:-rerun+widened+isolation+disabled+bad_cache+not_ours+recreated \
  node_product operator bounded no_secrets_in_logs}; do
  run_group "$group"
done

e2e_test_end
