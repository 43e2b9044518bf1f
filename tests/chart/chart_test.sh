#!/usr/bin/env bash
# The Helm chart charts/autotune-operator, checked with helm itself and against a real API server:
# lint, renders for the default, namespaced and monitoring values, least-privilege RBAC, the schema
# refusing bad values, the CRD copy, the Grafana dashboard, the server accepting every rendered
# object (the ServiceMonitor and PrometheusRule against prometheus-operator's CRDs), and helm
# install / uninstall. The alerts' own tests are in alerts_test.sh.
#
#   tests/chart/chart_test.sh [SOURCE_DIR]
#
# Starts its own control plane with scripts/controlplane, or uses the cluster of
# $AUTOTUNE_TEST_KUBECONFIG (with helm and kubectl on PATH); every name it creates there carries a
# random suffix, and it removes what it created, except the CRDs: its own, which Helm never deletes
# either, and prometheus-operator's, created only where the cluster lacks them.
set -euo pipefail

source_dir=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
chart=$source_dir/charts/autotune-operator
crd=crds/autotunejobs.autotune.io.yaml
here=$source_dir/tests/chart
# shellcheck source=tests/support/checks.sh
source "$source_dir/tests/support/checks.sh"
# shellcheck source=tests/support/cluster.sh
source "$source_dir/tests/support/cluster.sh"
work=$(mktemp -d /tmp/autotune-chart-test.XXXXXX)

# Names unique to this run, so that runs sharing one cluster do not meet.
run_id=$((RANDOM % 90000 + 10000))
release=autotune-$run_id
release_ns=autotune-chart-$run_id
team_a=team-a-$run_id
team_b=team-b-$run_id
# The releases actually installed; the renders above are only templated and dry-run.
installed=install-$run_id
installed_ns=install-ns-$run_id

# helm keeps its caches and settings in the work folder, not in the caller's home.
export HELM_CACHE_HOME=$work/helm/cache HELM_CONFIG_HOME=$work/helm/config
export HELM_DATA_HOME=$work/helm/data

cleanup() {
  if $own_controlplane; then
    "$source_dir/scripts/controlplane" down >/dev/null 2>&1 || true
  elif [[ -n ${KUBECONFIG:-} ]]; then
    helm uninstall "$installed" -n "$release_ns" >/dev/null 2>&1 || true
    helm uninstall "$installed_ns" -n "$release_ns" >/dev/null 2>&1 || true
    kubectl delete namespace "$release_ns" "$team_a" "$team_b" --wait=false \
      --ignore-not-found >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT


# The controller manager folds aggregated ClusterRoles into edit and view.
use_cluster "$work" "helm kubectl" --with-controller-manager
command -v python3 >/dev/null || { echo "chart_test: python3 is needed"; exit 1; }

manifests() { python3 "$here/manifests.py" "$@"; }

# helm template's YAML as a stream of JSON objects. kubectl parses it: `label --local` removing a
# label no object has changes nothing and needs no server, and prints each object as JSON.
to_json() { kubectl label --local -f "$1" -o json autotune.invalid/unused- ; }

render() {
  local name=$1
  shift
  helm template "$release" "$chart" --namespace "$release_ns" "$@" >"$work/$name.yaml" &&
    to_json "$work/$name.yaml" >"$work/$name.json"
}

cat >"$work/namespaced-values.yaml" <<VALUES
watchNamespaces: [$team_a, $team_b]
VALUES
cat >"$work/monitoring-values.yaml" <<'VALUES'
serviceMonitor: {enabled: true}
dashboard: {enabled: true}
prometheusRule: {enabled: true}
VALUES
values_files=(namespaced-values.yaml monitoring-values.yaml)

# --- Static checks: helm alone --------------------------------------------------------------------

lint_strict() {
  helm lint --strict "$chart" || return 1
  local values
  for values in "${values_files[@]}"; do
    helm lint --strict "$chart" -f "$work/$values" || return 1
  done
}

expect "helm lint passes" helm lint "$chart"
expect "helm lint --strict passes for the default, namespaced and monitoring values" lint_strict

# What users install is the packaged chart, as `make chart` makes it: the installs and upgrades
# below take the archive, so that a file the package leaves out (.helmignore) fails them.
chart_version=$(sed -n 's/^version: *//p' "$chart/Chart.yaml")
package=$work/package/autotune-operator-$chart_version.tgz
packaged() {
  helm package "$chart" --destination "$work/package" >/dev/null && test -s "$package" &&
    helm lint --strict "$package"
}
require "helm package makes autotune-operator-$chart_version.tgz, and helm lint passes on it" \
  packaged
require "helm template renders the default values" render default
require "helm template renders watchNamespaces: [$team_a, $team_b]" \
  render namespaced -f "$work/namespaced-values.yaml"
require "helm template renders serviceMonitor, dashboard and prometheusRule enabled" \
  render monitoring -f "$work/monitoring-values.yaml"

# helm template must fail, and its message must name what was wrong ($1, a pattern).
refused() {
  local pattern=$1 output
  shift
  if output=$(helm template "$release" "$chart" --namespace "$release_ns" "$@" 2>&1); then
    echo "helm template $* was accepted"
    return 1
  fi
  grep -q -- "$pattern" <<<"$output" || {
    echo "helm template $* failed without naming $pattern:"
    echo "$output"
    return 1
  }
}

expect "values.schema.json rejects replicaCount=abc" refused replicaCount --set replicaCount=abc
expect "values.schema.json rejects an unknown top-level key (a typo)" \
  refused replicas --set replicas=3
expect "values.schema.json rejects an unknown log level" refused logLevel --set logLevel=verbose
expect "two replicas without leader election are refused" \
  refused leaderElection --set leaderElection.enabled=false
expect "Kubernetes older than 1.30 is refused" refused kubeVersion --kube-version 1.29.0

# The metrics Service's name as the documents give it (docs/operations.md, the READMEs, the
# alerts' `job`): <release>-autotune-operator-metrics, or <release>-metrics when the release name
# already contains autotune-operator.
metrics_service_named() {
  local name expected
  for name in autotune autotune-operator ml-autotune-operator-2; do
    case $name in
      *autotune-operator*) expected=$name-metrics ;;
      *) expected=$name-autotune-operator-metrics ;;
    esac
    helm template "$name" "$chart" --namespace "$release_ns" --show-only templates/service.yaml |
      grep -x "  name: $expected" >/dev/null || {
      echo "the release $name has no Service $expected"
      return 1
    }
  done
}
expect "the metrics Service is <release>-autotune-operator-metrics, or <release>-metrics when the release name contains autotune-operator" \
  metrics_service_named

crd_identical() {
  [[ -f $source_dir/$crd ]] || { echo "$crd is missing"; return 1; }
  cmp "$source_dir/$crd" "$chart/$crd" || {
    echo "the chart's CRD differs from $crd: copy it with"
    echo "  cp $crd charts/autotune-operator/$crd"
    return 1
  }
}
expect "the chart's CRD is a byte-identical copy of $crd" crd_identical

no_wildcards() {
  local name
  for name in default namespaced monitoring; do
    manifests wildcards <"$work/$name.json" || return 1
  done
}
expect "no RBAC rule grants a wildcard" no_wildcards

# What the operator calls on objects in the namespaces it watches (scope $1), as manifests.py
# grants prints it: scope, API group, resource, sorted verbs.
namespaced_grants() {
  local scope=$1
  printf "$scope %s\n" \
    "autotune.io autotunejobs create,list,watch" \
    "autotune.io autotunejobs/status update" \
    "autotune.io autotunejobs/finalizers update" \
    "core pods create,delete,get,list,patch,watch" \
    "core configmaps create,delete,get,list,patch,watch" \
    "core events create" \
    "core services create,delete,get" \
    "batch jobs create,delete,get,list,watch"
}
common_grants() {
  echo "cluster core nodes get,list,watch"
  echo "cluster authentication.k8s.io tokenreviews create"
  echo "cluster authorization.k8s.io subjectaccessreviews create"
  echo "$release_ns coordination.k8s.io leases create,get,update"
  echo "$release_ns core secrets create,get"
}

# The render $1 grants exactly the lines on stdin, no more and no fewer.
grants_exactly() {
  diff -u --label expected --label "$1" <(sort) <(manifests grants <"$work/$1.json" | sort)
}
expect "the default render grants exactly the operator's calls, cluster-wide" \
  grants_exactly default < <({ namespaced_grants cluster; common_grants; })
expect "the namespaced render grants them in $team_a and $team_b only" \
  grants_exactly namespaced < <({ namespaced_grants "$team_a"; namespaced_grants "$team_b"
    common_grants; })

kueue_grants() {
  render kueue --set kueue.enabled=true --set watchNamespaces="{$team_a}" || return 1
  grants_exactly kueue < <({ namespaced_grants "$team_a"
    echo "$team_a kueue.x-k8s.io workloads list,watch"
    echo "$team_a kueue.x-k8s.io localqueues list,watch"
    common_grants; }) &&
    manifests deployment 2 -- --kueue --kueue-workload-selector=autotune.io/job \
      <"$work/kueue.json" &&
    manifests absent-flag --kueue <"$work/default.json"
}
expect "kueue.enabled passes --kueue and grants list and watch on workloads and localqueues" \
  kueue_grants

no_cluster_pods_or_configmaps() {
  ! manifests grants <"$work/namespaced.json" | grep -E '^cluster core (pods|configmaps) '
}
expect "the namespaced render has no ClusterRole granting pods or configmaps" \
  no_cluster_pods_or_configmaps

all_bound() {
  local name
  for name in default namespaced; do
    manifests bound <"$work/$name.json" || return 1
  done
}
expect "every Role and ClusterRole but the aggregated ones and the scrapers' is bound to the chart's ServiceAccount" \
  all_bound

# /metrics over HTTPS by default, for tokens allowed the URL: the chart grants that right in a
# ClusterRole of its own, bound to nobody (Prometheus' ServiceAccount is the user's to bind).
# metrics.secure=false serves plain HTTP and grants the operator no reviews.
plain_metrics() {
  render plain-metrics --set metrics.secure=false || return 1
  manifests deployment 2 -- --metrics-secure=false <"$work/plain-metrics.json" &&
    ! manifests grants <"$work/plain-metrics.json" | grep -E 'tokenreviews|subjectaccessreviews' &&
    [[ -z $(manifests reader-roles <"$work/plain-metrics.json") ]]
}
secure_metrics() {
  [[ $(manifests reader-roles <"$work/default.json") == "metrics-reader /metrics get bound=0" ]] &&
    manifests deployment 2 -- --metrics-secure=true <"$work/default.json" &&
    manifests absent-flag --metrics-cert-dir <"$work/default.json" &&
    render mounted-cert --set metrics.certSecret=operator-tls &&
    manifests deployment 2 -- --metrics-cert-dir <"$work/mounted-cert.json"
}
expect "/metrics is served over HTTPS with token checks by default, a reader role bound to nobody" \
  secure_metrics
expect "metrics.secure=false serves plain HTTP and grants no token or access reviews" plain_metrics

# The aggregated ClusterRoles of render $1 are exactly the lines on stdin.
aggregation_is() {
  diff -u --label expected --label "$1" <(sort) <(manifests aggregation <"$work/$1.json" | sort)
}
expect "edit and admin may do anything to AutotuneJobs, view may read them (aggregated)" \
  aggregation_is default <<LINES
edit admin,edit autotunejobs create,delete,deletecollection,get,list,patch,update,watch
edit admin,edit autotunejobs/status get,list,watch
view view autotunejobs get,list,watch
view view autotunejobs/status get,list,watch
LINES
without_aggregation() {
  render plain --set aggregateToDefaultRoles=false && aggregation_is plain </dev/null
}
expect "aggregateToDefaultRoles=false renders no aggregated ClusterRole" without_aggregation
without_policy() {
  ! manifests objects <"$work/default.json" | grep -E '^ValidatingAdmissionPolicy'
}
expect "the admission policy is off by default" without_policy
expect "values.schema.json rejects an unknown Pod Security profile" \
  refused profile --set admissionPolicy.profile=privileged

operator_flags=(--metrics-bind-address :8080 --health-probe-bind-address :8081 --leader-elect
  --node-selector=nvidia.com/gpu.present=true --workers 4 --qps 50 --burst 100 --log-level info)
default_deployment() {
  manifests deployment 2 -- "${operator_flags[@]}" <"$work/default.json" &&
    manifests absent-flag --namespace <"$work/default.json"
}
expect "the Deployment: 2 replicas, leader election, hardened, probes, POD_NAMESPACE, flags" \
  default_deployment
every_node() {
  render every-node --set gpuNodeSelector= &&
    manifests deployment 2 -- --node-selector= <"$work/every-node.json"
}
expect "gpuNodeSelector set empty watches every Node (--node-selector=)" every_node
expect "the namespaced Deployment passes --namespace $team_a,$team_b" \
  manifests deployment 2 -- --namespace "$team_a,$team_b" <"$work/namespaced.json"
single_without_election() {
  render single --set replicaCount=1 --set leaderElection.enabled=false &&
    manifests deployment 1 <"$work/single.json" &&
    manifests absent-flag --leader-elect <"$work/single.json" &&
    ! manifests objects <"$work/single.json" | grep -E '^Role(Binding)? .*leader-election'
}
expect "one replica without leader election: no --leader-elect and no Lease Role" \
  single_without_election

expect "the metrics Service selects the operator; the ServiceMonitor selects the Service" \
  manifests service <"$work/monitoring.json"
monitoring_only_when_enabled() {
  local objects
  objects=$(manifests objects <"$work/default.json")
  if grep -E '^(ServiceMonitor |PrometheusRule |ConfigMap .*-dashboard$)' <<<"$objects"; then
    echo "rendered with serviceMonitor, dashboard and prometheusRule disabled"
    return 1
  fi
  objects=$(manifests objects <"$work/monitoring.json")
  grep -q '^ServiceMonitor ' <<<"$objects" || { echo "no ServiceMonitor when enabled"; return 1; }
  grep -q '^PrometheusRule ' <<<"$objects" || { echo "no PrometheusRule when enabled"; return 1; }
  grep -q '^ConfigMap .*-dashboard$' <<<"$objects" || {
    echo "no dashboard ConfigMap when enabled"
    return 1
  }
}
expect "the ServiceMonitor, PrometheusRule and dashboard ConfigMap exist only when enabled" \
  monitoring_only_when_enabled
# Label checks read the whole list (grep without -q), so that the writer never meets a closed pipe.
has_label() {
  manifests labels "$1" <"$work/monitoring.json" | grep -x "$2" >/dev/null || {
    echo "the $1 lacks the label $2"
    return 1
  }
}
expect "the ServiceMonitor carries the label release=prometheus" \
  has_label ServiceMonitor release=prometheus
expect "the PrometheusRule carries the label release=prometheus" \
  has_label PrometheusRule release=prometheus

# honorLabels is the user's call (a hardened Prometheus overrides it anyway), and relabelings
# reach the endpoint as given.
cat >"$work/strict-monitoring-values.yaml" <<'VALUES'
serviceMonitor:
  enabled: true
  honorLabels: false
  metricRelabelings: [{action: drop, sourceLabels: [__name__], regex: autotune_job_trials}]
VALUES
strict_scrape_rendered() {
  render strict-monitoring -f "$work/strict-monitoring-values.yaml" || return 1
  local strict default
  strict=$(manifests scrape-endpoint <"$work/strict-monitoring.json") || return 1
  default=$(manifests scrape-endpoint <"$work/monitoring.json") || return 1
  printf 'given:\n%s\ndefault:\n%s\n' "$strict" "$default"
  local https='scheme=https tlsConfig={"insecureSkipVerify": true} bearerTokenFile=/var/run/secrets/kubernetes.io/serviceaccount/token'
  [[ $strict == $'honorLabels=false\nmetricRelabelings=[{"action": "drop", "regex": "autotune_job_trials", "sourceLabels": ["__name__"]}]\n'"$https" ]] &&
    [[ $default == $'honorLabels=true\nmetricRelabelings=null\n'"$https" ]]
}
expect "serviceMonitor.honorLabels and metricRelabelings reach the ServiceMonitor's endpoint" \
  strict_scrape_rendered

dashboard=$chart/dashboards/autotune.json
expect "the dashboard JSON parses" python3 -m json.tool "$dashboard"
expect "the dashboard shows every operator metric, and only those, through \${datasource}" \
  python3 "$here/dashboard.py" "$dashboard"
dashboard_configmap() {
  has_label ConfigMap grafana_dashboard=1 &&
    manifests dashboard-data <"$work/monitoring.json" >"$work/dashboard-data.json" &&
    diff <(python3 -m json.tool "$dashboard") <(python3 -m json.tool "$work/dashboard-data.json")
}
expect "the dashboard ConfigMap carries grafana_dashboard=1 and the dashboard file" \
  dashboard_configmap

# --- Against the API server -----------------------------------------------------------------------

create_namespaces() {
  local namespace
  for namespace in "$release_ns" "$team_a" "$team_b"; do
    kubectl create namespace "$namespace" || return 1
  done
}
require "the test's namespaces can be created" create_namespaces

# prometheus-operator's CRDs, taken from its Go module by scripts/controlplane, so that the API
# server checks the ServiceMonitor and the PrometheusRule against their schemas too. A cluster that
# has them already keeps its own.
monitoring_crds() {
  local dir name
  dir=$("$source_dir/scripts/controlplane" monitoring-crds) || return 1
  for name in servicemonitors prometheusrules; do
    kubectl get crd "$name.monitoring.coreos.com" >/dev/null 2>&1 ||
      kubectl apply --server-side -f "$dir/$name.yaml" || return 1
  done
  kubectl wait --for condition=Established --timeout=60s \
    crd/servicemonitors.monitoring.coreos.com crd/prometheusrules.monitoring.coreos.com
}
expect "prometheus-operator's ServiceMonitor and PrometheusRule CRDs are established" \
  monitoring_crds

# Server-side dry runs: the API server validates every object as it would on install (schemas,
# names, RBAC rules) and stores nothing. The CRD itself is checked the same way, server-side so
# that its size does not meet the last-applied annotation's limit, and forcing conflicts, which a
# CRD that Helm installed on a shared cluster would otherwise raise. Only the server's complaints
# are shown.
accepted() { kubectl apply --dry-run=server "$@" >/dev/null; }
expect "the API server accepts the CRD (server-side dry run)" \
  accepted --server-side --force-conflicts -f "$chart/$crd"
expect "the API server accepts the default render" accepted -f "$work/default.yaml"
expect "the API server accepts the namespaced render" accepted -f "$work/namespaced.yaml"
expect "the API server accepts the monitoring render, ServiceMonitor and PrometheusRule included" \
  accepted -f "$work/monitoring.yaml"

# The permissions of user $1, as the API server's authorizer sees them, against the lines on
# stdin: "yes|no" and the arguments of `kubectl auth can-i`.
user_access_is() {
  local user=$1 expected verb mismatches=0
  while read -r expected verb; do
    local answer
    # shellcheck disable=SC2086 # the line holds several arguments
    answer=$(kubectl auth can-i $verb --as="$user" 2>/dev/null || true)
    if [[ $answer != "$expected" ]]; then
      echo "can-i $verb: $answer, expected $expected"
      mismatches=$((mismatches + 1))
    fi
  done
  ((mismatches == 0))
}

# The same for ServiceAccount $1 (namespace/name).
access_is() { user_access_is "system:serviceaccount:${1%/*}:${1#*/}"; }

installed_objects() {
  helm install "$installed" "$package" --namespace "$release_ns" >"$work/install.out" || return 1
  grep -q 'kubectl apply -f' "$work/install.out" || {
    echo "NOTES.txt did not show how to apply a job:"
    cat "$work/install.out"
    return 1
  }
  local fullname=$installed-autotune-operator
  kubectl get crd autotunejobs.autotune.io &&
    kubectl -n "$release_ns" get deployment "$fullname" &&
    kubectl -n "$release_ns" get serviceaccount "$fullname" &&
    kubectl get clusterrole "$fullname" "$fullname-nodes" &&
    kubectl -n "$release_ns" get service "$fullname-metrics"
}
require "helm install creates the CRD, Deployment, ServiceAccount, ClusterRoles and Service" \
  installed_objects

established() {
  kubectl wait --for condition=Established --timeout=60s crd/autotunejobs.autotune.io
}
expect "the CRD is established" established

expect "the installed ServiceAccount may make the operator's calls and no others" \
  access_is "$release_ns/$installed-autotune-operator" <<ACCESS
yes list autotunejobs.autotune.io --all-namespaces
yes watch autotunejobs.autotune.io -n $team_a
yes update autotunejobs.autotune.io --subresource=status -n $team_a
no patch autotunejobs.autotune.io --subresource=status -n $team_a
yes update autotunejobs.autotune.io --subresource=finalizers -n $team_a
no update autotunejobs.autotune.io -n $team_a
no delete autotunejobs.autotune.io -n $team_a
yes create autotunejobs.autotune.io -n $team_a
yes create pods -n $team_a
yes delete pods -n $team_b
no update pods -n $team_a
yes create configmaps -n $team_a
yes patch configmaps -n $team_a
no update configmaps -n $team_a
yes list configmaps -n $team_a
yes watch configmaps -n $team_a
yes delete configmaps -n $team_a
yes create events -n $team_a
no patch events -n $team_a
no create events.events.k8s.io -n $team_a
yes create jobs.batch -n $team_a
yes get jobs.batch -n $team_a
yes delete jobs.batch -n $team_a
yes watch jobs.batch -n $team_b
no update jobs.batch -n $team_a
yes create services -n $team_a
yes delete services -n $team_b
yes get services -n $team_a
yes list nodes
yes get nodes
no update nodes
yes update leases.coordination.k8s.io -n $release_ns
no update leases.coordination.k8s.io -n $team_a
no get secrets -n $release_ns
yes get secrets/$installed-autotune-operator-measurement-key -n $release_ns
yes create secrets -n $release_ns
no create secrets -n $team_a
no list secrets -n $release_ns
yes create tokenreviews.authentication.k8s.io
yes create subjectaccessreviews.authorization.k8s.io
no get /metrics
no create pods --subresource=exec -n $team_a
ACCESS

# People's rights come from the built-in roles: alice holds edit in $team_a, bob holds view.
bind_people() {
  kubectl create rolebinding alice-edit --clusterrole=edit --user=alice -n "$team_a" &&
    kubectl create rolebinding bob-view --clusterrole=view --user=bob -n "$team_a"
}
people_access() {
  user_access_is alice <<ACCESS || return 1
yes create autotunejobs.autotune.io -n $team_a
yes delete autotunejobs.autotune.io -n $team_a
yes get autotunejobs.autotune.io --subresource=status -n $team_a
no update autotunejobs.autotune.io --subresource=status -n $team_a
no create autotunejobs.autotune.io -n $team_b
ACCESS
  user_access_is bob <<ACCESS
yes list autotunejobs.autotune.io -n $team_a
yes watch autotunejobs.autotune.io -n $team_a
no create autotunejobs.autotune.io -n $team_a
no delete autotunejobs.autotune.io -n $team_a
ACCESS
}
require "alice is bound to edit and bob to view in $team_a" bind_people
expect "within 60s edit may create and delete AutotuneJobs and view only read them" \
  eventually 60 people_access

# --- The admission policy: AutotuneJob templates held to a Pod Security profile ------------------

# examples/gpt2-large.yaml in $team_a, changed by the JSON patch operations $1 (none when empty).
example_job() {
  kubectl patch --local -f "$source_dir/examples/gpt2-large.yaml" --type json -o json \
    -p "[{\"op\": \"replace\", \"path\": \"/metadata/namespace\", \"value\": \"$team_a\"}${1:+, $1}]"
}
admitted() { example_job "${1:-}" | kubectl create --dry-run=server -f - >/dev/null; }
# The example changed by $1 is refused, and the message names $2.
policy_refuses() {
  local output
  if output=$(example_job "$1" | kubectl create --dry-run=server -f - 2>&1); then
    echo "admitted"
    return 1
  fi
  grep -q -- "$2" <<<"$output" || { echo "$output"; return 1; }
}
policy() {
  helm upgrade "$installed" "$package" --namespace "$release_ns" --reuse-values \
    --set admissionPolicy.enabled=true --set admissionPolicy.profile="$1" >/dev/null
}
trainer=/spec/template/spec/containers/0
host_network='{"op": "add", "path": "/spec/template/spec/hostNetwork", "value": true}'
privileged_after_tuning='{"op": "add", "path": "/spec/afterTuning", "value": {"spec": {"template":
  {"spec": {"restartPolicy": "Never", "containers": [{"name": "trainer", "image": "x",
  "securityContext": {"privileged": true}}]}}}}}'
hardened='{"op": "add", "path": "/spec/template/spec/securityContext", "value": {"runAsNonRoot":
  true, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}}},
  {"op": "add", "path": "'$trainer'/securityContext", "value": {"allowPrivilegeEscalation": false,
  "capabilities": {"drop": ["ALL"]}}}'

require "helm upgrade turns the admission policy on, profile baseline" policy baseline
expect "within 30s a template with hostNetwork is refused, the message naming hostNetwork" \
  eventually 30 policy_refuses "$host_network" hostNetwork
expect "the GPT2-large example as shipped is admitted under baseline" admitted
expect "a privileged container is refused" policy_refuses \
  '{"op": "add", "path": "'$trainer'/securityContext", "value": {"privileged": true}}' privileged
expect "a hostPath volume is refused" policy_refuses \
  '{"op": "add", "path": "/spec/template/spec/volumes/-",
    "value": {"name": "host", "hostPath": {"path": "/"}}}' hostPath
expect "adding SYS_ADMIN is refused" policy_refuses \
  '{"op": "add", "path": "'$trainer'/securityContext",
    "value": {"capabilities": {"add": ["SYS_ADMIN"]}}}' capabilities
expect "a privileged container in the afterTuning Job is refused" \
  policy_refuses "$privileged_after_tuning" privileged
require "helm upgrade switches the profile to restricted" policy restricted
expect "within 30s the example, which runs as root, is refused under restricted" \
  eventually 30 policy_refuses '' 'Pod Security restricted'
expect "the example with the securityContext restricted asks for is admitted" admitted "$hardened"
expect "hostNetwork is still refused under restricted" \
  policy_refuses "$hardened, $host_network" hostNetwork

expect "helm install with watchNamespaces succeeds" \
  helm install "$installed_ns" "$package" --namespace "$release_ns" \
  -f "$work/namespaced-values.yaml"
expect "the namespaced ServiceAccount may work in $team_a and $team_b only" \
  access_is "$release_ns/$installed_ns-autotune-operator" <<ACCESS
yes create pods -n $team_a
yes list autotunejobs.autotune.io -n $team_b
yes create configmaps -n $team_b
no create pods -n default
no list pods --all-namespaces
no list autotunejobs.autotune.io --all-namespaces
no get configmaps -n $release_ns
yes list nodes
yes create leases.coordination.k8s.io -n $release_ns
ACCESS

uninstalled() {
  helm uninstall "$installed" --namespace "$release_ns" &&
    helm uninstall "$installed_ns" --namespace "$release_ns" || return 1
  local left
  left=$(kubectl get deployments,serviceaccounts,services,roles,rolebindings -A -o name \
    -l "app.kubernetes.io/instance in ($installed,$installed_ns)"
    kubectl get clusterroles,clusterrolebindings,validatingadmissionpolicies,validatingadmissionpolicybindings \
      -o name \
      -l "app.kubernetes.io/instance in ($installed,$installed_ns)") || return 1
  [[ -z $left ]] || { echo "left behind: $left"; return 1; }
  # Helm never deletes a CRD: that would delete every AutotuneJob with it.
  kubectl get crd autotunejobs.autotune.io
}
expect "helm uninstall removes both releases' objects and keeps the CRD" uninstalled

if ((failures > 0)); then
  echo "chart_test: $failures checks failed"
  exit 1
fi
echo "chart_test: all checks passed"
