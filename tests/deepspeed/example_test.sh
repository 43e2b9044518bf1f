#!/usr/bin/env bash
# The shipped example for real: images/deepspeed-example's train.py (Hugging Face's Trainer) and
# its autotunejob.yaml, run by `autotune run` with the image's own versions of torch, DeepSpeed and
# Hugging Face (scripts/deepspeed-env example) on DeepSpeed's CPU accelerator. The image's model
# and data set are a tiny GPT-2 and a text data set made here (make_tiny_gpt2.py); nothing is
# downloaded. The job file changes only where the CPU needs it and where tests run side by side:
# paths, no fp16, two ZeRO stages, micro-batches up to 4, and the test's rendezvous port.
# Usage: example_test.sh AUTOTUNE WORK_DIR
set -euo pipefail
autotune=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
example=$here/../../images/deepspeed-example
# shellcheck source=tests/deepspeed/environment.sh
source "$here/environment.sh" example
# As the image's ENV sets them: no hub access at any point.
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# The job's launch names no rank count: DeepSpeed's launcher takes one rank per visible device, the
# CPU accelerator counts LOCAL_SIZE of them, and each trial sees its two GPU slots.
export LOCAL_SIZE=2

rm -rf "$work" && mkdir -p "$work"
# The count is its last line: importing DeepSpeed (through transformers) logs before it.
parameters=$(python "$here/make_tiny_gpt2.py" "$work/assets" | tail -n 1)
launcher='            - deepspeed'
sed -e "s|/opt/model|$work/assets/model|" -e "s|/opt/data|$work/assets/data|" \
  -e "s|/tmp/gpt2-wikitext|$work/output|" -e '/- --fp16$/d' -e 's|enabled: true|enabled: false|' \
  -e 's|stage: \[0, 1, 2, 3\]|stage: [0, 1]|' \
  -e 's|^    maxTrials: 40$|    maxTrials: 40\n    maxMicroBatchSize: 4|' \
  -e "s|^$launcher\$|$launcher\n            - --master_port\n            - \"$ds_port\"|" \
  "$example/autotunejob.yaml" >"$work/job.yaml"

# The image's working directory holds train.py.
cd "$example"
run_search "$autotune" "$work/autotune_results" "$work/job.yaml" --gpus 0-1
python3 "$here/check_run.py" "$work/autotune_results" 2 "$parameters" 0,1
