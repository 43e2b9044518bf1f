#!/usr/bin/env bash
# A config DeepSpeed itself overrides: with an `elasticity` section (DeepSpeed before 0.17, the
# `example` environment), the engine picks its own micro-batch and accumulation from the elastic
# batch sizes, whatever the trial asks. Every trial runs a global batch of 8 instead of its own, and
# reports micro-batch 4 and accumulation 2: each is ConfigNotApplied and the search fails, with no
# best of a config no trial was named for. (micro_batch_sizes is a list of lists: one candidate, the
# list itself, as docs/api.md says of list values.)
# Usage: overridden_config_test.sh AUTOTUNE WORK_DIR
set -euo pipefail
autotune=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/deepspeed/environment.sh
source "$here/environment.sh" example

rm -rf "$work" && mkdir -p "$work" && cd "$work"
elasticity='    elasticity: {enabled: true, max_train_batch_size: 8, micro_batch_sizes: [[4]],'
elasticity+=' min_gpus: 1, max_gpus: 4, min_time: 0, version: 0.1,'
elasticity+=' ignore_non_elastic_batch_info: true}'
sed -e "s|@SCRIPT@|$here/tiny_lm.py|" -e "s|@PORT@|$ds_port|" -e '/overlap_comm: sometimes/d' \
  -e 's|train_micro_batch_size_per_gpu: \[2\]|train_micro_batch_size_per_gpu: [1, 2]|' \
  -e "s|^  deepspeedConfig:\$|&\n$elasticity|" "$here/rejected.yaml" >job.yaml
grep -q "elasticity: {enabled: true" job.yaml
status=0
"$autotune" run job.yaml --gpus 0 >run.log 2>&1 || status=$?
python3 - "$status" <<'PY'
import json, pathlib, sys
status = int(sys.argv[1])
results = pathlib.Path("autotune_results")
trials = json.loads((results / "results.json").read_text())["trials"]
assert status == 1, f"autotune run exited {status}, not 1 (search failed)"
assert sorted(t["name"] for t in trials) == ["z1_gas1_tmbspg1", "z1_gas1_tmbspg2"], trials
for trial in trials:
    assert trial["outcome"] == "ConfigNotApplied", trial
    assert trial["reason"].startswith("the engine ran a global batch of 8 "), trial["reason"]
    ran = json.loads((results / "results" / trial["name"] / "metrics.json").read_text())
    assert ran["effective"]["train_micro_batch_size_per_gpu"] == 4, ran
    assert ran["effective"]["gradient_accumulation_steps"] == 2, ran
assert not (results / "ds_config_optimal.json").exists(), "a best of another config"
print("overridden_config_test: DeepSpeed's own override caught:", trials[0]["reason"][:70])
PY
