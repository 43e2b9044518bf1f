# shellcheck shell=bash
# Sourced by the tier's tests, with the name of an environment of scripts/deepspeed-env: that
# cached torch + DeepSpeed on PATH, DeepSpeed on its CPU accelerator, and the ops it compiles kept
# beside the environment.
venv=$("$(dirname "${BASH_SOURCE[0]}")/../../scripts/deepspeed-env" "$1")
export PATH=$venv/bin:$PATH
export DS_ACCELERATOR=cpu
export TORCH_EXTENSIONS_DIR=$venv/torch-extensions
