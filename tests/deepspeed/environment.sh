# shellcheck shell=bash
# Sourced by the tier's tests, with the name of an environment of scripts/deepspeed-env: that
# cached torch + DeepSpeed on PATH, DeepSpeed on its CPU accelerator, and the ops it compiles kept
# beside the environment; ds_port, the rendezvous port of the test's launches (AUTOTUNE_DS_PORT,
# one a test, so that tests run side by side; DeepSpeed's own 29500 by default); and run_search.
venv=$("$(dirname "${BASH_SOURCE[0]}")/../../scripts/deepspeed-env" "$1")
export PATH=$venv/bin:$PATH
export DS_ACCELERATOR=cpu
export TORCH_EXTENSIONS_DIR=$venv/torch-extensions
ds_port=${AUTOTUNE_DS_PORT:-29500}

# `autotune run` with the arguments given (after the autotune binary); when the search does not
# succeed, the end of each trial's stderr from the results directory named by --results.
run_search() {
  local autotune=$1 results=$2
  shift 2
  local status=0
  "$autotune" run "$@" --results "$results" || status=$?
  if ((status != 0)); then
    echo "autotune run exited $status; the trials' stderr:" >&2
    tail -n 5 "$results"/results/*/stderr.log >&2 || true
    return 1
  fi
}
