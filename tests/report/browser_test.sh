#!/usr/bin/env bash
# The report of the GPT2-large example in a real browser (Debian's chromium, headless): the page
# renders and its screenshot is not blank, the chart holds a curve per stage, the best trial's
# name is visible text, and a trial reason holding <script> shows as text and runs nothing.
#
#   tests/report/browser_test.sh AUTOTUNE SOURCE_DIR [PICTURE]
#
# AUTOTUNE: the autotune binary (trial-sim beside it). With PICTURE, the chart of the example's
# search is also saved there as a PNG: the README's picture is made by
#   tests/report/browser_test.sh build/bin/autotune . docs/report-gpt2-large.png
set -uo pipefail
autotune=$1
source_dir=$2
picture=${3:-}
# shellcheck source=tests/support/checks.sh
source "$source_dir/tests/support/checks.sh"
checks="$source_dir/tests/report/browser_checks.py"

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
chromium=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
require "Chromium is installed (scripts/install-deps installs Debian's chromium)" \
  test -x "$chromium"

# A fresh profile, no sandbox (tests may run as root), nothing fetched in the background.
browser() {
  "$chromium" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$out/profile" "$@" 2>>"$out/chromium.log"
}
on_check_failure() { tail -5 "$out/chromium.log" 2>/dev/null | sed 's/^/    chromium: /'; }

example="$source_dir/examples/gpt2-large-local.yaml"
require "the example's search runs" "$autotune" run "$example" --gpus 0-31 --results "$out/run"
require "its chart is drawn as SVG" \
  "$autotune" report "$out/run" --job "$example" -o svg --output-file "$out/chart.svg"

# The chart alone, at its own size.
height=$(grep -o 'viewBox="0 0 960 [0-9.]*"' "$out/chart.svg" | head -1 | grep -o '[0-9.]*"$' |
  tr -d '"')
require "the chart renders" browser --screenshot="$out/chart.png" \
  --window-size="960,${height%.*}" "file://$out/chart.svg"
expect "the chart's screenshot is not blank" python3 "$checks" painted "$out/chart.png"
if [[ -n $picture ]]; then
  cp "$out/chart.png" "$picture" && echo "wrote $picture"
fi

# A failed trial whose stderr holds markup, as a crashing script's might: it must stay text.
python3 - "$out/run/results.json" <<'PY'
import json, sys
path = sys.argv[1]
results = json.load(open(path))
for trial in results["trials"]:
    if trial["outcome"] == "OOM":
        trial["reason"] = ("CUDA out of memory\n<script>document.title='pwned';"
                           "document.documentElement.setAttribute('data-pwned','yes')</script>"
                           "<img src=x onerror=\"document.title='pwned'\">")
json.dump(results, open(path, "w"), indent=2)
PY
require "the report is written" \
  "$autotune" report "$out/run" --job "$example" --output-file "$out/report.html"

require "the page renders" browser --screenshot="$out/report.png" --window-size=1000,1800 \
  "file://$out/report.html"
expect "the page's screenshot is not blank" python3 "$checks" painted "$out/report.png"
dump_dom() { browser --dump-dom "file://$out/report.html" >"$out/dom.html"; }
require "the page's DOM is dumped" dump_dom
expect "a panel per stage, and a curve per stage that measured a value (ZeRO-3 never fits)" \
  python3 "$checks" curves "$out/dom.html" 4 3
expect "the best trial's name is visible text" \
  python3 "$checks" visible "$out/dom.html" "best z1_gas1_tmbspg3"
expect "a reason holding <script> shows as text and runs nothing" \
  python3 "$checks" inert "$out/dom.html" "Autotune report: gpt2-large-local" \
  "<script>document.title='pwned';"

if ((failures > 0)); then
  echo "browser_test: $failures checks failed"
  exit 1
fi
echo "browser_test: all checks passed"
