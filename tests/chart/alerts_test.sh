#!/usr/bin/env bash
# The chart's alerts (templates/prometheusrule.yaml), checked with Prometheus' own promtool: the
# rules rendered with prometheusRule.enabled pass `promtool check rules`, and `promtool test rules`
# runs the cases of alerts_test.yaml against them, each alert firing on the series that should
# fire it and quiet on a healthy operator's. Every alert has a summary, a description and a
# runbook in docs/operator.md; the values of prometheusRule reach the rules.
#
#   tests/chart/alerts_test.sh [SOURCE_DIR]
#
# Needs no cluster: helm and kubectl come from scripts/controlplane tools, promtool from Debian's
# prometheus package (scripts/install-deps).
set -euo pipefail

source_dir=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
chart=$source_dir/charts/autotune-operator
here=$source_dir/tests/chart
# shellcheck source=tests/support/checks.sh
source "$source_dir/tests/support/checks.sh"
work=$(mktemp -d /tmp/autotune-alerts-test.XXXXXX)
trap 'rm -rf "$work"' EXIT

export HELM_CACHE_HOME=$work/helm/cache HELM_CONFIG_HOME=$work/helm/config
export HELM_DATA_HOME=$work/helm/data

for tool in promtool python3; do
  command -v "$tool" >/dev/null || {
    echo "alerts_test: $tool is needed (scripts/install-deps)"
    exit 1
  }
done
tools=$("$source_dir/scripts/controlplane" tools) || {
  echo "alerts_test: scripts/controlplane tools could not fetch helm and kubectl"
  exit 1
}
export PATH=$tools:$PATH

alerts() { python3 "$here/alerts.py" "$@"; }

# The chart rendered with the values $@ as JSON objects in $work/$name.json (see chart_test.sh).
render() {
  local name=$1
  shift
  helm template autotune-operator "$chart" --namespace autotune-system "$@" >"$work/$name.yaml" &&
    kubectl label --local -f "$work/$name.yaml" -o json autotune.invalid/unused- >"$work/$name.json"
}

# The PrometheusRule of render $1 as the rule file $work/rules.json, which the test file's
# rule_files names beside it.
rule_file() {
  alerts rules <"$work/$1.json" >"$work/rules.json" &&
    cp "$here/alerts_test.yaml" "$work/alerts_test.yaml"
}

check "helm template renders the PrometheusRule with prometheusRule.enabled" \
  render enabled --set prometheusRule.enabled=true || exit 1
check "its spec makes a Prometheus rule file" rule_file enabled || exit 1

no_rule_by_default() {
  render default && ! grep -q '"kind": "PrometheusRule"' "$work/default.json"
}
expect "the default values render no PrometheusRule" no_rule_by_default
expect "promtool check rules accepts the rules" promtool check rules "$work/rules.json"
expect "promtool test rules: each alert fires on its failure and stays quiet when healthy" \
  promtool test rules "$work/alerts_test.yaml"
expect "every alert is tested firing and quiet in alerts_test.yaml" \
  alerts tested "$here/alerts_test.yaml" <"$work/enabled.json"
expect "every alert has a summary, a description and a runbook_url into docs/operator.md" \
  alerts annotated "$source_dir/docs/operator.md" <"$work/enabled.json"

# In the render tuned, the field $2 of alert $1 ends with $3.
tuned_to() {
  local actual
  actual=$(alerts field "$1" "$2" <"$work/tuned.json") || return 1
  [[ $actual == *"$3" ]] || { echo "$1 $2: $actual, expected to end with $3"; return 1; }
}
tuned() {
  render tuned --set prometheusRule.enabled=true --set prometheusRule.trialsQueuedFor=3h \
    --set prometheusRule.workqueueDepth=500 --set qps=20 || return 1
  tuned_to AutotuneJobTrialsQueued for 3h &&
    tuned_to AutotuneOperatorWorkQueueBacklog expr '> 500' &&
    tuned_to AutotuneOperatorClientRateLimited description 'more than one worker is always waiting to send.' &&
    alerts field AutotuneOperatorClientRateLimited description <"$work/tuned.json" | grep -q -- '--qps 20,'
}
expect "trialsQueuedFor, workqueueDepth and qps set the thresholds and the words" tuned

cat >"$work/additional-values.yaml" <<'VALUES'
prometheusRule:
  enabled: true
  additionalRules:
  - alert: AutotuneJobsFailing
    expr: sum(autotune_jobs{phase="Failed"}) > 10
    for: 1h
    labels: {severity: info}
VALUES
appended() {
  render additional -f "$work/additional-values.yaml" || return 1
  [[ $(alerts names <"$work/additional.json" | tail -1) == AutotuneJobsFailing ]] || {
    echo "additionalRules did not come last:"
    alerts names <"$work/additional.json"
    return 1
  }
  rule_file additional && promtool check rules "$work/rules.json"
}
expect "additionalRules are appended to the group and pass promtool check rules" appended

# helm template must fail, naming what was wrong ($1).
refused() {
  local pattern=$1 output
  shift
  if output=$(helm template autotune-operator "$chart" "$@" 2>&1); then
    echo "helm template $* was accepted"
    return 1
  fi
  grep -q -- "$pattern" <<<"$output" || { echo "$output"; return 1; }
}
expect "values.schema.json rejects trialsQueuedFor=soon" \
  refused trialsQueuedFor --set prometheusRule.trialsQueuedFor=soon
expect "values.schema.json rejects an unknown key under prometheusRule" \
  refused severity --set prometheusRule.severity=page
expect "values.schema.json rejects an additional rule without an expr" \
  refused "missing property 'expr'" --set 'prometheusRule.additionalRules[0].alert=X'

if ((failures > 0)); then
  echo "alerts_test: $failures checks failed"
  exit 1
fi
echo "alerts_test: all checks passed"
