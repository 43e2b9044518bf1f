#!/usr/bin/env bash
# `autotune run` with real DeepSpeed on its CPU accelerator: every trial is tiny_lm.py, launched
# with RANKS ranks by LAUNCHER: `deepspeed` (the default), `torchrun`, or `accelerate` (`accelerate
# launch --use_deepspeed`, in the `example` environment, which has Accelerate), as
# docs/trial-protocol.md shows them. The profiling trial measures the model, the deepspeed
# strategy searches to its best, check_run.py holds every recorded number to the file DeepSpeed
# wrote and every trial to the values it reports its engine ran, and the tuned config is run once
# more as a user would run it (cmd_optimal.txt).
# Usage: autotune_run_test.sh AUTOTUNE WORK_DIR RANKS [newest|example]
#          [deepspeed|torchrun|accelerate]
set -euo pipefail
autotune=$1 work=$2 ranks=$3 launcher=${5:-deepspeed}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/deepspeed/environment.sh
source "$here/environment.sh" "${4:-newest}"
# tiny_lm.py's parameters: embedding, positions, two encoder layers and the output layer.
parameters=$((512 * 128 + 64 * 128 + 2 * 198272 + 128 * 512 + 512))

rm -rf "$work" && mkdir -p "$work" && cd "$work"
# tiny-lm.yaml's command, with the launcher's own flags for the ranks and the rendezvous port.
case $launcher in
  deepspeed) command='[deepspeed, --num_gpus, "@RANKS@", --master_port, "@PORT@", "@SCRIPT@"]' ;;
  torchrun)
    command='[torchrun, --nproc_per_node, "@RANKS@", --master_port, "@PORT@", "@SCRIPT@"]'
    ;;
  accelerate)
    command='[accelerate, launch, --use_deepspeed, --num_processes, "@RANKS@", --num_machines, "1",'
    command+=' --mixed_precision, "no", --dynamo_backend, "no", --main_process_port, "@PORT@",'
    command+=' "@SCRIPT@"]'
    ;;
  *)
    echo "unknown launcher $launcher" >&2
    exit 2
    ;;
esac
sed -e "s|^\( *command: \).*|\1$command|" "$here/tiny-lm.yaml" |
  sed -e "s|@SCRIPT@|$here/tiny_lm.py|" -e "s|@RANKS@|$ranks|" -e "s|@PORT@|$ds_port|" >job.yaml
grep -q "command: \[$launcher" job.yaml
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
