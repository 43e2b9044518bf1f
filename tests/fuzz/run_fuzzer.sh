#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time: every seed first, then inputs of its own making.
# The inputs that found new coverage are kept in WORK_DIR/corpus, so later runs on the same machine
# go on from there; an input that fails is written to WORK_DIR/findings and named in the output.
# Usage: run_fuzzer.sh FUZZER SEED_DIR WORK_DIR SECONDS
set -euo pipefail
fuzzer=$1 seeds=$2 work=$3 seconds=$4
mkdir -p "$work/corpus" "$work/findings"
dictionary=()
if [[ -f "$seeds.dict" ]]; then
  dictionary=(-dict="$seeds.dict")
fi
exec "$fuzzer" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -max_len=65536 \
  -print_final_stats=1 -artifact_prefix="$work/findings/" "${dictionary[@]}" \
  "$work/corpus" "$seeds"
