#!/usr/bin/env bash
# Configs real DeepSpeed rejects. One that only DeepSpeed reads (rejected.yaml) runs as a trial and
# must end Failed with DeepSpeed's own message in its reason. One the engine knows DeepSpeed
# rejects (offload_optimizer with the script's own optimizer) is pruned before any launch, and
# DeepSpeed, given that config directly, must indeed refuse it: the rule holds for the real engine.
# And a script that overrides the config's ZeRO stage (tiny_lm.py --zero-stage 0) runs the batch it
# was asked, so only the values it reports its engine ran show it: each trial is ConfigNotApplied.
# Usage: rejected_config_test.sh AUTOTUNE WORK_DIR
set -euo pipefail
autotune=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/deepspeed/environment.sh
source "$here/environment.sh" newest

rm -rf "$work" && mkdir -p "$work" && cd "$work"
sed -e "s|@SCRIPT@|$here/tiny_lm.py|" -e "s|@PORT@|$ds_port|" "$here/rejected.yaml" >job.yaml
status=0
"$autotune" run job.yaml --gpus 0 >run.log 2>&1 || status=$?
python3 - "$status" <<'PY'
import json, sys
status = int(sys.argv[1])
trials = json.load(open("autotune_results/results.json"))["trials"]
assert status == 1, f"autotune run exited {status}, not 1 (search failed)"
assert [t["name"] for t in trials] == ["z1_gas1_tmbspg2"], trials
assert trials[0]["outcome"] == "Failed", trials[0]
assert "overlap_comm" in trials[0]["reason"], trials[0]["reason"]
assert "Input should be a valid boolean" in trials[0]["reason"], trials[0]["reason"]
print("rejected_config_test: Failed:", trials[0]["reason"][:120])
PY

offload='{"train_micro_batch_size_per_gpu": 2,
  "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}'
sed -e 's|overlap_comm: sometimes|offload_optimizer: {device: cpu}|' -e 's|stage: 1|stage: 2|' \
  -e '/^    optimizer:/,/^        lr:/d' job.yaml >offload.yaml
# Its only configuration pruned, the search cannot start: plan says why and exits 1.
plan_status=0
"$autotune" plan offload.yaml >plan.txt || plan_status=$?
((plan_status == 1)) && grep -q "^The search cannot start: nothing to run" plan.txt &&
  grep -q "z2_gas1_tmbspg[0-9]*: offload_optimizer needs DeepSpeed's own optimizer" plan.txt || {
  cat plan.txt >&2
  echo "the offload with a client optimizer was not pruned" >&2
  exit 1
}
echo "$offload" >offload.json
if deepspeed --num_gpus 1 --master_port "$ds_port" "$here/tiny_lm.py" --deepspeed offload.json \
  >offload.log 2>&1; then
  echo "DeepSpeed accepted an offload with a client optimizer; the prune rule is wrong" >&2
  exit 1
fi
grep -q "ZeRO-Offload with a client provided optimizer" offload.log || {
  tail -n 20 offload.log >&2
  exit 1
}
echo "rejected_config_test: pruned, and DeepSpeed refuses it too"

sed -e '/overlap_comm: sometimes/d' \
  -e 's|train_micro_batch_size_per_gpu: \[2\]|train_micro_batch_size_per_gpu: [1, 2]|' \
  -e 's|ds_config.json\]|ds_config.json, --zero-stage, "0"]|' job.yaml >overridden.yaml
status=0
"$autotune" run overridden.yaml --gpus 0 --results overridden >overridden.log 2>&1 || status=$?
python3 - "$status" <<'PY'
import json, sys
status = int(sys.argv[1])
trials = json.load(open("overridden/results.json"))["trials"]
assert status == 1, f"autotune run exited {status}, not 1 (search failed)"
assert len(trials) == 2, trials
ran = "the engine ran zero_optimization.stage = 0, not the 1 the trial's config asks"
for trial in trials:
    assert trial["outcome"] == "ConfigNotApplied", trial
    assert trial["reason"].startswith(ran), trial["reason"]
print("rejected_config_test: a script's own ZeRO stage caught:", trials[0]["reason"][:80])
PY
