#!/usr/bin/env bash
# The AutotuneJob CRD (crds/autotunejobs.autotune.io.yaml) against a real kube-apiserver: it is
# established; it accepts every example job, which the operator's own decoder also accepts; it
# rejects bad jobs with an error naming the field; after creation only the fields meant to change
# can change; the status subresource takes the status the operator writes and ignores spec; and
# `kubectl get atj` prints the columns.
#
# Usage: crd_test.sh AUTOTUNE_BINARY SOURCE_DIR
# It starts its own control plane with scripts/controlplane, or, when AUTOTUNE_TEST_KUBECONFIG is
# set, uses that cluster (with kubectl from PATH) and leaves only the CRD behind.
set -euo pipefail

autotune=$1
source_dir=$2
crd=$source_dir/crds/autotunejobs.autotune.io.yaml
controlplane=$source_dir/scripts/controlplane
# shellcheck source=tests/support/checks.sh
source "$source_dir/tests/support/checks.sh"
# shellcheck source=tests/support/cluster.sh
source "$source_dir/tests/support/cluster.sh"
workdir=$(mktemp -d /tmp/autotune-crd-test.XXXXXX)
namespace=autotune-crd-test-$$
job=$workdir/job.yaml
live='crd-test-live'
namespace_created=false

cleanup() {
  if [[ $own_controlplane == true ]]; then
    AUTOTUNE_CONTROLPLANE_DIR=$workdir/controlplane "$controlplane" down >/dev/null 2>&1 || true
  elif [[ $namespace_created == true ]]; then
    kubectl delete namespace "$namespace" --wait=false >/dev/null 2>&1 || true
  fi
  rm -rf "$workdir"
}
trap cleanup EXIT



start_cluster() { use_cluster "$workdir" kubectl; }

create_namespace() { kubectl create namespace "$namespace" && namespace_created=true; }

# A field of a job file, read without a server.
field_of() { kubectl patch --local -f "$1" --type=merge -p '{}' -o jsonpath="$2"; }

# --- the CRD itself ---

# kubectl wait fails outright on a CRD so new that it has no conditions yet, hence the retries.
crd_established() {
  kubectl apply -f "$crd" &&
    eventually 60 kubectl wait --for=condition=Established --timeout=10s crd/autotunejobs.autotune.io
}

served() { kubectl get atj -n default; }

# Plural, singular and short name, namespaced, in autotune.io/v1alpha1.
names_registered() {
  local row
  row=$(kubectl api-resources --api-group=autotune.io --no-headers | grep -w autotunejobs)
  echo "$row"
  [[ $row =~ ^autotunejobs\ +atj\ +autotune.io/v1alpha1\ +true\ +AutotuneJob$ ]] &&
    kubectl get autotunejob -n default && kubectl get autotunejobs -n default
}

# --- the examples ---

example_planned() { "$autotune" plan "$1" >/dev/null; }

# Tried in the test's own namespace, where no object of the same name can be in the way.
example_accepted() {
  kubectl patch --local -f "$1" --type=merge -p "{\"metadata\": {\"namespace\": \"$namespace\"}}" \
    -o yaml | kubectl apply --dry-run=server -f -
}

check_examples() {
  local example found=0
  for example in "$source_dir"/examples/*.yaml; do
    [[ $(field_of "$example" '{.kind}') == AutotuneJob ]] || continue
    found=$((found + 1))
    local name=examples/${example##*/}
    expect "$name decodes with the operator's decoder (autotune plan exits 0)" \
      example_planned "$example"
    expect "$name is accepted by the API server" example_accepted "$example"
  done
  expect "examples/ holds AutotuneJobs" test "$found" -gt 0
}

# --- jobs at creation ---

write_job() {
  cat >"$job" <<JOB
apiVersion: autotune.io/v1alpha1
kind: AutotuneJob
metadata:
  name: crd-test
  namespace: $namespace
spec:
  deepspeedConfig:
    train_micro_batch_size_per_gpu: auto
    zero_optimization:
      stage: [1, 2]
  resources:
    gpusPerTrial: 4
    gpuMemory: 32Gi
  search:
    strategy: deepspeed
    maxTrials: 20
  parallelism: 2
  trialTimeout: 10m
  argMappings:
    train_micro_batch_size_per_gpu: --per_device_train_batch_size
  template:
    spec:
      containers:
        - name: trainer
          image: example.org/train:1.0
          command: [deepspeed, train.py, --deepspeed, /etc/autotune/ds_config.json]
JOB
}

# The test job with a JSON merge patch applied (null deletes a field, a list replaces the list).
patched_job() { kubectl patch --local -f "$job" --type=merge -p "$1" -o yaml; }

# Text as an extended regular expression that matches just that text.
regex_quote() { sed 's/[][\\.*^$+?(){}|]/\\&/g' <<<"$1"; }

# The regular expression of the API server's error for one field, e.g. "spec.parallelism: Invalid
# value: 0: ..." or "spec.gpuModels: Too many: 9: ...": the field's path with the kind of the
# error.
field_error() { echo "$(regex_quote "$1"): ((Invalid|Unsupported|Required|Duplicate) value|Too many)"; }

# Succeeds when the server's defaults are the decoder's (src/api/job.h), and the fields that
# DeepSpeed's autotuning section may supply are left unset, so the operator can tell a spec that
# says nothing from one that repeats a default.
defaults_applied() {
  local template='{.spec.search.plateauThreshold} {.spec.search.seed}'
  template+=' {.spec.resources.nodesPerTrial} {.spec.schedulingTimeout} {.spec.maxFailedTrials}'
  template+=' {.spec.cleanup} {.spec.output.retain}|{.spec.search.strategy}{.spec.search.fast}'
  template+='{.spec.search.metric}{.spec.search.maxTrials}{.spec.search.earlyStopping}'
  template+='{.spec.search.minMicroBatchSize}{.spec.search.maxMicroBatchSize}'
  template+='{.spec.search.numTuningMicroBatchSizes}{.spec.resources.modelParallelSize}|'
  local expected='0.05 0 1 15m 10 DeleteFinished false||'
  local defaulted
  defaulted=$(patched_job '{"spec": {"search": {"strategy": null, "maxTrials": null}}}' |
    kubectl create --dry-run=server -f - -o jsonpath="$template")
  echo "defaults: $defaulted"
  echo "expected: $expected"
  [[ $defaulted == "$expected" ]] || return 1
  local bare
  bare=$(patched_job '{"spec":{"resources":null,"search":null,"trialTimeout":null,"parallelism":null}}' |
    kubectl create --dry-run=server -f - \
      -o jsonpath='{.spec.resources.gpusPerTrial} {.spec.parallelism} {.spec.trialTimeout}')
  echo "without resources, search, parallelism and trialTimeout: $bare"
  [[ $bare == '1 1 1h' ]]
}

accepted_on_create() { patched_job "$1" | kubectl create --dry-run=server -f -; }

# Succeeds when the server refuses the patched job with an error on `field` whose text matches
# the optional regular expression `detail`.
rejected_on_create() {
  local patch=$1 field=$2 detail=${3:-}
  local output
  if output=$(patched_job "$patch" | kubectl create --dry-run=server -f - 2>&1); then
    echo "accepted: $output"
    return 1
  fi
  echo "$output"
  grep -Eq -- "$(field_error "$field")${detail:+.*$detail}" <<<"$output"
}

check_creation() {
  expect "the test job is accepted" accepted_on_create '{}'
  expect "the server applies the decoder's defaults, leaving those the autotuning section may supply" \
    defaults_applied
  expect "a job with every optional field set is accepted" accepted_on_create '{"spec": {
    "model": {"numParameters": 774000000, "activationMemoryPerSample": 9600000000,
              "hiddenSize": 1280, "numLayers": 36},
    "resources": {"nodesPerTrial": 1, "modelParallelSize": 2},
    "search": {"fast": false, "metric": "latency", "earlyStopping": 0, "plateauThreshold": 0,
               "minMicroBatchSize": 2, "maxMicroBatchSize": 2, "maxTrainBatchSize": 512,
               "numTuningMicroBatchSizes": 1, "seed": -7},
    "schedulingTimeout": "1h30m", "queueTimeout": "6h", "maxFailedTrials": 1,
    "primaryContainer": "trainer",
    "output": {"configMapName": "crd-test.best", "retain": true}, "cleanup": "Keep",
    "queueName": "team-a", "afterTuning": {"spec": {"template": {"spec": {}}}}}}'
  expect "gpuMemory may be a number of bytes" accepted_on_create \
    '{"spec": {"resources": {"gpuMemory": 34359738368}}}'
  expect "gpuModels may name several models, or All" accepted_on_create \
    '{"spec": {"gpuModels": ["NVIDIA-A100-SXM4-40GB", "NVIDIA-H100-80GB-HBM3"]}}'
  expect "gpuModels may be All alone" accepted_on_create '{"spec": {"gpuModels": ["All"]}}'
  expect "durations take fractions and several units" accepted_on_create \
    '{"spec": {"trialTimeout": "1.5h", "schedulingTimeout": "1m30s500ms"}}'
  expect "a timeout may be as long as 720h" accepted_on_create \
    '{"spec": {"trialTimeout": "720h", "schedulingTimeout": ".5h"}}'

  # Each bad job differs from the accepted test job in one field only.
  local rejections=(
    'an unknown strategy|spec.search.strategy|{"spec": {"search": {"strategy": "bayesian"}}}|supported values'
    'an unknown metric|spec.search.metric|{"spec": {"search": {"metric": "speed"}}}|'
    'maxTrials 0|spec.search.maxTrials|{"spec": {"search": {"maxTrials": 0}}}|greater than or equal to 1'
    'maxTrials 5000|spec.search.maxTrials|{"spec": {"search": {"maxTrials": 5000}}}|less than or equal to 1000'
    'parallelism 0|spec.parallelism|{"spec": {"parallelism": 0}}|'
    'parallelism 1001|spec.parallelism|{"spec": {"parallelism": 1001}}|less than or equal to 1000'
    'gpusPerTrial 2147483647|spec.resources.gpusPerTrial|{"spec": {"resources": {"gpusPerTrial": 2147483647}}}|less than or equal to 1024'
    'nine gpuModels|spec.gpuModels|{"spec": {"gpuModels": ["A", "B", "C", "D", "E", "F", "G", "H", "I"]}}|at most 8'
    'All beside a model|spec.gpuModels|{"spec": {"gpuModels": ["NVIDIA-H100-80GB-HBM3", "All"]}}|stands alone'
    'a gpuModel twice|spec.gpuModels[1]|{"spec": {"gpuModels": ["NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-80GB-HBM3"]}}|'
    'a gpuModel with a space|spec.gpuModels[0]|{"spec": {"gpuModels": ["H100 80GB"]}}|should match'
    'maxFailedTrials 0|spec.maxFailedTrials|{"spec": {"maxFailedTrials": 0}}|'
    'a job without deepspeedConfig|spec.deepspeedConfig|{"spec": {"deepspeedConfig": null}}|'
    'a deepspeedConfig that is a list|spec.deepspeedConfig|{"spec": {"deepspeedConfig": [1]}}|'
    'a trialTimeout without a unit|spec.trialTimeout|{"spec": {"trialTimeout": "30"}}|should match'
    'a trialTimeout in words|spec.trialTimeout|{"spec": {"trialTimeout": "30 minutes"}}|'
    'a trialTimeout of 0s|spec.trialTimeout|{"spec": {"trialTimeout": "0s"}}|longer than 0s'
    'a trialTimeout of 3000000h|spec.trialTimeout|{"spec": {"trialTimeout": "3000000h"}}|at most 720h'
    'a schedulingTimeout past what a duration holds|spec.schedulingTimeout|{"spec": {"schedulingTimeout": "99999999999h"}}|'
    'a schedulingTimeout in days|spec.schedulingTimeout|{"spec": {"schedulingTimeout": "1d"}}|'
    'a queueTimeout of 0s|spec.queueTimeout|{"spec": {"queueTimeout": "0s"}}|longer than 0s'
    'a queueTimeout of 721h|spec.queueTimeout|{"spec": {"queueTimeout": "721h"}}|at most 720h'
    'minMicroBatchSize above maxMicroBatchSize|spec.search.maxMicroBatchSize|{"spec": {"search": {"minMicroBatchSize": 8, "maxMicroBatchSize": 4}}}|at least spec.search.minMicroBatchSize'
    'plateauThreshold 1|spec.search.plateauThreshold|{"spec": {"search": {"plateauThreshold": 1}}}|'
    'earlyStopping -1|spec.search.earlyStopping|{"spec": {"search": {"earlyStopping": -1}}}|'
    'maxTrainBatchSize 0|spec.search.maxTrainBatchSize|{"spec": {"search": {"maxTrainBatchSize": 0}}}|'
    'no containers|spec.template.spec.containers|{"spec": {"template": {"spec": {"containers": []}}}}|'
    'a template without a pod spec|spec.template.spec|{"spec": {"template": {"spec": null}}}|'
    'a container without a name|spec.template.spec.containers[0].name|{"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}}|'
    'a primaryContainer that is not in the template|spec.primaryContainer|{"spec": {"primaryContainer": "sidecar"}}|no container named "sidecar"'
    'gpusPerTrial 0|spec.resources.gpusPerTrial|{"spec": {"resources": {"gpusPerTrial": 0}}}|'
    'nodesPerTrial 3 with 16 GPUs|spec.resources.nodesPerTrial|{"spec": {"resources": {"gpusPerTrial": 16, "nodesPerTrial": 3}}}|must divide'
    'nodesPerTrial 65|spec.resources.nodesPerTrial|{"spec": {"resources": {"gpusPerTrial": 65, "nodesPerTrial": 65}}}|'
    'a modelParallelSize that does not divide gpusPerTrial|spec.resources.modelParallelSize|{"spec": {"resources": {"modelParallelSize": 3}}}|must divide'
    'a gpuMemory in the wrong unit|spec.resources.gpuMemory|{"spec": {"resources": {"gpuMemory": "32GB"}}}|'
    'a gpuMemory of 0|spec.resources.gpuMemory|{"spec": {"resources": {"gpuMemory": "0Gi"}}}|at least 1 byte'
    'numParameters 0|spec.model.numParameters|{"spec": {"model": {"numParameters": 0}}}|'
    'an empty flag in argMappings|spec.argMappings.train_micro_batch_size_per_gpu|{"spec": {"argMappings": {"train_micro_batch_size_per_gpu": ""}}}|'
    'an invalid configMapName|spec.output.configMapName|{"spec": {"output": {"configMapName": "Best_Config"}}}|'
    'an unknown cleanup|spec.cleanup|{"spec": {"cleanup": "Never"}}|'
    'a queueName that is no label value|spec.queueName|{"spec": {"queueName": "-team"}}|'
  )
  local rejection description field patch detail
  for rejection in "${rejections[@]}"; do
    IFS='|' read -r description field patch detail <<<"$rejection"
    expect "$description is rejected naming $field" rejected_on_create "$patch" "$field" "$detail"
  done

  # The default ConfigMap name, <name>-optimal, must be a valid name too.
  local long_name
  long_name=$(printf 'a%.0s' {1..250})
  expect "a 250-character name without configMapName is rejected naming spec.output.configMapName" \
    rejected_on_create "{\"metadata\": {\"name\": \"$long_name\"}}" spec.output.configMapName \
    'at most 245 characters'
  expect "a 250-character name with a configMapName is accepted" accepted_on_create \
    "{\"metadata\": {\"name\": \"$long_name\"}, \"spec\": {\"output\": {\"configMapName\": \"best\"}}}"
}

# --- changes after creation ---

create_live_job() {
  patched_job "{\"metadata\": {\"name\": \"$live\"}}" | kubectl create -f -
}

live_field() { kubectl get atj "$live" -n "$namespace" -o jsonpath="$1"; }

updated_to() {
  local patch=$1 path=$2 expected=$3
  kubectl patch atj "$live" -n "$namespace" --type=merge -p "$patch" || return 1
  local value
  value=$(live_field "{$path}")
  echo "$path is now $value"
  [[ $value == "$expected" ]]
}

# Succeeds when the server refuses the change, saying that `field` is immutable, and the job keeps
# its generation (nothing was stored).
immutable() {
  local patch=$1 field=$2
  local generation output
  generation=$(live_field '{.metadata.generation}')
  if output=$(kubectl patch atj "$live" -n "$namespace" --type=merge -p "$patch" 2>&1); then
    echo "accepted: $output"
    return 1
  fi
  echo "$output"
  grep -Eq -- "$(field_error "$field").*$(regex_quote "$field") is immutable" <<<"$output" &&
    [[ $(live_field '{.metadata.generation}') == "$generation" ]]
}

check_updates() {
  expect "a job can be created" create_live_job
  expect "spec.parallelism can change" updated_to '{"spec": {"parallelism": 5}}' .spec.parallelism 5
  expect "spec.trialTimeout can change" \
    updated_to '{"spec": {"trialTimeout": "45m"}}' .spec.trialTimeout 45m
  expect "spec.schedulingTimeout can change" \
    updated_to '{"spec": {"schedulingTimeout": "5m"}}' .spec.schedulingTimeout 5m
  expect "spec.queueTimeout can change" \
    updated_to '{"spec": {"queueTimeout": "2h"}}' .spec.queueTimeout 2h
  expect "spec.maxFailedTrials can change" \
    updated_to '{"spec": {"maxFailedTrials": 3}}' .spec.maxFailedTrials 3
  expect "spec.search.maxTrials can change" \
    updated_to '{"spec": {"search": {"maxTrials": 40}}}' .spec.search.maxTrials 40
  expect "a field that can change is still bounded: maxTrials 0 is rejected" bounded_on_update

  # Every other field, changed alone (nodesPerTrial has no other valid value to change to).
  local changes=(
    'spec.resources.gpusPerTrial|{"spec": {"resources": {"gpusPerTrial": 8}}}'
    'spec.deepspeedConfig|{"spec": {"deepspeedConfig": {"zero_optimization": {"stage": 3}}}}'
    'spec.search.strategy|{"spec": {"search": {"strategy": "grid"}}}'
    'spec.search.metric|{"spec": {"search": {"metric": "latency"}}}'
    'spec.search.seed|{"spec": {"search": {"seed": 9}}}'
    'spec.search.maxTrainBatchSize|{"spec": {"search": {"maxTrainBatchSize": 64}}}'
    'spec.search.fast|{"spec": {"search": {"fast": false}}}'
    'spec.search.earlyStopping|{"spec": {"search": {"earlyStopping": 0}}}'
    'spec.search.plateauThreshold|{"spec": {"search": {"plateauThreshold": 0.1}}}'
    'spec.search.minMicroBatchSize|{"spec": {"search": {"minMicroBatchSize": 2}}}'
    'spec.search.maxMicroBatchSize|{"spec": {"search": {"maxMicroBatchSize": 512}}}'
    'spec.search.numTuningMicroBatchSizes|{"spec": {"search": {"numTuningMicroBatchSizes": 5}}}'
    'spec.resources.modelParallelSize|{"spec": {"resources": {"modelParallelSize": 2}}}'
    'spec.resources.gpuMemory|{"spec": {"resources": {"gpuMemory": null}}}'
    'spec.model|{"spec": {"model": {"numParameters": 1000}}}'
    'spec.argMappings|{"spec": {"argMappings": {"gradient_accumulation_steps": "--gas"}}}'
    'spec.template|{"spec": {"template": {"metadata": {"labels": {"team": "a"}}}}}'
    'spec.primaryContainer|{"spec": {"primaryContainer": "trainer"}}'
    'spec.output.configMapName|{"spec": {"output": {"configMapName": "elsewhere"}}}'
    'spec.output.retain|{"spec": {"output": {"retain": true}}}'
    'spec.cleanup|{"spec": {"cleanup": "Keep"}}'
    'spec.queueName|{"spec": {"queueName": "team-a"}}'
    'spec.afterTuning|{"spec": {"afterTuning": {"spec": {}}}}'
  )
  local change field patch
  for change in "${changes[@]}"; do
    IFS='|' read -r field patch <<<"$change"
    expect "changing $field after creation is rejected" immutable "$patch" "$field"
  done
}

bounded_on_update() {
  local output
  if output=$(kubectl patch atj "$live" -n "$namespace" --type=merge \
    -p '{"spec": {"search": {"maxTrials": 0}}}' 2>&1); then
    echo "accepted: $output"
    return 1
  fi
  echo "$output"
  grep -Eq -- "$(field_error spec.search.maxTrials)" <<<"$output"
}

# --- status ---

# Every field that api::encode(const Status&) writes. The server prunes a field its schema does not
# know and warns about it, so a warning is a field missing from the schema.
status_patch() {
  cat <<'STATUS'
{"status": {
  "phase": "Running", "observedGeneration": 1, "message": "13 trials launched",
  "startTime": "2025-01-01T10:00:00Z", "completionTime": "2025-01-01T10:27:34Z",
  "conditions": [
    {"type": "SpecValid", "status": "True", "reason": "Valid", "message": "",
     "lastTransitionTime": "2025-01-01T10:00:00Z", "observedGeneration": 1},
    {"type": "Running", "status": "True", "reason": "TrialsRunning", "message": "2 trials running",
     "lastTransitionTime": "2025-01-01T10:00:01Z", "observedGeneration": 1}],
  "trials": {"launched": 13, "pending": 0, "queued": 1, "running": 2, "succeeded": 9, "failed": 0,
             "oom": 2, "timedOut": 0, "pruned": 4},
  "inFlight": [{"name": "z1_gas2_tmbspg3", "attempt": 1, "preemptions": 2}],
  "best": {"trial": "z1_gas1_tmbspg3", "metric": "throughput", "value": 87.3017, "zeroStage": 1,
           "microBatchSize": 3, "gradientAccumulationSteps": 1, "speedup": 2.48},
  "model": {"numParameters": 774000000, "activationMemoryPerSample": 9600000000},
  "spaces": [{"name": "z1", "trials": 5, "bestValue": 87.3017, "bestTrial": "z1_gas1_tmbspg3"}],
  "results": [
    {"name": "z0_gas1_tmbspg1", "space": "z0", "outcome": "Succeeded", "value": 27.874,
     "startTime": "2025-01-01T10:00:05Z", "durationSeconds": 95.5},
    {"name": "z0_gas1_tmbspg3", "space": "z0", "outcome": "OOM", "reason": "CUDA out of memory",
     "startTime": "2025-01-01T10:02:00Z", "durationSeconds": 40}],
  "afterTuningJob": "crd-test-live-train"}}
STATUS
}

status_written() {
  local generation
  generation=$(live_field '{.metadata.generation}')
  local output
  output=$(kubectl patch atj "$live" -n "$namespace" --subresource=status --type=merge \
    -p "$(status_patch)" 2>&1) || { echo "$output"; return 1; }
  echo "$output"
  ! grep -q 'unknown field' <<<"$output" || return 1
  local template='{.status.phase} {.status.best.value} {.status.trials.pruned}'
  template+=' {.status.conditions[1].reason} {.status.results[1].outcome} {.status.afterTuningJob}'
  template+=' {.status.trials.queued} {.status.inFlight[0].preemptions}'
  local read_back
  read_back=$(live_field "$template")
  echo "read back: $read_back"
  [[ $read_back == 'Running 87.3017 4 TrialsRunning OOM crd-test-live-train 1 2' ]] &&
    [[ $(live_field '{.metadata.generation}') == "$generation" ]]
}

spec_ignored_on_status() {
  local before
  before=$(live_field '{.spec.parallelism} {.metadata.generation}')
  kubectl patch atj "$live" -n "$namespace" --subresource=status --type=merge \
    -p '{"spec": {"parallelism": 42}}' || return 1
  local after
  after=$(live_field '{.spec.parallelism} {.metadata.generation}')
  echo "spec.parallelism and generation: $before before, $after after"
  [[ $after == "$before" ]]
}

# The main resource ignores status, as the status subresource ignores spec.
status_ignored_on_main_resource() {
  kubectl patch atj "$live" -n "$namespace" --type=merge -p '{"status": {"phase": "Failed"}}' ||
    return 1
  [[ $(live_field '{.status.phase}') == Running ]]
}

# A condition must carry a reason and a transition time, as metav1.Condition requires.
bad_condition_rejected() {
  local output
  if output=$(kubectl patch atj "$live" -n "$namespace" --subresource=status --type=merge -p \
    '{"status": {"conditions": [{"type": "Running", "status": "True", "reason": "", "message": "",
      "lastTransitionTime": ""}]}}' 2>&1); then
    echo "accepted: $output"
    return 1
  fi
  echo "$output"
  grep -Eq -- "$(field_error 'status.conditions[0].reason')" <<<"$output" &&
    grep -Eq -- "$(field_error 'status.conditions[0].lastTransitionTime')" <<<"$output"
}

check_status() {
  expect "the status subresource takes every field the operator writes" status_written
  expect "a spec change through the status subresource is ignored" spec_ignored_on_status
  expect "a status change through the main resource is ignored" status_ignored_on_main_resource
  expect "a condition without reason or transition time is rejected" bad_condition_rejected
}

# --- kubectl get ---

columns_shown() {
  local output
  output=$(kubectl get atj -n "$namespace")
  echo "$output"
  grep -Eq '^NAME +PHASE +BEST +LAUNCHED +SUCCEEDED +QUEUED +AGE$' <<<"$output" &&
    grep -Eq "^$live +Running +87\.3017 +13 +9 +1 +[0-9]+[smh]" <<<"$output"
}

wide_columns_shown() {
  local output
  output=$(kubectl get atj -n "$namespace" -o wide)
  echo "$output"
  grep -Eq '^NAME +PHASE +BEST +METRIC +BEST TRIAL +LAUNCHED +SUCCEEDED +RUNNING +QUEUED +MAX TRIALS +GPU-HOURS +SAVED +AGE$' \
    <<<"$output" &&
    grep -Eq "^$live +Running +87\.3017 +throughput +z1_gas1_tmbspg3 +13 +9 +2 +1 +40 " <<<"$output"
}

check_printing() {
  expect "kubectl get atj shows phase, best value, trial counts, queued trials and age" columns_shown
  expect "kubectl get atj -o wide adds metric, best trial, running and max trials" wide_columns_shown
}

main() {
  start_cluster
  export KUBECACHEDIR=$workdir/kube-cache
  expect "the CRD is accepted and established" crd_established
  expect "AutotuneJobs are served" eventually 30 served
  expect "names: autotunejobs, autotunejob, short name atj, namespaced" names_registered
  expect "the test namespace can be created" create_namespace
  write_job
  check_examples
  check_creation
  check_updates
  check_status
  check_printing
  if ((failures > 0)); then
    echo "crd_test: $failures checks failed"
    exit 1
  fi
  echo "crd_test: all checks passed"
}

main
