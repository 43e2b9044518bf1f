#!/usr/bin/env bash
# `autotune report` as a user meets it: the example's search drawn from its results directory,
# from its results.json alone and from an output ConfigMap, the chart alone as SVG, and bad input
# answered with the file and the field it concerns and exit 2.
set -uo pipefail
autotune=$1
source_dir=$2
# shellcheck source=tests/support/checks.sh
source "$source_dir/tests/support/checks.sh"

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
example="$source_dir/examples/gpt2-large-local.yaml"

require "the example's search runs" "$autotune" run "$example" --gpus 0-31 --results "$out/run"
expect "autotune run leaves report.html beside summary.txt" grep -q '<svg' "$out/run/report.html"

"$autotune" report "$out/run" --job "$example" --output-file "$out/report.html"
expect "a results directory with its job is drawn with exit 0" test $? -eq 0
expect "the page names the best trial" grep -q '<b>z1_gas1_tmbspg3</b>' "$out/report.html"
expect "the page shows the best config" grep -q '&quot;train_micro_batch_size_per_gpu&quot;: 3' \
  "$out/report.html"
expect "the page shows the GPUs each trial held" grep -q 'GPUs 16-31' "$out/report.html"
expect "the job gives the memory model's line" grep -q 'class="memory"' "$out/report.html"
no_script() { ! grep -qi '<script' "$1"; }
expect "the page holds no script" no_script "$out/report.html"
no_fetch() { ! grep -Eqi '(src|href)="(https?:)?//' "$1"; }
expect "the page fetches nothing" no_fetch "$out/report.html"
expect "autotune run's report is the page autotune report draws" \
  cmp "$out/run/report.html" "$out/report.html"

"$autotune" report "$out/run/results.json" >"$out/from-file.html"
expect "a results.json alone is drawn to standard output" grep -q '</html>' "$out/from-file.html"

python3 - "$out/run" "$out/configmap.yaml" <<'PY'
import json, pathlib, sys
run = pathlib.Path(sys.argv[1])
records = json.loads((run / "results.json").read_text())["trials"]
for record in records:
    record.pop("launchIndex")
    record["configPatch"] = {}
data = {"results.json": "[\n" + ",\n".join(json.dumps(r) for r in records) + "\n]\n",
        "ds_config.json": (run / "ds_config_optimal.json").read_text(),
        "cmd.txt": (run / "cmd_optimal.txt").read_text(),
        "summary.txt": (run / "summary.txt").read_text()}
configmap = {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "gpt2-large-optimal", "labels": {"autotune.io/job": "gpt2-large"}},
             "data": data}
# JSON is YAML, and kubectl's -o json output too.
pathlib.Path(sys.argv[2]).write_text(json.dumps(configmap, indent=2))
PY
"$autotune" report "$out/configmap.yaml" -o svg --output-file "$out/chart.svg"
expect "an output ConfigMap is drawn with exit 0" test $? -eq 0
expect "-o svg writes a well-formed SVG document" \
  python3 -c 'import sys, xml.dom.minidom as m; m.parse(sys.argv[1])' "$out/chart.svg"
curves() { test "$(grep -o '<polyline class="curve"' "$out/chart.svg" | wc -l)" -eq 3; }
expect "the chart has a curve for each stage with a value (z3 had none)" curves
expect "the chart is titled with the ConfigMap's job" grep -q '>gpt2-large: throughput' \
  "$out/chart.svg"

"$autotune" report "$source_dir/tests/report/bad-results.json" 2>"$out/bad.err" >/dev/null
expect "a bad record exits 2" test $? -eq 2
expect "the error names the file and the field" \
  grep -q 'tests/report/bad-results.json: trials\[1\].outcome: must be one of' "$out/bad.err"
"$autotune" report "$out/missing" 2>"$out/missing.err" >/dev/null
expect "a missing RESULTS exits 2" test $? -eq 2
expect "the error names it" grep -q "$out/missing: cannot be read" "$out/missing.err"
mkdir "$out/empty"
"$autotune" report "$out/empty" 2>"$out/empty.err" >/dev/null
expect "a directory without results.json exits 2" test $? -eq 2
expect "the error says what it lacks" grep -q 'holds no results.json' "$out/empty.err"
"$autotune" report "$out/run" --job "$out/run/results.json" 2>"$out/job.err" >/dev/null
expect "a --job that is no job exits 2" test $? -eq 2
expect "the error names the job file" grep -q "^--job $out/run/results.json: " "$out/job.err"
"$autotune" report "$out/run" -o pdf 2>"$out/format.err" >/dev/null
expect "an unknown format exits 2" test $? -eq 2
expect "the error names the flag and what it takes" \
  grep -qx 'autotune report: -o: must be html or svg, not "pdf"' "$out/format.err"
"$autotune" report "$out/run" --output-file "$out/no/such/dir/report.html" 2>/dev/null
expect "an output that cannot be written exits 1" test $? -eq 1

if ((failures > 0)); then
  echo "report_test: $failures checks failed"
  exit 1
fi
echo "report_test: all checks passed"
