#!/usr/bin/env bash
# `autotune run` with real DeepSpeed on its CPU accelerator: every trial is tiny_lm.py launched by
# the `deepspeed` launcher with RANKS ranks. The profiling trial measures the model, the deepspeed
# strategy searches to its best, check_run.py holds every recorded number to the file DeepSpeed
# wrote, and the tuned config is run once more as a user would run it (cmd_optimal.txt).
# Usage: autotune_run_test.sh AUTOTUNE WORK_DIR RANKS [newest|example]  (scripts/deepspeed-env)
set -euo pipefail
autotune=$1 work=$2 ranks=$3
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/deepspeed/environment.sh
source "$here/environment.sh" "${4:-newest}"
# tiny_lm.py's parameters: embedding, positions, two encoder layers and the output layer.
parameters=$((512 * 128 + 64 * 128 + 2 * 198272 + 128 * 512 + 512))

rm -rf "$work" && mkdir -p "$work" && cd "$work"
sed -e "s|@SCRIPT@|$here/tiny_lm.py|" -e "s|@RANKS@|$ranks|" -e "s|@PORT@|$ds_port|" \
  "$here/tiny-lm.yaml" >job.yaml
run_search "$autotune" autotune_results job.yaml --gpus "0-$((ranks - 1))"
python3 "$here/check_run.py" autotune_results "$ranks" "$parameters" 0,1,2

# The tuned config, as the user's real training would use it: without the autotuning section the
# script trains all its steps.
bash autotune_results/cmd_optimal.txt >tuned.log 2>&1 || {
  tail -n 20 tuned.log >&2
  echo "the tuned config failed under DeepSpeed" >&2
  exit 1
}
echo "autotune_run_test: DeepSpeed trained with the tuned config"
