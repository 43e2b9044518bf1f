#!/usr/bin/env bash
# The operator's metrics during a real job: /metrics over HTTPS answers only a bearer token whose
# user may get it (401 without one, 403 for a user without the right), a scrape passes `promtool
# check metrics`, a real Prometheus server on loopback scrapes the operator with its token, and every PromQL expression of the
# chart's Grafana dashboard returns data through Prometheus' HTTP API, with the operator restarted
# mid-job; after the job, and after one more restart, every per-job panel still answers.
# /healthz and /readyz answer.
# Usage: tests/e2e/observability_test.sh   (binaries from build/bin, see scripts/e2e-env)
set -euo pipefail

source_dir=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=scripts/e2e-env
source "$source_dir/scripts/e2e-env"
state=$(mktemp -d /tmp/autotune-observability.XXXXXX)
e2e_init "$state"
dashboard=$source_dir/charts/autotune-operator/dashboards/autotune.json
job_namespace=default
job_name=gpt2-large

fail() {
  echo "FAIL: $*" >&2
  tail -20 "$E2E_OPERATOR_LOG" >&2 || true
  exit 1
}

stop_all() {
  if [[ -f $state/prometheus.pid ]]; then
    kill "$(cat "$state/prometheus.pid")" 2>/dev/null || true
  fi
  e2e_down
  rm -rf "$state"
}
trap stop_all EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

log_port() { sed -n "s/.*\"$1\":\\([0-9]*\\).*/\\1/p" "$E2E_OPERATOR_LOG" | tail -1; }

# Prometheus scrapes the operator at $1; a reload (SIGHUP) moves it to a new address and marks the
# old target's series stale at once.
write_prometheus_config() {
  local target=$1
  cat >"$state/prometheus.yml" <<CONFIG
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: autotune-operator
    # As a hardened multi-tenant Prometheus scrapes: target labels win (overrideHonorLabels), so
    # the operator's series must name their AutotuneJob in a label of their own.
    honor_labels: false
    # As the chart's ServiceMonitor has it: HTTPS to a self-signed certificate, with the token of
    # a ServiceAccount bound to the chart's metrics-reader ClusterRole.
    scheme: https
    tls_config:
      insecure_skip_verify: true
    authorization:
      credentials_file: $E2E_STATE/metrics.token
    static_configs:
      - targets: ["$target"]
CONFIG
}

start_prometheus() {
  local port=$1 target=$2
  write_prometheus_config "$target"
  prometheus --config.file="$state/prometheus.yml" --storage.tsdb.path="$state/tsdb" \
    --web.listen-address="127.0.0.1:$port" >"$state/prometheus.log" 2>&1 &
  echo $! >"$state/prometheus.pid"
}

query() {
  curl -sf --get "http://127.0.0.1:$prometheus_port/api/v1/query" --data-urlencode "query=$1"
}

has_data() {
  query "$1" | python3 -c '
import json, sys
answer = json.load(sys.stdin)
sys.exit(0 if answer["status"] == "success" and answer["data"]["result"] else 1)'
}

# The dashboard's expressions with its variables filled in as Grafana would for this job; metric
# (what the best-value panel repeats over) as its All value.
dashboard_expressions() {
  python3 - "$dashboard" "$job_namespace" "$job_name" <<'PY'
import json, sys
dashboard, namespace, job = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
def panels(items):
    for panel in items:
        yield panel
        yield from panels(panel.get("panels", []))
for panel in panels(dashboard["panels"]):
    for target in panel.get("targets", []):
        expr = target.get("expr", "")
        for name, value in (("namespace", namespace), ("autotunejob", job), ("metric", ".*")):
            expr = expr.replace("${%s}" % name, value).replace("$" + name, value)
        expr = expr.replace("$__rate_interval", "1m").replace("$__interval", "15s")
        if expr:
            print(panel.get("title", "?") + "\t" + expr.replace("\n", " "))
PY
}

# The panels that show one AutotuneJob's state: read from the operator's cache at each scrape,
# they answer again as soon as a restarted operator has filled its cache.
per_job_expressions() {
  dashboard_expressions | grep -E 'autotune_(job_phase|job_trials|best_value)\b'
}

# Stops the operator as a helm upgrade or a lost leadership would and starts it again; Prometheus
# scrapes the new process (a new metrics port) from then on.
restart_operator() {
  e2e_stop_operator TERM && e2e_start_operator || return 1
  metrics_port=$(log_port metricsPort)
  write_prometheus_config "127.0.0.1:$metrics_port"
  kill -HUP "$(cat "$state/prometheus.pid")" &&
    e2e_wait 60 "Prometheus to scrape the restarted operator" has_data \
      "up{instance=\"127.0.0.1:$metrics_port\"} == 1"
}

# Every panel of the expressions on stdin (its title, a tab, its PromQL) has data within a minute:
# from the operator process started last, when it restarted.
panels_answer() {
  local what=$1 checked=0 title expr
  while IFS=$'\t' read -r title expr; do
    e2e_wait 60 "data for \"$title\"" has_data "$expr" ||
      fail "dashboard panel \"$title\": no data ($what) for $expr"
    checked=$((checked + 1))
  done
  ((checked > 0)) || fail "the dashboard has no panel to check ($what)"
  echo "ok: all $checked $what"
}

e2e_up || fail "the environment did not start"
metrics_port=$(log_port metricsPort)
probe_port=$(log_port probePort)
[[ -n $metrics_port && $metrics_port != 0 ]] || fail "the operator logged no metrics port"

curl -sf "http://127.0.0.1:$probe_port/healthz" >/dev/null || fail "/healthz is not ok"
curl -sf "http://127.0.0.1:$probe_port/readyz" >/dev/null || fail "/readyz is not ok"
echo "ok: /healthz and /readyz answer 200"

# /metrics answers only a token whose user may get it: none is 401, another ServiceAccount's 403.
status_of_scrape() {
  curl -s --insecure --max-time 5 -o /dev/null -w '%{http_code}' "$@" \
    "https://127.0.0.1:$metrics_port/metrics"
}
kubectl create serviceaccount stranger -n "$e2e_operator_namespace" >/dev/null ||
  fail "cannot create ServiceAccount stranger"
stranger_token=$(kubectl create token stranger -n "$e2e_operator_namespace" --duration 10m) ||
  fail "cannot make a token for stranger"
[[ $(status_of_scrape) == 401 ]] || fail "a scrape without a token is not 401"
[[ $(status_of_scrape -H "Authorization: Bearer not-a-token") == 401 ]] ||
  fail "a scrape with a made-up token is not 401"
[[ $(status_of_scrape -H "Authorization: Bearer $stranger_token") == 403 ]] ||
  fail "a scrape with the token of a ServiceAccount without the right is not 403"
[[ $(status_of_scrape -H "Authorization: Bearer $(cat "$E2E_STATE/metrics.token")") == 200 ]] ||
  fail "a scrape with the metrics reader's token is not 200"
[[ $(curl -s --max-time 5 -o /dev/null -w '%{http_code}' \
  "http://127.0.0.1:$metrics_port/metrics") != 200 ]] || fail "plain HTTP is served"
echo "ok: /metrics over HTTPS: no token 401, a made-up one 401, one without the right 403," \
  "the reader's 200, no plain HTTP"

prometheus_port=$(free_port)
start_prometheus "$prometheus_port" "127.0.0.1:$metrics_port"
e2e_wait 60 "Prometheus to scrape the operator" has_data 'up{job="autotune-operator"} == 1' ||
  fail "Prometheus never scraped the operator; $(tail -5 "$state/prometheus.log")"

kubectl apply -f "$source_dir/examples/gpt2-large-trial-sim.yaml" >/dev/null
launched() {
  local count
  count=$(kubectl get atj "$job_name" -n "$job_namespace" -o jsonpath='{.status.trials.launched}')
  ((${count:-0} >= 1))
}
e2e_wait 120 "the job's first launch" launched || fail "the job launched no trial"
restart_operator || fail "the operator did not come back after a restart mid-job"
echo "ok: the operator restarted mid-job"
succeeded() {
  [[ $(kubectl get atj "$job_name" -n "$job_namespace" -o jsonpath='{.status.phase}') == Succeeded ]]
}
e2e_wait 300 "the job to succeed" succeeded || fail "the job did not succeed"
echo "ok: the job succeeded"

e2e_scrape "$metrics_port" >"$state/scrape.txt"
problems=$(promtool check metrics <"$state/scrape.txt" 2>&1) || fail "promtool: $problems"
[[ -z $problems ]] || fail "promtool: $problems"
grep -q "^autotune_best_value{autotunejob=\"$job_name\"" "$state/scrape.txt" ||
  fail "no autotune_best_value for the job in the scrape"
echo "ok: a scrape during the job passes promtool check metrics"

# Prometheus has the last state once it has scraped the job's best value.
e2e_wait 60 "Prometheus to see the best value" has_data "autotune_best_value{autotunejob=\"$job_name\", job=\"autotune-operator\"}" ||
  fail "Prometheus never saw autotune_best_value"

panels_answer "dashboard expressions return data from a real Prometheus" \
  < <(dashboard_expressions)
panels_answer "per-job panels answer after the job" < <(per_job_expressions)
restart_operator || fail "the operator did not come back after a restart after the job"
panels_answer "per-job panels answer after a restart once the job ended" < <(per_job_expressions)
