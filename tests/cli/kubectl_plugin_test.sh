#!/usr/bin/env bash
# kubectl-autotune, the kubectl plugin, against a real kube-apiserver: kubectl finds it on the
# PATH; `kubectl autotune report` draws a job still searching from its status and a finished one
# from its output ConfigMap; `kubectl autotune best` prints the ConfigMap's ds_config.json;
# `kubectl autotune plan -f` is `autotune plan`; the namespace comes from -n, else from the
# kubeconfig context; a job that does not exist is named in the error. Kubeconfigs as clusters
# hand them out: $KUBECONFIG's files merged, an exec credential plugin's token, an auth-provider
# refused with the reason. The portable archive (scripts/package-plugin) is the same plugin: kubectl
# runs it through a link on the PATH, and it works in a root that holds nothing but the archive.
#
# Usage: kubectl_plugin_test.sh AUTOTUNE_BINARY SOURCE_DIR
# It starts its own control plane with scripts/controlplane, or, when AUTOTUNE_TEST_KUBECONFIG is
# set, uses that cluster (with kubectl from PATH) and leaves only the CRD behind.
set -uo pipefail
autotune=$1
source_dir=$2
# shellcheck source=tests/support/checks.sh
source "$source_dir/tests/support/checks.sh"
# shellcheck source=tests/support/cluster.sh
source "$source_dir/tests/support/cluster.sh"

work=$(mktemp -d /tmp/autotune-plugin-test.XXXXXX)
namespace=autotune-plugin-test-$$
job=gpt2-large-local
configmap=$job-optimal
namespace_created=false
cleanup() {
  if [[ $own_controlplane == true ]]; then
    AUTOTUNE_CONTROLPLANE_DIR=$work/controlplane "$source_dir/scripts/controlplane" down \
      >/dev/null 2>&1 || true
  elif [[ $namespace_created == true ]]; then
    kubectl delete namespace "$namespace" --wait=false >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

use_cluster "$work" kubectl
export KUBECACHEDIR=$work/kube-cache
# kubectl finds plugins on the PATH: the kubectl-autotune link beside the autotune binary.
path_without_build=$PATH
export PATH="$(dirname "$autotune"):$PATH"

crd_established() {
  kubectl apply -f "$source_dir/crds/autotunejobs.autotune.io.yaml" &&
    eventually 60 kubectl wait --for=condition=Established --timeout=10s \
      crd/autotunejobs.autotune.io
}
require "the CRD is established" crd_established
require "the test namespace is created" kubectl create namespace "$namespace"
namespace_created=true
require "kubectl lists the plugin" eval 'kubectl plugin list 2>/dev/null | grep -q kubectl-autotune'

example="$source_dir/examples/gpt2-large-local.yaml"
require "the example's search runs locally" \
  "$autotune" run "$example" --gpus 0-31 --results "$work/run"
require "the example job is created" kubectl apply -n "$namespace" -f "$example"

# The job while searching: its status holds the trials finished so far (here, all of them).
python3 - "$work/run/results.json" "$work/status.json" "$work/results.json" <<'PY'
import json, sys
trials = json.load(open(sys.argv[1]))["trials"]
for trial in trials:
    trial.pop("launchIndex")
json.dump({"status": {"phase": "Running", "results": trials}}, open(sys.argv[2], "w"))
# The output ConfigMap's results.json: one record a line, each with its configPatch.
lines = [json.dumps(dict(trial, configPatch={})) for trial in trials]
open(sys.argv[3], "w").write("[\n" + ",\n".join(lines) + "\n]\n")
PY
require "the job's status takes the results" kubectl patch atj "$job" -n "$namespace" \
  --subresource=status --type=merge --patch-file "$work/status.json"

kubectl autotune report "$job" -n "$namespace" --output-file "$work/status.html" 2>"$work/err"
expect "kubectl autotune report draws a job still searching" test $? -eq 0
expect "from its status: the best so far is named" grep -q '<b>z1_gas1_tmbspg3</b>' \
  "$work/status.html"
expect "the job gives the memory model's line" grep -q 'class="memory"' "$work/status.html"
kubectl autotune best "$job" -n "$namespace" >"$work/none.json" 2>"$work/none.err"
expect "kubectl autotune best of a job without output fails" test $? -eq 1
expect "and says the job has no tuned config yet" grep -q "has no tuned config yet" \
  "$work/none.err"

uid=$(kubectl get atj "$job" -n "$namespace" -o jsonpath='{.metadata.uid}')
make_output() {
  kubectl create configmap "$configmap" -n "$namespace" \
    --from-file=ds_config.json="$work/run/ds_config_optimal.json" \
    --from-file=cmd.txt="$work/run/cmd_optimal.txt" \
    --from-file=summary.txt="$work/run/summary.txt" \
    --from-file=results.json="$work/results.json" &&
    kubectl label configmap "$configmap" -n "$namespace" "autotune.io/job=$job" &&
    kubectl annotate configmap "$configmap" -n "$namespace" "autotune.io/job-uid=$uid"
}
require "the output ConfigMap is written as the operator writes it" make_output

best_is_output() {
  kubectl get configmap "$configmap" -n "$namespace" -o jsonpath='{.data.ds_config\.json}' \
    >"$work/expected.json" &&
    kubectl autotune best "$job" -n "$namespace" >"$work/best.json" &&
    test -s "$work/best.json" && cmp "$work/best.json" "$work/expected.json"
}
expect "kubectl autotune best is the ConfigMap's ds_config.json" best_is_output

kubectl autotune report "$job" --namespace="$namespace" --output-file="$work/report.html"
expect "kubectl autotune report draws a finished job" test $? -eq 0
expect "from its ConfigMap: the command of cmd.txt" \
  grep -q -- '--per_device_train_batch_size 3' "$work/report.html"
expect "and its summary table" grep -q '| global' "$work/report.html"
kubectl autotune report "$job" -n "$namespace" -o svg >"$work/chart.svg"
expect "-o svg gives the chart alone" \
  python3 -c 'import sys, xml.dom.minidom as m; m.parse(sys.argv[1])' "$work/chart.svg"

context_namespace() {
  cp "$KUBECONFIG" "$work/kubeconfig" &&
    KUBECONFIG=$work/kubeconfig kubectl config set-context --current \
      --namespace="$namespace" >/dev/null &&
    KUBECONFIG=$work/kubeconfig kubectl autotune best "$job" >"$work/context.json" &&
    cmp "$work/context.json" "$work/expected.json"
}
expect "without -n, the kubeconfig context's namespace is used" context_namespace

kubectl autotune best no-such-job -n "$namespace" 2>"$work/missing.err" >/dev/null
expect "a job that does not exist fails" test $? -eq 1
expect "and is named" grep -q "^AutotuneJob $namespace/no-such-job: not found" "$work/missing.err"

same_plan() {
  kubectl autotune plan -f "$source_dir/examples/gpt2-large.yaml" >"$work/plan-plugin.txt" &&
    "$autotune" plan "$source_dir/examples/gpt2-large.yaml" >"$work/plan.txt" &&
    cmp "$work/plan-plugin.txt" "$work/plan.txt" &&
    kubectl autotune plan "$source_dir/examples/gpt2-large.yaml" >"$work/plan-argument.txt" &&
    cmp "$work/plan-argument.txt" "$work/plan.txt" &&
    kubectl autotune plan -f - <"$source_dir/examples/gpt2-large.yaml" >"$work/plan-stdin.txt" &&
    cmp "$work/plan-stdin.txt" "$work/plan.txt"
}
expect "kubectl autotune plan -f FILE, FILE and -f - are autotune plan FILE" same_plan

# --- kubeconfigs as clusters hand them out --------------------------------------------------------

# $KUBECONFIG lists files that kubectl merges: here the contexts in one and the clusters and users
# in another, with a file that does not exist before them.
split_kubeconfig() {
  kubectl config view --raw --flatten -o json >"$work/whole.json" &&
    python3 - "$work/whole.json" "$work/contexts.json" "$work/credentials.json" <<'PY'
import json, sys
whole = json.load(open(sys.argv[1]))
contexts = {k: whole[k] for k in ("apiVersion", "kind", "current-context", "contexts")}
credentials = {k: whole[k] for k in ("apiVersion", "kind", "clusters", "users")}
json.dump(contexts, open(sys.argv[2], "w"))
json.dump(credentials, open(sys.argv[3], "w"))
PY
}
require "the kubeconfig is split in two files" split_kubeconfig
merged_best() {
  KUBECONFIG=$work/missing:$work/contexts.json:$work/credentials.json \
    kubectl autotune best "$job" -n "$namespace" >"$work/merged.json" &&
    cmp "$work/merged.json" "$work/expected.json"
}
expect "every file of \$KUBECONFIG is read, merged as kubectl merges them" merged_best
kubeconfig_flag() {
  KUBECONFIG=$work/missing kubectl autotune best "$job" --kubeconfig="$work/whole.json" \
    --namespace "$namespace" >"$work/flag.json" && cmp "$work/flag.json" "$work/expected.json"
}
expect "--kubeconfig=FILE and --namespace NS are read as kubectl reads them" kubeconfig_flag

# An EKS-style user: an exec plugin prints a ServiceAccount's token that may read the job and its
# ConfigMaps, as `aws eks get-token` prints one.
reader_rights() {
  kubectl create serviceaccount tuner -n "$namespace" &&
    kubectl create role tuner -n "$namespace" --verb=get \
      --resource=autotunejobs.autotune.io,configmaps &&
    kubectl create rolebinding tuner -n "$namespace" --role=tuner \
      --serviceaccount="$namespace:tuner"
}
require "ServiceAccount tuner may get the job and its ConfigMaps" reader_rights
token=$(kubectl create token tuner -n "$namespace" --duration=10m)
{
  echo '#!/bin/sh'
  echo "echo \"\$*\" >> '$work/plugin-runs'"
  echo "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\",'"
  echo "printf '\"status\":{\"token\":\"%s\",\"expirationTimestamp\":\"%s\"}}\\n' '$token' \\"
  echo "  \"\$(date -u -d '+10 minutes' +%Y-%m-%dT%H:%M:%SZ)\""
} >"$work/get-token"
chmod +x "$work/get-token"
exec_kubeconfig() {
  python3 - "$work/credentials.json" "$work/eks.json" "$work/get-token" <<'PY'
import json, sys
config = json.load(open(sys.argv[1]))
cluster = config["clusters"][0]
json.dump({"apiVersion": "v1", "kind": "Config", "current-context": "eks",
           "clusters": [cluster],
           "contexts": [{"name": "eks", "context": {"cluster": cluster["name"], "user": "eks"}}],
           "users": [{"name": "eks", "user": {"exec": {
               "apiVersion": "client.authentication.k8s.io/v1beta1",
               "command": sys.argv[3], "args": ["eks", "get-token", "--cluster-name", "test"],
               "interactiveMode": "Never"}}}]},
          open(sys.argv[2], "w"))
PY
}
require "a kubeconfig whose user is an exec plugin" exec_kubeconfig
exec_best() {
  KUBECONFIG=$work/eks.json kubectl get atj "$job" -n "$namespace" >/dev/null &&
    KUBECONFIG=$work/eks.json kubectl autotune best "$job" -n "$namespace" >"$work/exec.json" &&
    cmp "$work/exec.json" "$work/expected.json" &&
    grep -qx "eks get-token --cluster-name test" "$work/plugin-runs"
}
expect "with an exec plugin's token, kubectl autotune best works as kubectl get does" exec_best
forbidden_elsewhere() {
  ! KUBECONFIG=$work/eks.json kubectl autotune best "$job" -n default 2>"$work/elsewhere.err" &&
    grep -q "system:serviceaccount:$namespace:tuner" "$work/elsewhere.err"
}
expect "the request is the ServiceAccount's, not an anonymous one" forbidden_elsewhere

python3 - "$work/eks.json" "$work/failing.json" "$work/provider.json" <<'PY'
import json, sys
config = json.load(open(sys.argv[1]))
config["users"][0]["user"]["exec"]["command"] = "false-login"
config["users"][0]["user"]["exec"]["installHint"] = "install the login tool"
json.dump(config, open(sys.argv[2], "w"))
config["users"][0]["user"] = {"auth-provider": {"name": "oidc", "config": {}}}
json.dump(config, open(sys.argv[3], "w"))
PY
KUBECONFIG=$work/failing.json kubectl autotune best "$job" -n "$namespace" 2>"$work/failing.err"
expect "a plugin that cannot run fails the command" test $? -eq 1
says_why() {
  grep -q 'exec credential plugin "false-login": not found' "$work/failing.err" &&
    grep -q 'install the login tool' "$work/failing.err"
}
expect "and says which and why, with its install hint" says_why
KUBECONFIG=$work/provider.json kubectl autotune best "$job" -n "$namespace" 2>"$work/provider.err"
expect "an auth-provider user fails the command" test $? -eq 1
expect "and says it is not supported" \
  grep -q 'user "eks": auth-provider "oidc" is not supported' "$work/provider.err"

# --- the portable archive -------------------------------------------------------------------------

require "scripts/package-plugin makes the archive" \
  "$source_dir/scripts/package-plugin" "$work/dist" "$autotune"
portable_through_kubectl() {
  mkdir -p "$work/unpacked" "$work/plugin-bin" &&
    tar -xzf "$work"/dist/kubectl-autotune-*-linux-amd64.tar.gz -C "$work/unpacked" &&
    ln -s "$work/unpacked/kubectl-autotune/kubectl-autotune" "$work/plugin-bin/kubectl-autotune" &&
    PATH=$work/plugin-bin:$path_without_build KUBECONFIG=$work/eks.json \
      kubectl autotune best "$job" -n "$namespace" >"$work/portable.json" &&
    cmp "$work/portable.json" "$work/expected.json"
}
expect "the unpacked archive, linked on the PATH, is kubectl's plugin (exec credentials too)" \
  portable_through_kubectl

# A root holding the archive, a shell and a kubeconfig, and no other file: the plugin loads
# nothing from the system. The shell itself runs on the archive's loader and C library.
if chroot / true 2>/dev/null; then
  root=$work/bare-root
  mkdir -p "$root/bin" "$root/opt" &&
    cp -a "$work/unpacked/kubectl-autotune" "$root/opt/" &&
    cp "$(readlink -f /bin/sh)" "$root/bin/sh" &&
    cp "$work/whole.json" "$root/kubeconfig"
  bare() {
    env -i "$(command -v chroot)" "$root" /opt/kubectl-autotune/lib/ld-linux-x86-64.so.2 \
      --library-path /opt/kubectl-autotune/lib /bin/sh /opt/kubectl-autotune/kubectl-autotune "$@"
  }
  bare_best() {
    bare best "$job" -n "$namespace" --kubeconfig /kubeconfig >"$work/bare.json" &&
      cmp "$work/bare.json" "$work/expected.json"
  }
  expect "in a root with nothing but the archive, kubectl autotune best reads the cluster" bare_best
  bare --version >"$work/bare-version" 2>&1
  expect "and --version names the plugin" grep -q "^kubectl autotune " "$work/bare-version"
else
  echo "skipped - the bare-root checks of the archive need chroot (root)"
fi

if ((failures > 0)); then
  echo "kubectl_plugin_test: $failures checks failed"
  exit 1
fi
echo "kubectl_plugin_test: all checks passed"
