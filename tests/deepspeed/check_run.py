"""Checks an `autotune run` results directory left by a search whose trials were real DeepSpeed.

    check_run.py RESULTS_DIR RANKS PARAMETERS STAGES

STAGES are the ZeRO stages searched, e.g. 0,1,2.

Every number the search recorded must be the one DeepSpeed's engine wrote: the profiled model
size in model_info_path, and each trial's throughput, latency and FLOPS in its metric_path, where
the script added what the engine ran ("effective"), which the search verified. Exits 1 with every
finding on standard error.
"""

import json
import sys
from pathlib import Path

# What DeepSpeed's engine writes to autotuning.metric_path, from rank 0.
METRIC_KEYS = {"fwd", "bwd", "step", "latency", "FLOPS_per_gpu", "throughput", "rank"}
findings = []


def expect(condition, finding):
    if not condition:
        findings.append(finding)


def expect_deepspeed_metrics(name, record, written):
    """The trial's record holds what DeepSpeed's engine wrote to its metric_path."""
    expect(set(written) == METRIC_KEYS | {"effective"},
           f"{name}: DeepSpeed and the script wrote keys {sorted(written)}")
    expect(written.get("rank") == 0, f"{name}: the metrics are not rank 0's")
    recorded = record.get("metrics", {})
    for key, source in (("throughput", "throughput"), ("latency", "latency"),
                        ("flops", "FLOPS_per_gpu")):
        expect(recorded.get(key) == written.get(source),
               f"{name}: recorded {key} {recorded.get(key)}, DeepSpeed wrote {written.get(source)}")
    expect(record.get("value") == written.get("throughput"), f"{name}: value is not throughput")


def check_measured_trial(results, record, ranks):
    name = record["name"]
    written = json.loads((results / "results" / name / "metrics.json").read_text())
    expect_deepspeed_metrics(name, record, written)
    config = json.loads((results / "results" / name / "ds_config.json").read_text())
    micro_batch = config["train_micro_batch_size_per_gpu"]
    expect(name.endswith(f"_tmbspg{micro_batch}"), f"{name}: its config says {micro_batch}")
    expect(config["train_batch_size"] == micro_batch * ranks,
           f"{name}: train_batch_size {config['train_batch_size']} for {ranks} ranks")
    ran = {
        "train_micro_batch_size_per_gpu": micro_batch,
        "gradient_accumulation_steps": config["gradient_accumulation_steps"],
        "zero_optimization.stage": config["zero_optimization"]["stage"],
        "dp_world_size": ranks,
    }
    expect(written.get("effective") == ran, f"{name}: the engine ran {written.get('effective')}")
    expect(record.get("configVerified") is True, f"{name}: its config was not verified")


def main():
    results, ranks, parameters = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    searched = {f"z{stage}" for stage in sys.argv[4].split(",")}
    run = json.loads((results / "results.json").read_text())
    trials = run["trials"]
    expect(trials and trials[0]["name"] == "profile_model_info", "no profiling trial came first")
    expect(trials[0]["outcome"] == "Succeeded", f"the profiling trial: {trials[0]}")
    expect(run["model"]["numParameters"] == parameters,
           f"profiled {run['model']['numParameters']} parameters, the model has {parameters}")
    expect(run["model"]["activationMemoryPerSample"] > 0, "no activation memory was profiled")

    measured = [t for t in trials[1:] if t["outcome"] == "Succeeded"]
    expect(len(measured) == len(trials) - 1,
           f"trials that did not succeed: {[t for t in trials[1:] if t not in measured]}")
    for record in measured:
        check_measured_trial(results, record, ranks)
    stages = {record["space"] for record in measured}
    expect(stages == searched, f"stages measured: {sorted(stages)}")

    best = max(measured, key=lambda record: record["value"])
    optimal = json.loads((results / "ds_config_optimal.json").read_text())
    best_config = json.loads((results / "results" / best["name"] / "ds_config.json").read_text())
    for key in ("train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "zero_optimization"):
        expect(optimal.get(key) == best_config[key],
               f"ds_config_optimal.json has {key} {optimal.get(key)}, the best {best_config[key]}")
    expect("train_batch_size" not in optimal,
           "ds_config_optimal.json fixes train_batch_size: it holds only on the trial's GPU count")
    expect(best["name"] in (results / "summary.txt").read_text(), "summary.txt misses the best")

    for finding in findings:
        print(f"check_run: {finding}", file=sys.stderr)
    print(f"check_run: {len(measured)} trials, best {best['name']}: {best['value']:.1f} samples/s")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
