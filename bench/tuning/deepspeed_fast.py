#!/usr/bin/env python3
"""Run DeepSpeed's own autotuner (fast mode) against trial-sim and report what it did.

    deepspeed_fast.py --trial-sim PATH (--profile NAME | --profile-file FILE) --gpus N
                      --gpu-memory BYTES --slots S [--precision P] [--micro-batch-start N]
                      [--max-train-batch-size N] [--work-dir DIR] [--verbose]

DeepSpeed is driven through its real entry point, `deepspeed.launcher.runner.main(["--autotuning",
"tune", ...])`, which builds the resource pool, constructs `Autotuner` and calls `tune()`,
`print_tuning_results()` and `write_optimal_config()`. The autotuner, its ResourceManager and its
tuners run unchanged. Only what touches hardware, processes or wall-clock time is replaced:

  * accelerator.device_count()  -> slots x gpus   (runner.main builds the resource pool from it)
  * accelerator.total_memory()  -> --gpu-memory   (Autotuner.get_gpu_memory_info)
  * scheduler.subprocess.Popen  -> the `deepspeed <launcher args> train.py --deepspeed <b64>` launch
                                   becomes one trial-sim run (stdout/stderr into the experiment's
                                   stdout.log/stderr.log, as the real launcher); clean_up's
                                   `pdsh ... pkill -f <exp>` becomes a no-op (nothing is left running)
  * scheduler.threading.Thread  -> a thread that also lives on a virtual clock: each experiment
                                   takes exactly one unit of virtual time
  * scheduler.time.sleep        -> no-op (the 5 s polling interval, negligible in virtual time)
  * autotuner.tabulate          -> a plain-text fallback only if the `tabulate` package is missing

Prints one JSON object on stdout; DeepSpeed's logs go to <work-dir>/deepspeed.log (or stderr with
--verbose).
"""

import argparse
import base64
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import types


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trial-sim", required=True, help="path to the trial-sim binary")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--profile", help="a trial-sim built-in profile")
    g.add_argument("--profile-file", help="a custom trial-sim profile (JSON)")
    p.add_argument("--gpus", type=int, required=True, help="GPUs per experiment (world size)")
    p.add_argument("--gpu-memory", type=int, required=True, help="per-GPU memory the autotuner sees, bytes")
    p.add_argument("--slots", type=int, required=True, help="experiments that may run at once")
    p.add_argument("--precision", choices=["fp16", "bf16", "fp32"], default=None,
                   help="the profile's precision (default: a profile file's, else fp16)")
    p.add_argument("--micro-batch-start", type=int, default=None,
                   help="train_micro_batch_size_per_gpu of the user config (default \"auto\")")
    p.add_argument("--max-train-batch-size", type=int, default=None,
                   help="autotuning.max_train_batch_size of the user config")
    p.add_argument("--zero-stages", default="all",
                   help='zero_optimization.stage of the user config: "all" (default), a comma list '
                   '("1,2"), or "absent" for no zero_optimization section (DeepSpeed >= PR #1880 then '
                   'tunes stage 0 only)')
    p.add_argument("--work-dir", default=None, help="where DeepSpeed writes its experiments (kept); "
                   "default a temporary directory, removed afterwards")
    p.add_argument("--verbose", action="store_true", help="DeepSpeed's logs on stderr instead of a file")
    a = p.parse_args(argv)
    for name in ("gpus", "gpu_memory", "slots"):
        if getattr(a, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive")
    if a.micro_batch_start is not None and a.micro_batch_start <= 0:
        p.error("--micro-batch-start must be positive")
    if a.max_train_batch_size is not None and a.max_train_batch_size <= 0:
        p.error("--max-train-batch-size must be positive")
    if a.zero_stages not in ("all", "absent"):
        try:
            a.zero_stages = [int(x) for x in a.zero_stages.split(",")]
        except ValueError:
            p.error('--zero-stages: "all", "absent" or a comma list of stages 0-3')
        if any(s not in (0, 1, 2, 3) for s in a.zero_stages):
            p.error('--zero-stages: "all", "absent" or a comma list of stages 0-3')
    return a


# ----------------------------------------------------------------------------------------------
# Virtual clock: every experiment occupies its reservation for exactly one unit.
# ----------------------------------------------------------------------------------------------

class VirtualClock:

    def __init__(self):
        self.now = 0
        self.lock = threading.RLock()
        self.pending = set()  # launched threads whose end the scheduler has not yet observed

    def wait_for(self, thread):
        """A join() on `thread` by ResourceManager.experiment_check.

        The real check polls (join(timeout=5) on each running experiment, then sleep(5)) until
        something finishes; with one-unit experiments the polling interval is negligible, so a
        join that would block moves the clock to the earliest end among the experiments the
        scheduler has not yet seen finish, unless one of those has already ended (the scheduler
        will notice it in this same check without waiting).
        """
        with self.lock:
            if thread.v_end <= self.now:
                return
            ends = [t.v_end for t in self.pending]
            if ends and min(ends) > self.now:
                self.now = min(ends)


CLOCK = VirtualClock()
REAL_JOIN_LIMIT_S = 600  # a single trial-sim run takes milliseconds; this only guards a hang


class VirtualThread(threading.Thread):
    """threading.Thread as seen by the scheduler, alive until its virtual end time."""

    def start(self):
        with CLOCK.lock:
            self.v_start = CLOCK.now
            self.v_end = CLOCK.now + 1
            CLOCK.pending.add(self)
        super().start()

    def join(self, timeout=None):
        threading.Thread.join(self, REAL_JOIN_LIMIT_S)
        if threading.Thread.is_alive(self):
            raise RuntimeError(f"experiment thread {self.name} did not finish in {REAL_JOIN_LIMIT_S} s")
        CLOCK.wait_for(self)

    def is_alive(self):
        if threading.Thread.is_alive(self):
            return True
        with CLOCK.lock:
            if self.v_end > CLOCK.now:
                return True
            CLOCK.pending.discard(self)
            return False


# ----------------------------------------------------------------------------------------------
# The launch: DeepSpeed's launcher command -> one trial-sim run.
# ----------------------------------------------------------------------------------------------

LAUNCHES = []
LAUNCH_ERRORS = []
LAUNCH_LOCK = threading.Lock()


def classify(ds_config, rc, stderr_path):
    at = ds_config.get("autotuning", {}) or {}
    profiling = bool((at.get("model_info") or {}).get("profile"))
    if rc == 0:
        if profiling:
            path = at.get("model_info_path") or "autotuning_model_info.json"
            return ("profile" if os.path.exists(path) else "failed"), None
        path = at.get("metric_path") or "autotuning_metric.json"
        try:
            with open(path) as f:
                return "succeeded", float(json.load(f)["throughput"])
        except (OSError, ValueError, KeyError, TypeError):
            return "failed", None
    try:
        with open(stderr_path, errors="replace") as f:
            err = f.read()
    except OSError:
        err = ""
    if "OutOfMemoryError" in err or "out of memory" in err:
        return "oom", None
    return "failed", None


class TrialSimProcess(subprocess.Popen):
    """The launched process; classifies the outcome as soon as DeepSpeed waits for it."""

    def __init__(self, cmd, record, **kw):
        self._record = record
        super().__init__(cmd, **kw)

    def wait(self, timeout=None):
        rc = super().wait(timeout)
        rec = self._record
        if "outcome" not in rec:
            rec["rc"] = rc
            rec["outcome"], rec["throughput"] = classify(rec["ds_config"], rc, rec["stderr"])
        return rc


class _Finished:
    """A process that has already exited successfully (clean_up's pdsh/pkill)."""
    returncode = 0

    def wait(self, timeout=None):
        return 0

    def poll(self):
        return 0


def make_subprocess_shim(trial_sim, profile_args, world_size):

    def Popen(cmd, *args, **kw):
        if cmd and cmd[0] == "pdsh":
            # scheduler.clean_up: `pdsh -f 1024 -w <hosts> pkill -f <exp name>` kills what is left of
            # the experiment on its nodes. trial-sim has exited by then; there is nothing to kill.
            return _Finished()
        if not cmd or cmd[0] != "deepspeed":
            raise RuntimeError(f"unexpected command from the autotuner: {cmd}")
        try:
            return launch(cmd, kw)
        except Exception as e:  # surfaces after the run; DeepSpeed itself would see a dead thread
            LAUNCH_ERRORS.append(f"{type(e).__name__}: {e}")
            raise

    def launch(cmd, kw):
        # cmd = ["deepspeed", "--hostfile", H, "--include", "host:0,1,..", "--master_port", P,
        #        user_script, *user_args]   (scheduler.run_experiment)
        include = cmd[cmd.index("--include") + 1]
        n = sum(len(part.split(":", 1)[1].split(",")) for part in include.split("@"))
        if n != world_size:
            raise RuntimeError(f"launch on {n} GPUs ({include}), expected {world_size}")
        user_args = cmd[cmd.index("--master_port") + 3:]  # after the port and the user script
        flag = "--deepspeed_config" if "--deepspeed_config" in user_args else "--deepspeed"
        b64 = user_args[user_args.index(flag) + 1]
        ds_config = json.loads(base64.urlsafe_b64decode(b64.encode()).decode())
        err_file = kw.get("stderr")
        exp_dir = os.path.dirname(os.path.abspath(err_file.name))
        config_path = os.path.join(exp_dir, "ds_config.json")
        with open(config_path) as f:
            if json.load(f) != ds_config:
                raise RuntimeError(f"{config_path} differs from the config passed to the launcher")
        thread = threading.current_thread()
        with open(os.path.join(exp_dir, "exp.json")) as f:
            exp_id = json.load(f)["exp_id"]
        record = {
            "name": os.path.basename(exp_dir),
            "exp_id": exp_id,
            "ds_config": ds_config,
            "stderr": err_file.name,
            "start": getattr(thread, "v_start", None),
        }
        with LAUNCH_LOCK:
            LAUNCHES.append(record)
        sim_cmd = [trial_sim, *profile_args, "--num_gpus", str(n), "--deepspeed", config_path,
                   "--startup-seconds", "0"]
        env = dict(os.environ)
        env.pop("CUDA_VISIBLE_DEVICES", None)
        env["AUTOTUNE_TRIAL"] = record["name"]
        return TrialSimProcess(sim_cmd, record, stdout=kw.get("stdout"), stderr=err_file, env=env)

    return types.SimpleNamespace(Popen=Popen, PIPE=subprocess.PIPE, DEVNULL=subprocess.DEVNULL,
                                 STDOUT=subprocess.STDOUT, CalledProcessError=subprocess.CalledProcessError)


def plain_tabulate(rows, headers=(), tablefmt=None):
    lines = ["| " + " | ".join(map(str, headers)) + " |"]
    lines += ["| " + " | ".join(map(str, r)) + " |" for r in rows]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------


def profile_precision(args):
    if args.precision:
        return args.precision
    if args.profile_file:
        with open(args.profile_file) as f:
            prof = json.load(f)
        mem = prof.get("gpuMemoryBytes")
        if mem is not None and int(mem) != args.gpu_memory:
            print(f"deepspeed_fast: note: the profile's gpuMemoryBytes {int(mem)} differs from "
                  f"--gpu-memory {args.gpu_memory}", file=sys.stderr)
        return prof.get("precision", "fp16")
    return "fp16"


def user_config(args):
    precision = profile_precision(args)
    cfg = {
        "train_micro_batch_size_per_gpu": args.micro_batch_start if args.micro_batch_start else "auto",
        "gradient_accumulation_steps": 1,
        "optimizer": {
            "type": "Adam",
            "params": {"lr": 3e-5, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.0},
        },
        "autotuning": {"enabled": True, "fast": True, "metric": "throughput", "arg_mappings": {}},
    }
    if args.zero_stages != "absent":
        stage = args.zero_stages
        if isinstance(stage, list) and len(stage) == 1:
            stage = stage[0]
        cfg["zero_optimization"] = {"stage": stage}
    if precision == "fp16":
        cfg["fp16"] = {"enabled": True}
    elif precision == "bf16":
        cfg["bf16"] = {"enabled": True}
    if args.max_train_batch_size:
        cfg["autotuning"]["max_train_batch_size"] = args.max_train_batch_size
    return cfg


def trial_view(ds_config):
    zero = ds_config.get("zero_optimization") or {}
    return {
        "stage": zero.get("stage", 0),
        "microBatch": ds_config.get("train_micro_batch_size_per_gpu"),
        "gradientAccumulation": ds_config.get("gradient_accumulation_steps"),
    }


def main(argv):
    args = parse_args(argv)
    trial_sim = os.path.abspath(args.trial_sim)
    if not os.access(trial_sim, os.X_OK):
        print(f"deepspeed_fast: {trial_sim} is not executable", file=sys.stderr)
        return 2
    if args.profile_file:
        args.profile_file = os.path.abspath(args.profile_file)
        profile_args = ["--profile-file", args.profile_file]
    else:
        profile_args = ["--profile", args.profile]

    keep = args.work_dir is not None
    work_dir = os.path.abspath(args.work_dir) if keep else tempfile.mkdtemp(prefix="ds-fast-")
    os.makedirs(work_dir, exist_ok=True)

    # stdout carries only the JSON: everything else written to fd 1 (DeepSpeed's logger is bound to
    # sys.stdout, print_tuning_results prints its table) goes to the log.
    json_out = os.fdopen(os.dup(1), "w")
    log_path = os.path.join(work_dir, "deepspeed.log")
    log_file = sys.stderr if args.verbose else open(log_path, "w", buffering=1)
    sys.stdout.flush()
    os.dup2(log_file.fileno(), 1)

    os.environ["DS_ACCELERATOR"] = "cpu"
    os.environ.setdefault("TQDM_DISABLE", "1")  # the scheduler's progress bar
    os.environ.pop("CUDA_VISIBLE_DEVICES", None)  # else runner.main turns it into --include
    os.environ.pop("MLFLOW_RUN_ID", None)

    result = {"launches": 0, "wall": 0, "best": None, "trials": []}
    err_text = None
    cwd = os.getcwd()
    try:
        cfg = user_config(args)
        os.chdir(work_dir)
        cfg_path = os.path.join(work_dir, "ds_config.json")
        with open(cfg_path, "w") as f:
            json.dump(cfg, f, indent=2)

        import deepspeed
        from deepspeed.accelerator import get_accelerator
        from deepspeed.autotuning import autotuner as ds_autotuner
        from deepspeed.autotuning import scheduler as ds_scheduler
        from deepspeed.launcher import runner as ds_runner
        from deepspeed.utils import logger as ds_logger
        import logging

        for h in ds_logger.handlers:
            if isinstance(h, logging.StreamHandler):
                h.setStream(log_file)

        # Hardware queries.
        acc = get_accelerator()
        acc.device_count = lambda: args.slots * args.gpus
        acc.total_memory = lambda device_index=None: args.gpu_memory
        # Process launches and the scheduler's notion of time.
        ds_scheduler.subprocess = make_subprocess_shim(trial_sim, profile_args, args.gpus)
        ds_scheduler.threading = types.SimpleNamespace(Thread=VirtualThread)
        ds_scheduler.time = types.SimpleNamespace(time=time.time, sleep=lambda s: None)
        if ds_autotuner.tabulate is None:
            ds_autotuner.tabulate = plain_tabulate
        if getattr(ds_autotuner, "has_mlflow", False):
            ds_autotuner.has_mlflow = False  # would log to an mlflow server (needs MLFLOW_RUN_ID)

        # Observe (not change) the Autotuner the runner builds, and the experiments the
        # ResourceManager answers from its result cache instead of launching.
        holder = {}

        class ObservedAutotuner(ds_autotuner.Autotuner):

            def __init__(self, *a, **kw):
                holder["tuner"] = self
                super().__init__(*a, **kw)

        ds_runner.Autotuner = ObservedAutotuner
        reused = []
        orig_schedule = ds_scheduler.ResourceManager.schedule_experiments

        def schedule_experiments(rm, exp_paths):
            new = [p for p in exp_paths if p not in rm.exp_paths]
            queued_before = {e["name"] for e in rm.experiment_queue}
            orig_schedule(rm, exp_paths)
            queued = {e["name"] for e in rm.experiment_queue} - queued_before
            for p in new:
                name = os.path.splitext(os.path.basename(p))[0]
                if name not in queued:
                    reused.append(name)

        ds_scheduler.ResourceManager.schedule_experiments = schedule_experiments

        # No hostfile (a path that does not exist, so a /job/hostfile on this machine is not read):
        # the runner then builds the pool {"localhost": device_count()} itself.
        runner_argv = ["--autotuning", "tune", "--hostfile", os.path.join(work_dir, "no-hostfile"),
                       "--num_gpus", str(args.gpus), "--log_level", "info",
                       "train.py", "--deepspeed", cfg_path]
        with contextlib.redirect_stdout(log_file):
            try:
                ds_runner.main(runner_argv)
            except SystemExit as e:
                if e.code not in (None, 0):
                    err_text = f"DeepSpeed exited with {e.code}"
            except Exception as e:  # the autotuner itself failed: report it, keep the counts
                err_text = f"{type(e).__name__}: {e}"
                traceback.print_exc(file=log_file)

        usage = [r for r in LAUNCHES if r.get("rc") == 2]
        if LAUNCH_ERRORS and err_text is None:
            err_text = "launch failed: " + LAUNCH_ERRORS[0]
        elif usage and err_text is None:
            with open(usage[0]["stderr"], errors="replace") as f:
                err_text = "trial-sim usage error: " + f.read().strip()
        tuner = holder.get("tuner")
        best_record = None
        if tuner is not None and err_text is None:
            best_record = tuner.get_best_space_records().get("global")
        result["launches"] = len(LAUNCHES)
        result["wall"] = CLOCK.now
        recorded = {}  # what the autotuner put in its records for each experiment name
        for space_records in (tuner.records.values() if tuner is not None else []):
            for exp, metric_val, _ in space_records:
                recorded.setdefault(exp["name"], []).append(metric_val)
        for rec in sorted(LAUNCHES, key=lambda r: (r["start"], r["exp_id"])):
            t = trial_view(rec["ds_config"])
            t["outcome"] = rec.get("outcome", "failed")
            t["throughput"] = rec.get("throughput")
            t["name"] = rec["name"]
            t["start"] = rec["start"]
            t["recorded"] = recorded.get(rec["name"], [])
            result["trials"].append(t)
        if best_record is not None:
            exp, metric_val, _ = best_record
            measured = [r for r in LAUNCHES if r["name"] == exp["name"]]
            m = measured[-1] if measured else None
            ds_best = {"name": exp["name"], "metric": metric_val}
            result["deepspeedBest"] = ds_best
            if m is not None and m.get("outcome") == "succeeded":
                b = trial_view(exp["ds_config"])
                b["throughput"] = m["throughput"]
                b["name"] = exp["name"]
                result["best"] = b
        result["reused"] = reused
        result["deepspeedVersion"] = deepspeed.__version__.strip()
    except Exception as e:
        err_text = f"{type(e).__name__}: {e}"
        traceback.print_exc(file=sys.stderr)
    finally:
        os.chdir(cwd)
        if err_text:
            result["error"] = err_text
        json_out.write(json.dumps(result) + "\n")
        json_out.flush()
        if err_text and not args.verbose:
            print(f"deepspeed_fast: {err_text} (DeepSpeed log: "
                  f"{log_path if keep else 'removed with the temporary work dir'})", file=sys.stderr)
        if not keep:
            shutil.rmtree(work_dir, ignore_errors=True)
    return 1 if err_text else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
