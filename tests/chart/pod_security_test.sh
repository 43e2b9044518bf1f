#!/usr/bin/env bash
# The chart's admission policy (templates/admission-policy.yaml) against the real thing: for every
# AutotuneJob of a corpus and both profiles, the policy's verdict on the job must be the API
# server's own Pod Security admission verdict on the Pods the operator would make of it. The corpus
# breaks each control of the Pod Security Standards once, on a template that otherwise passes
# restricted, and holds templates that pass: minimal, hardened, and the values each control allows.
#
#   tests/chart/pod_security_test.sh PODS_OF [SOURCE_DIR]
#
# PODS_OF is tests/chart/pods_of.cpp built: it prints those Pods (the first trial's, and the
# afterTuning Job's) with the controller's own code. Each profile gets a namespace labelled
# pod-security.kubernetes.io/enforce=<profile>, so that Pod Security judges the Pods there at the
# server's latest version of the standards, and a release of the chart whose policy, of that
# profile, is bound to that namespace only. Both verdicts come from server-side dry runs.
#
# Starts its own control plane with scripts/controlplane, or uses the cluster of
# $AUTOTUNE_TEST_KUBECONFIG (with helm and kubectl on PATH), removing what it created there except
# the CRD, as tests/chart/chart_test.sh does.
set -euo pipefail

pods_of=$1
source_dir=$(cd "${2:-$(dirname "$0")/../..}" && pwd)
chart=$source_dir/charts/autotune-operator
# shellcheck source=tests/support/checks.sh
source "$source_dir/tests/support/checks.sh"
# shellcheck source=tests/support/cluster.sh
source "$source_dir/tests/support/cluster.sh"
work=$(mktemp -d /tmp/autotune-pod-security-test.XXXXXX)

run_id=$((RANDOM % 90000 + 10000))
release=pod-security-$run_id
release_ns=autotune-pod-security-$run_id
profiles=(baseline restricted)
declare -A namespace_of=([baseline]=psa-baseline-$run_id [restricted]=psa-restricted-$run_id)

export HELM_CACHE_HOME=$work/helm/cache HELM_CONFIG_HOME=$work/helm/config
export HELM_DATA_HOME=$work/helm/data

cleanup() {
  if $own_controlplane; then
    "$source_dir/scripts/controlplane" down >/dev/null 2>&1 || true
  elif [[ -n ${KUBECONFIG:-} ]]; then
    local profile
    for profile in "${profiles[@]}"; do
      helm uninstall "$release-$profile" -n "$release_ns" >/dev/null 2>&1 || true
    done
    kubectl delete namespace "$release_ns" "${namespace_of[@]}" --wait=false \
      --ignore-not-found >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

use_cluster "$work" "helm kubectl"

# --- The corpus -----------------------------------------------------------------------------------

# The job every case changes: one trial, one container, nothing about security said.
cat >"$work/base.yaml" <<'JOB'
apiVersion: autotune.io/v1alpha1
kind: AutotuneJob
metadata:
  name: pod-security
spec:
  deepspeedConfig:
    train_micro_batch_size_per_gpu: 1
    zero_optimization: {stage: 1}
  model: {numParameters: 125000000}
  resources: {gpusPerTrial: 1, gpuMemory: 80Gi}
  search: {strategy: grid, maxTrials: 1}
  template:
    spec:
      containers:
        - name: trainer
          image: example.org/train:1.0
          command: [deepspeed, train.py]
  output: {configMapName: pod-security-optimal}
JOB

pod=/spec/template/spec
trainer=$pod/containers/0
# JSON patch operations: set the field at path $1 to the JSON value $2, or remove it.
put() { printf '{"op": "add", "path": "%s", "value": %s}' "$1" "$2"; }
remove() { printf '{"op": "remove", "path": "%s"}' "$1"; }

# What restricted asks of a Pod and of each container. Each broken control starts from here, so
# that it is the only thing wrong under either profile (or says what else Pod validation forces).
restricted_container='{"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}'
hardened="$(put $pod/securityContext \
  '{"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}}'),
  $(put $trainer/securityContext "$restricted_container")"
# A sidecar (an init container that keeps running), the one kind of init container with probes.
sidecar() {
  put $pod/initContainers "[{\"name\": \"sidecar\", \"image\": \"example.org/proxy:1.0\",
    \"restartPolicy\": \"Always\", \"securityContext\": $restricted_container, $1}]"
}
after_tuning() {
  put /spec/afterTuning "{\"spec\": {\"template\": {\"spec\": {\"restartPolicy\": \"Never\",
    \"securityContext\": {\"runAsNonRoot\": true,
      \"seccompProfile\": {\"type\": \"RuntimeDefault\"}},
    \"containers\": [{\"name\": \"trainer\", \"image\": \"example.org/train:1.0\",
    \"command\": [\"deepspeed\", \"train.py\"], $1}]}}}}"
}

names=()
declare -A expected patch_of
# Case $1: Pod Security's verdicts under baseline ($2) and restricted ($3) on the Pods of the base
# job changed by the JSON patch operations $4...
corpus() {
  local name=$1
  names+=("$name")
  expected[$name/baseline]=$2
  expected[$name/restricted]=$3
  shift 3
  local IFS=,
  patch_of[$name]="$*"
}

# Templates that pass.
corpus minimal admitted refused
corpus hardened admitted admitted "$hardened"
corpus allowed-values admitted admitted "$hardened" \
  "$(put $pod/securityContext/appArmorProfile '{"type": "RuntimeDefault"}')" \
  "$(put $pod/securityContext/seLinuxOptions '{"type": "container_t", "level": "s0:c1,c2"}')" \
  "$(put $pod/securityContext/sysctls '[{"name": "kernel.shm_rmid_forced", "value": "1"},
    {"name": "net.ipv4.tcp_keepalive_time", "value": "600"}]')" \
  "$(put $pod/hostNetwork false)" "$(put $pod/hostPID false)" "$(put $pod/hostIPC false)" \
  "$(put $trainer/securityContext/privileged false)" \
  "$(put $trainer/securityContext/procMount '"Default"')" \
  "$(put $trainer/securityContext/capabilities/add '["NET_BIND_SERVICE"]')" \
  "$(put $trainer/securityContext/seccompProfile \
    '{"type": "Localhost", "localhostProfile": "profiles/train.json"}')" \
  "$(put $trainer/ports '[{"containerPort": 8080, "hostPort": 0}]')" \
  "$(put $trainer/readinessProbe '{"httpGet": {"port": 8080, "path": "/ready"}}')" \
  "$(put $trainer/livenessProbe '{"tcpSocket": {"port": 8080}}')" \
  "$(put $trainer/lifecycle '{"preStop": {"httpGet": {"port": 8080, "path": "/stop"}}}')" \
  "$(put /spec/template/metadata '{"annotations":
    {"container.apparmor.security.beta.kubernetes.io/trainer": "runtime/default"}}')"
corpus probe-host-empty admitted admitted "$hardened" \
  "$(put $trainer/readinessProbe '{"httpGet": {"port": 8080, "host": ""}}')" \
  "$(put $trainer/lifecycle '{"postStart": {"tcpSocket": {"port": 8080, "host": ""}}}')"
corpus sysctls-safe-since-1.32-and-1.37 admitted admitted "$hardened" \
  "$(put $pod/securityContext/sysctls '[
    {"name": "net.ipv4.tcp_rmem", "value": "4096 87380 6291456"},
    {"name": "net.ipv4.tcp_wmem", "value": "4096 16384 4194304"},
    {"name": "net.ipv4.tcp_slow_start_after_idle", "value": "0"},
    {"name": "net.ipv4.tcp_notsent_lowat", "value": "131072"}]')"
corpus selinux-user-and-role-empty admitted admitted "$hardened" \
  "$(put $trainer/securityContext/seLinuxOptions '{"user": "", "role": "", "type": "container_t"}')"
corpus apparmor-annotation-empty admitted admitted "$hardened" \
  "$(put /spec/template/metadata \
    '{"annotations": {"container.apparmor.security.beta.kubernetes.io/trainer": ""}}')"
corpus restricted-volume-types admitted admitted "$hardened" \
  "$(put $pod/volumes '[{"name": "a", "configMap": {"name": "c"}},
    {"name": "b", "csi": {"driver": "csi.example.org"}},
    {"name": "c", "downwardAPI": {"items": [{"path": "labels",
      "fieldRef": {"fieldPath": "metadata.labels"}}]}},
    {"name": "d", "emptyDir": {}},
    {"name": "e", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"],
      "resources": {"requests": {"storage": "1Gi"}}}}}},
    {"name": "f", "persistentVolumeClaim": {"claimName": "data"}},
    {"name": "g", "projected": {"sources": [{"configMap": {"name": "c"}}]}},
    {"name": "h", "secret": {"secretName": "s"}}]')"
corpus image-volume admitted admitted "$hardened" \
  "$(put $pod/volumes '[{"name": "weights", "image": {"reference": "example.org/weights:1.0"}}]')"
corpus capabilities-of-the-runtime-default admitted refused "$hardened" \
  "$(put $trainer/securityContext/capabilities/add '["CHOWN", "SETUID", "NET_BIND_SERVICE"]')"
corpus user-namespace-as-root admitted admitted "$hardened" "$(put $pod/hostUsers false)" \
  "$(remove $pod/securityContext/runAsNonRoot)" "$(put $pod/securityContext/runAsUser 0)"
# Pod validation allows an unmasked /proc only in a user namespace, where baseline allows it too.
corpus user-namespace-unmasked-proc admitted refused "$hardened" "$(put $pod/hostUsers false)" \
  "$(put $trainer/securityContext/procMount '"Unmasked"')"
# Windows Pods are spared the Linux-only controls of restricted (and may not set them).
corpus windows admitted admitted "$(put $pod/os '{"name": "windows"}')" \
  "$(put $pod/securityContext '{"runAsNonRoot": true}')"
corpus security-context-null admitted refused "$(put $trainer/securityContext null)"
corpus after-tuning-hardened admitted admitted "$hardened" \
  "$(after_tuning "\"securityContext\": $restricted_container")"

# Baseline, each control broken once.
corpus host-network refused refused "$hardened" "$(put $pod/hostNetwork true)"
corpus host-pid refused refused "$hardened" "$(put $pod/hostPID true)"
corpus host-ipc refused refused "$hardened" "$(put $pod/hostIPC true)"
# Pod validation refuses privileged, or adding SYS_ADMIN, beside allowPrivilegeEscalation: false.
corpus privileged refused refused "$hardened" "$(put $trainer/securityContext/privileged true)" \
  "$(put $trainer/securityContext/allowPrivilegeEscalation true)"
corpus privileged-init-container refused refused "$hardened" \
  "$(put $pod/initContainers "[{\"name\": \"setup\", \"image\": \"example.org/setup:1.0\",
    \"securityContext\": {\"privileged\": true, \"allowPrivilegeEscalation\": true,
    \"capabilities\": {\"drop\": [\"ALL\"]}}}]")"
corpus capabilities-add-net-raw refused refused "$hardened" \
  "$(put $trainer/securityContext/capabilities/add '["NET_RAW"]')"
corpus host-path-volume refused refused "$hardened" \
  "$(put $pod/volumes '[{"name": "host", "hostPath": {"path": "/"}}]')"
corpus host-port refused refused "$hardened" \
  "$(put $trainer/ports '[{"containerPort": 8080, "hostPort": 8080}]')"
# Pod validation wants hostNetwork beside hostProcess, so that control cannot be broken alone.
corpus host-process refused refused "$(put $pod/os '{"name": "windows"}')" \
  "$(put $pod/hostNetwork true)" \
  "$(put $pod/securityContext '{"runAsNonRoot": true, "windowsOptions": {"hostProcess": true}}')"
corpus apparmor-unconfined refused refused "$hardened" \
  "$(put $pod/securityContext/appArmorProfile '{"type": "Unconfined"}')"
corpus apparmor-annotation-unconfined refused refused "$hardened" \
  "$(put /spec/template/metadata \
    '{"annotations": {"container.apparmor.security.beta.kubernetes.io/trainer": "unconfined"}}')"
corpus selinux-type refused refused "$hardened" \
  "$(put $trainer/securityContext/seLinuxOptions '{"type": "spc_t"}')"
corpus selinux-user refused refused "$hardened" \
  "$(put $pod/securityContext/seLinuxOptions '{"user": "system_u"}')"
corpus selinux-role refused refused "$hardened" \
  "$(put $trainer/securityContext/seLinuxOptions '{"role": "system_r"}')"
corpus seccomp-unconfined-pod refused refused "$hardened" \
  "$(put $pod/securityContext/seccompProfile '{"type": "Unconfined"}')"
corpus seccomp-unconfined-container refused refused "$hardened" \
  "$(put $trainer/securityContext/seccompProfile '{"type": "Unconfined"}')"
corpus sysctl-unsafe refused refused "$hardened" \
  "$(put $pod/securityContext/sysctls '[{"name": "kernel.msgmax", "value": "65536"}]')"
corpus liveness-probe-http-host refused refused "$hardened" \
  "$(put $trainer/livenessProbe '{"httpGet": {"port": 8080, "host": "10.0.0.1"}}')"
corpus readiness-probe-tcp-host refused refused "$hardened" \
  "$(put $trainer/readinessProbe '{"tcpSocket": {"port": 8080, "host": "10.0.0.1"}}')"
corpus startup-probe-http-host refused refused "$hardened" \
  "$(put $trainer/startupProbe '{"httpGet": {"port": 8080, "host": "metadata.internal"}}')"
corpus post-start-http-host refused refused "$hardened" \
  "$(put $trainer/lifecycle '{"postStart": {"httpGet": {"port": 8080, "host": "10.0.0.1"}}}')"
corpus pre-stop-tcp-host refused refused "$hardened" \
  "$(put $trainer/lifecycle '{"preStop": {"tcpSocket": {"port": 8080, "host": "10.0.0.1"}}}')"
corpus probe-host-loopback-ipv4 refused refused "$hardened" \
  "$(put $trainer/readinessProbe '{"httpGet": {"port": 8080, "host": "127.0.0.1"}}')"
corpus probe-host-loopback-ipv6 refused refused "$hardened" \
  "$(put $trainer/readinessProbe '{"tcpSocket": {"port": 8080, "host": "::1"}}')"
corpus sidecar-startup-probe-host refused refused "$hardened" \
  "$(sidecar '"startupProbe": {"tcpSocket": {"port": 15021, "host": "10.0.0.1"}}')"
corpus after-tuning-privileged refused refused "$hardened" \
  "$(after_tuning '"securityContext": {"privileged": true}')"
corpus after-tuning-probe-host refused refused "$hardened" \
  "$(after_tuning "\"securityContext\": $restricted_container,
    \"livenessProbe\": {\"httpGet\": {\"port\": 8080, \"host\": \"10.0.0.1\"}}")"

# Restricted, each control broken once.
corpus volume-type-nfs admitted refused "$hardened" \
  "$(put $pod/volumes '[{"name": "data", "nfs": {"server": "nfs.example.org", "path": "/data"}}]')"
corpus privilege-escalation-unset admitted refused "$hardened" \
  "$(remove $trainer/securityContext/allowPrivilegeEscalation)"
corpus privilege-escalation-true admitted refused "$hardened" \
  "$(put $trainer/securityContext/allowPrivilegeEscalation true)"
corpus run-as-non-root-unset admitted refused "$hardened" \
  "$(remove $pod/securityContext/runAsNonRoot)"
corpus run-as-non-root-false-in-container admitted refused "$hardened" \
  "$(put $trainer/securityContext/runAsNonRoot false)"
# Every container says true, but the Pod says false.
corpus run-as-non-root-false-in-pod admitted refused "$hardened" \
  "$(put $pod/securityContext/runAsNonRoot false)" \
  "$(put $trainer/securityContext/runAsNonRoot true)"
corpus run-as-user-0-in-pod admitted refused "$hardened" "$(put $pod/securityContext/runAsUser 0)"
corpus run-as-user-0-in-container admitted refused "$hardened" \
  "$(put $trainer/securityContext/runAsUser 0)"
corpus seccomp-unset admitted refused "$hardened" "$(remove $pod/securityContext/seccompProfile)"
corpus capabilities-not-dropped admitted refused "$hardened" \
  "$(remove $trainer/securityContext/capabilities)"
corpus init-container-not-hardened admitted refused "$hardened" \
  "$(put $pod/initContainers '[{"name": "setup", "image": "example.org/setup:1.0"}]')"

# --- Verdicts -------------------------------------------------------------------------------------

# The base job in namespace $1, changed by case $2.
job_of() {
  local operations
  operations=$(put /metadata/namespace "\"$1\"")${patch_of[$2]:+, ${patch_of[$2]}}
  kubectl patch --local -f "$work/base.yaml" --type json -o json -p "[$operations]"
}

# The errors of a kubectl call, without the warnings the server adds (deprecated fields).
errors_only() { grep -v '^Warning: ' || true; }

# Pod Security's verdict on the Pods the operator would make of job file $1: "admitted", or
# "refused: <its reasons>". Anything else (the helper refusing the job, a Pod failing validation)
# is an error: the case would test nothing.
pod_security_verdict() {
  local pods errors
  pods=$("$pods_of" "$1") || return 1
  if errors=$(kubectl create --dry-run=server -f - <<<"$pods" 2>&1 >/dev/null); then
    echo admitted
    return
  fi
  errors=$(errors_only <<<"$errors")
  if [[ -z $errors ]] || grep -qv 'violates PodSecurity' <<<"$errors"; then
    echo "not Pod Security's refusal: $errors"
    return 1
  fi
  echo "refused: $(sed 's/.*violates PodSecurity "[a-z]*:[a-z0-9.]*": //' <<<"$errors" |
    paste -sd ';')"
}

# The policy's verdict on job file $1: "admitted", or "refused: <the rule its message names>".
# A refusal must be one of the policy's rules: an error evaluating one (which failurePolicy Fail
# also turns into a refusal) or the CRD's schema refusing the job is an error.
policy_verdict() {
  local errors rule
  if errors=$(kubectl create --dry-run=server -f "$1" 2>&1 >/dev/null); then
    echo admitted
    return
  fi
  local denied="ValidatingAdmissionPolicy '[^']*' with binding '[^']*' denied request"
  errors=$(errors_only <<<"$errors")
  rule=$(sed -n "s/.*$denied: .*(\(Pod Security [^)]*\))\$/\1/p" <<<"$errors")
  if [[ -z $rule ]]; then
    echo "not a rule of the policy: $errors"
    return 1
  fi
  echo "refused: $rule"
}

declare -A pod_security policy
# Both verdicts on case $1 under profile $2, kept in pod_security and policy.
judge() {
  local name=$1 profile=$2 job=$work/$1-$2.json
  job_of "${namespace_of[$profile]}" "$name" >"$job" || return 1
  pod_security[$name/$profile]=$(pod_security_verdict "$job") || {
    echo "${pod_security[$name/$profile]}"
    return 1
  }
  policy[$name/$profile]=$(policy_verdict "$job") || {
    echo "${policy[$name/$profile]}"
    return 1
  }
}
verdict() { echo "${1%%:*}"; }

# Case $1 under profile $2: Pod Security's verdict is the one the corpus says, which proves that the
# case breaks what it means to (or nothing).
pod_security_as_expected() {
  judge "$1" "$2" || return 1
  local got=${pod_security[$1/$2]}
  [[ $(verdict "$got") == "${expected[$1/$2]}" ]] || {
    echo "Pod Security: $got; the corpus expects ${expected[$1/$2]}"
    return 1
  }
}
# The claim of the chart: the policy's verdict on the job is Pod Security's on its Pods.
policy_agrees() {
  local ours=${policy[$1/$2]} theirs=${pod_security[$1/$2]}
  [[ $(verdict "$ours") == "$(verdict "$theirs")" ]] || {
    echo "the policy: $ours"
    echo "Pod Security: $theirs"
    return 1
  }
}

# --- Against the API server -----------------------------------------------------------------------

# The chart once per profile, its policy bound to the namespaces Pod Security holds to that profile
# and labelled for this run. Only the policy matters here: no operator runs, and nothing is added
# to the built-in roles.
install_release() {
  local profile=$1
  cat >"$work/$profile-values.yaml" <<VALUES
replicaCount: 0
aggregateToDefaultRoles: false
admissionPolicy:
  enabled: true
  profile: $profile
  namespaceSelector:
    matchLabels:
      pod-security.kubernetes.io/enforce: $profile
      autotune.io/pod-security-test: "$run_id"
VALUES
  helm install "$release-$profile" "$chart" --namespace "$release_ns" --create-namespace \
    -f "$work/$profile-values.yaml" >/dev/null
}
labelled_namespace() {
  local profile=$1 namespace=${namespace_of[$1]}
  kubectl create namespace "$namespace" &&
    kubectl label namespace "$namespace" "pod-security.kubernetes.io/enforce=$profile" \
      pod-security.kubernetes.io/enforce-version=latest "autotune.io/pod-security-test=$run_id"
}
established() {
  kubectl wait --for condition=Established --timeout=60s crd/autotunejobs.autotune.io
}
# Both admissions read their configuration from caches: a hostNetwork job refused by both says that
# the namespace's label and the policy have arrived.
both_refuse_host_network() {
  judge host-network "$1" &&
    [[ $(verdict "${pod_security[host-network/$1]}") == refused ]] &&
    [[ $(verdict "${policy[host-network/$1]}") == refused ]]
}

for profile in "${profiles[@]}"; do
  require "helm install with admissionPolicy.profile=$profile" install_release "$profile"
  require "namespace ${namespace_of[$profile]} is labelled enforce=$profile" \
    labelled_namespace "$profile"
done
require "the CRD is established" established
for profile in "${profiles[@]}"; do
  require "within 60s Pod Security and the $profile policy both refuse hostNetwork" \
    eventually 60 both_refuse_host_network "$profile"
done

for name in "${names[@]}"; do
  for profile in "${profiles[@]}"; do
    if check "$name under $profile: Pod Security ${expected[$name/$profile]} the Pods" \
      pod_security_as_expected "$name" "$profile"; then
      expect "$name under $profile: the policy's verdict on the job is the same" \
        policy_agrees "$name" "$profile"
    fi
  done
done

# Every verdict with its reason, for whoever reads the log.
echo "# case: under baseline, Pod Security / the policy; under restricted, the same"
for name in "${names[@]}"; do
  line="# $name:"
  for profile in "${profiles[@]}"; do
    line+=" $profile ${pod_security[$name/$profile]:-?} / ${policy[$name/$profile]:-?};"
  done
  echo "$line"
done

if ((failures > 0)); then
  echo "pod_security_test: $failures checks failed"
  exit 1
fi
echo "pod_security_test: all checks passed"
