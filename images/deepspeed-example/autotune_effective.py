"""Tells the autotuner what DeepSpeed's engine really trained with.

A trial's metrics prove only what it ran. DeepSpeed's autotuning writes the metrics file and ends
the process; the handler that report_effective_values() registers runs as the process exits and
adds to that file an "effective" object: the micro-batch, gradient accumulation, ZeRO stage and
data-parallel size read back from the engine. The operator and `autotune run` hold them to the
trial's config (docs/trial-protocol.md). Only rank 0 writes, as DeepSpeed does.
"""

import atexit
import json
import os


def effective_values(engine):
    """The values the engine trains with, by the config keys they come from."""
    return {
        "train_micro_batch_size_per_gpu": engine.train_micro_batch_size_per_gpu(),
        "gradient_accumulation_steps": engine.gradient_accumulation_steps(),
        "zero_optimization.stage": engine.zero_optimization_stage(),
        "dp_world_size": engine.dp_world_size,
    }


def report_effective_values(engine_of):
    """At exit, adds effective_values(engine_of()) to $AUTOTUNE_METRICS_PATH.

    engine_of is called then, so that a Trainer's engine, made inside train(), can be reached.
    Nothing happens without an engine, on ranks other than 0, or when the file holds no metrics
    (the trial failed before DeepSpeed wrote them).
    """
    path = os.environ.get("AUTOTUNE_METRICS_PATH")

    def report():
        engine = engine_of()
        if not path or engine is None or not hasattr(engine, "zero_optimization_stage"):
            return
        if engine.global_rank != 0:
            return
        try:
            with open(path, encoding="utf-8") as metrics_file:
                metrics = json.load(metrics_file)
        except (OSError, ValueError):
            return
        if not isinstance(metrics, dict) or "throughput" not in metrics:
            return
        metrics["effective"] = effective_values(engine)
        with open(path, "w", encoding="utf-8") as metrics_file:
            json.dump(metrics, metrics_file)

    atexit.register(report)
