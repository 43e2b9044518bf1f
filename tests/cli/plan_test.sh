#!/usr/bin/env bash
# `autotune plan` as a user meets it: a valid job prints its plan and exits 0; a job where nothing
# fits says why and what would, and exits 1; a job with several mistakes prints every one of them
# as `path: reason` on stderr and exits 2.
set -uo pipefail
autotune=$1
source_dir=$2
# shellcheck source=tests/support/checks.sh
source "$source_dir/tests/support/checks.sh"

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

"$autotune" plan "$source_dir/examples/gpt2-large.yaml" >"$out/plan.txt" 2>"$out/plan.err"
expect "the example plans with exit 0" test $? -eq 0
expect "the plan shows the memory table" grep -q 'model states' "$out/plan.txt"
expect "the plan estimates ZeRO-1's largest micro-batch as 3" \
  grep -Eq '^1 +.* yes +3$' "$out/plan.txt"
expect "the plan starts each stage at the memory model's estimate" \
  grep -Eq '^  z0_gas1_tmbspg2 ' "$out/plan.txt"

no_queue_line() { ! grep -q '^Queue:' "$out/plan.txt"; }
expect "a job without spec.queueName names no queue" no_queue_line
"$autotune" plan "$source_dir/examples/gpt2-large-kueue.yaml" >"$out/kueue.txt" 2>&1
expect "a job with spec.queueName names its Kueue LocalQueue" \
  grep -q '^Queue: Kueue LocalQueue team-a (spec.queueName)' "$out/kueue.txt"

"$autotune" plan "$source_dir/tests/cli/several-mistakes.yaml" >"$out/bad.txt" 2>"$out/bad.err"
expect "an invalid job exits 2" test $? -eq 2
for path in apiVersion spec.deepspeedConfig.zero_optimization.stage spec.resources.gpusPerTrial \
  spec.resources.nodesPerTrial spec.search.strategy spec.search.maxTrials spec.trialTimeout \
  spec.argMappings.no_such_key; do
  expect "the error names $path" grep -q "^$path[.[:alnum:]_\[]*\]*: " "$out/bad.err"
done
expect "nothing is planned for an invalid job" test ! -s "$out/bad.txt"

"$autotune" plan "$source_dir/tests/cli/nothing-fits.yaml" >"$out/big.txt" 2>&1
expect "a job where nothing fits exits 1" test $? -eq 1
expect "it says so, stage by stage" grep -Eq \
  '^The search cannot start: nothing fits: .*stage 0 needs [0-9.]+ GiB \([0-9.]+x\).*stage 3 needs' \
  "$out/big.txt"
expect "and what would fit" grep -q 'What would fit: ZeRO stage 3 on spec.resources.gpusPerTrial: ' \
  "$out/big.txt"
no_trials_listed() { ! grep -q '^First trials' "$out/big.txt"; }
expect "it lists no first trials" no_trials_listed

"$autotune" plan "$out/missing.yaml" 2>/dev/null
expect "a missing file exits 2" test $? -eq 2
"$autotune" 2>/dev/null
expect "no command prints usage and exits 2" test $? -eq 2

# The dry run for 8-GPU nodes, on 8 GPUs: one trial at a time, to DeepSpeed's published best.
dry_run="$source_dir/examples/dry-run-8-gpus.yaml"
"$autotune" run "$dry_run" --gpus 0-7 --results "$out/dry-run" >"$out/dry-run.txt" 2>&1
expect "examples/dry-run-8-gpus.yaml runs on 8 GPUs with exit 0" test $? -eq 0
expect "it ends at z1_gas1_tmbspg3" grep -q '^Best trial: z1_gas1_tmbspg3 ' "$out/dry-run.txt"

if ((failures > 0)); then
  echo "plan_test: $failures checks failed"
  cat "$out/bad.err"
  exit 1
fi
echo "plan_test: all checks passed"
