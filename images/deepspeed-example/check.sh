#!/usr/bin/env bash
# What can be checked of the deepspeed-example image without Docker, GPUs or PyTorch: train.py
# compiles, and the example AutotuneJob is one the operator accepts (`autotune plan` decodes and
# validates it as the operator does), when the project's build has the autotune binary.
# Usage: images/deepspeed-example/check.sh BUILD_DIR
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
build_dir=$1
image_dir=$(cd "$(dirname "$0")" && pwd)

# The bytecode goes to the build folder, not beside the source.
PYTHONPYCACHEPREFIX=$build_dir/pycache python3 -m py_compile "$image_dir/train.py" \
  "$image_dir/autotune_effective.py"
echo "deepspeed-example: train.py and autotune_effective.py compile"

if [[ -x $build_dir/bin/autotune ]]; then
  "$build_dir/bin/autotune" plan "$image_dir/autotunejob.yaml" >/dev/null
  echo "deepspeed-example: autotunejob.yaml is valid (autotune plan)"
else
  echo "deepspeed-example: $build_dir/bin/autotune not built; autotunejob.yaml not checked"
fi
