#!/usr/bin/env python3
"""The end-to-end tests' checks of what kubectl, the API server's audit log and the node simulator
say, so that the scripts (e2e_test.sh, kueue_test.sh, reuse_test.sh and support.sh) hold only the
orchestration. Each subcommand is one kind of check; `job` and `kept` take any number of checks,
all of which must hold:

  job CHECK...                      an AutotuneJob (kubectl get atj -o json) on standard input
  kept --namespace NS --configmaps FILE --facts FILE --jobs FILE [--before FILE] CHECK...
                                    the measurement ConfigMaps of a namespace, with what the
                                    operator reads of each (measurements_of's facts)
  new-trials EARLIER LATER          prints the trials of LATER that EARLIER has no result of
  measurement-keys SUFFIX           prints the data keys of a measurement ConfigMap on standard
                                    input that end in SUFFIX, and the trials its results name
  reuse-events EVENTS               TrialReused Events against the reused results of the job
  warning TEXT...                   some "TYPE MESSAGE" line is a Warning holding every TEXT
  wide-columns USED SAVED           kubectl get atj -o wide's GPU-HOURS and SAVED
  ds-config, results-json, same-json, data-keys, user-values, output-per-model, status-written
                                    output ConfigMaps and what the operator wrote
  pods-created, created-once, configmaps-deleted, nothing-refused, deleted-only-own,
  quota-refused                     the API server's audit log
  ranks-on-distinct-nodes           the node simulator's log
  within ACTUAL EXPECTED TOLERANCE  two numbers, such as a metric and what it should be

A check that fails prints what it expected and what it saw, and the command exits 1; a command
line it cannot read exits 2. `inspect.py SUBCOMMAND --help` lists a subcommand's checks.
"""

import argparse
import collections
import json
import re
import sys
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

# A usage error exits 2, as argparse does.
EXIT_FAILED = 1
# What is printed of a status or of the ConfigMaps when a check fails.
SHOWN_CHARACTERS = 4000

# What a check means, and whether it holds of its subject (a Job, or Kept).
Check = Tuple[str, Callable[[Any], bool]]
# Option, what makes its check from the option's values, help, add_check's settings.
CheckTable = List[Tuple[str, Callable[..., Check], str, Dict[str, Any]]]


def pair(text: str, separator: str = "=") -> Tuple[str, str]:
    """KEY=VALUE as (KEY, VALUE); VALUE may hold the separator."""
    key, found, value = text.partition(separator)
    if not found or not key:
        raise argparse.ArgumentTypeError(f"{text!r}: expected KEY{separator}VALUE")
    return key, value


def number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def count(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def at(tree: Any, path: str) -> Any:
    """The value at a dotted path (trials.launched); a missing key fails the check (KeyError)."""
    for key in path.split("."):
        tree = tree[key]
    return tree


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def same_value(actual: Any, expected: str) -> bool:
    """A status or identity value equals text from the command line: a number where the text is
    one, else a string."""
    try:
        wanted = float(expected)
    except ValueError:
        return isinstance(actual, str) and actual == expected
    return is_number(actual) and actual == wanted


def trimmed(text: str) -> str:
    return text if len(text) <= SHOWN_CHARACTERS else text[:SHOWN_CHARACTERS] + "\n..."


def failures(checks: Sequence[Check], subject: Any) -> List[str]:
    """The meaning of each check that does not hold of the subject; a missing field fails it."""
    failed = []
    for meaning, holds in checks:
        try:
            if holds(subject):
                continue
        except (LookupError, TypeError, ValueError, AttributeError) as missing:
            meaning += f" (missing or malformed: {missing!r})"
        failed.append(meaning)
    return failed


def collecting(make: Callable[..., Check]) -> type:
    """An argparse action that turns its option's values into a check, kept in command-line
    order."""

    class Collect(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            checks = getattr(namespace, "checks", None) or []
            try:
                checks.append(make(*values) if isinstance(values, list) else make(values))
            except ValueError as error:
                parser.error(f"{option_string}: {error}")
            namespace.checks = checks

    return Collect


def add_check(parser: argparse.ArgumentParser, option: str, make: Callable[..., Check],
              help_text: str, nargs: Any = None, metavar: Any = None,
              value_type: Optional[Callable[[str], Any]] = None) -> None:
    kwargs: Dict[str, Any] = {"action": collecting(make), "help": help_text, "dest": "checks"}
    if nargs is not None:
        kwargs["nargs"] = nargs
    if metavar is not None:
        kwargs["metavar"] = metavar
    if value_type is not None:
        kwargs["type"] = value_type
    parser.add_argument(option, **kwargs)


# --- a job ---------------------------------------------------------------------------------------


class Job:
    """An AutotuneJob as kubectl prints it, with the views of its status the checks read."""

    def __init__(self, document: Dict[str, Any]) -> None:
        self.document = document
        self.status: Dict[str, Any] = document.get("status", {})
        self.results: List[Dict[str, Any]] = self.status.get("results", [])
        self.names: List[Any] = [r.get("name") for r in self.results]
        # By trial name: where a name is recorded twice, its last result.
        self.outcomes: Dict[Any, Any] = {r.get("name"): r.get("outcome") for r in self.results}
        self.reasons: Dict[Any, str] = {r.get("name"): r.get("reason", "") for r in self.results}

    def condition(self, kind: str) -> Dict[str, Any]:
        """Condition `kind` of the status, {} where there is none."""
        return next((c for c in self.status.get("conditions", []) if c.get("type") == kind), {})

    def trials(self) -> Dict[str, Any]:
        return self.status.get("trials", {})


def phase_is(phase: str) -> Check:
    return f"status.phase is {phase}", lambda job: job.status.get("phase") == phase


def phase_is_not(phase: str) -> Check:
    return f"status.phase is not {phase}", lambda job: job.status.get("phase") != phase


def condition_status(spec: Tuple[str, str]) -> Check:
    kind, state = spec
    return (f"condition {kind} has status {state}",
            lambda job: job.condition(kind).get("status") == state)


def condition_reason(spec: Tuple[str, str]) -> Check:
    kind, reason = spec
    return (f"condition {kind} has reason {reason}",
            lambda job: job.condition(kind).get("reason") == reason)


def condition_reason_not(spec: Tuple[str, str]) -> Check:
    kind, reason = spec
    return (f"condition {kind}, if any, has a reason other than {reason}",
            lambda job: job.condition(kind).get("reason") != reason)


def condition_message_holds(spec: Tuple[str, str]) -> Check:
    kind, text = spec
    return (f"condition {kind}'s message holds {text!r}",
            lambda job: text in job.condition(kind).get("message", ""))


def condition_message_starts(spec: Tuple[str, str]) -> Check:
    kind, text = spec
    return (f"condition {kind}'s message begins {text!r}",
            lambda job: job.condition(kind).get("message", "").startswith(text))


def message_holds(text: str) -> Check:
    return f"status.message holds {text!r}", lambda job: text in job.status.get("message", "")


def message_starts(text: str) -> Check:
    return (f"status.message begins {text!r}",
            lambda job: job.status["message"].startswith(text))


def status_equals(spec: Tuple[str, str]) -> Check:
    path, value = spec
    return f"status.{path} is {value}", lambda job: same_value(at(job.status, path), value)


def status_near(spec: Tuple[str, str]) -> Check:
    path, value = spec
    expected = number(value)
    return (f"status.{path} is {value} (within 1e-9)",
            lambda job: abs(at(job.status, path) - expected) < 1e-9)


def status_at_least(spec: Tuple[str, str]) -> Check:
    path, value = spec
    least = number(value)
    return f"status.{path} is at least {value}", lambda job: at(job.status, path) >= least


def status_above(spec: Tuple[str, str]) -> Check:
    path, value = spec
    floor = number(value)
    return f"status.{path} is above {value}", lambda job: at(job.status, path) > floor


def status_zero_or_absent(path: str) -> Check:
    """Where the status may not yet hold the field, or its parent, at all."""

    def holds(job: Job) -> bool:
        *parents, last = path.split(".")
        tree: Any = job.status
        for key in parents:
            tree = tree.get(key, {})
        return tree.get(last, 0) == 0

    return f"status.{path} is 0 or absent", holds


def status_unset(path: str) -> Check:
    def holds(job: Job) -> bool:
        parent, _, last = path.rpartition(".")
        tree = at(job.status, parent) if parent else job.status
        return not tree.get(last)

    return f"status.{path} is absent or empty", holds


def status_all_zero(path: str) -> Check:
    """Every value of the map at path is 0 or empty; an absent map has none."""

    def holds(job: Job) -> bool:
        parent, _, last = path.rpartition(".")
        tree = at(job.status, parent) if parent else job.status
        return not any(tree.get(last, {}).values())

    return f"every value of status.{path} is 0", holds


def counts_results(path: str) -> Check:
    return (f"status.{path} is the number of results",
            lambda job: at(job.status, path) == len(job.results))


def results_number(expected: int) -> Check:
    return f"{expected} results", lambda job: len(job.results) == expected


def results_at_least(least: int) -> Check:
    return f"at least {least} results", lambda job: len(job.results) >= least


def results_at_most(most: int) -> Check:
    return f"at most {most} results", lambda job: len(job.results) <= most


def results_more_than(floor: int) -> Check:
    return f"more than {floor} results", lambda job: len(job.results) > floor


def unique_names() -> Check:
    return "no trial recorded twice", lambda job: len(job.names) == len(set(job.names))


def recorded_once() -> Check:
    return ("each launched trial recorded once (distinct names, as many as status.trials.launched)",
            lambda job: len(job.names) == len(set(job.names)) == job.status["trials"]["launched"])


def names_are(*names: str) -> Check:
    return (f"the results are those of {' '.join(names)}",
            lambda job: sorted(job.names) == sorted(names))


def first_trial(spec: str) -> Check:
    """NAME or NAME=OUTCOME: the first result is that trial's (with that outcome)."""
    name, _, outcome = spec.partition("=")

    def holds(job: Job) -> bool:
        first = job.results[0]
        return job.names[0] == name and (not outcome or first["outcome"] == outcome)

    return f"the first result is {name}'s" + (f", {outcome}" if outcome else ""), holds


def outcome_of(spec: Tuple[str, str]) -> Check:
    name, outcome = spec
    return f"{name}'s outcome is {outcome}", lambda job: job.outcomes.get(name) == outcome


def outcomes_are(*specs: str) -> Check:
    expected = dict(pair(spec) for spec in specs)
    return (f"the outcomes are exactly {expected}",
            lambda job: job.outcomes == expected)


def outcome_values(*outcomes: str) -> Check:
    return (f"the outcomes are {sorted(outcomes)}",
            lambda job: sorted(job.outcomes.values()) == sorted(outcomes))


def some_outcome(outcome: str) -> Check:
    return f"some result is {outcome}", lambda job: outcome in job.outcomes.values()


def every_outcome(outcome: str) -> Check:
    return (f"every result is {outcome}",
            lambda job: all(r["outcome"] == outcome for r in job.results))


def outcome_counted(spec: Tuple[str, str]) -> Check:
    key, outcome = spec
    return (f"status.trials.{key} counts the {outcome} results",
            lambda job: job.status["trials"][key] == list(job.outcomes.values()).count(outcome))


def each_reason(spec: Tuple[str, str]) -> Check:
    outcome, text = spec
    return (f"the reason of every {outcome} result holds {text!r}",
            lambda job: all(text in r.get("reason", "") for r in job.results
                            if r["outcome"] == outcome))


def reason_holds(spec: Tuple[str, str]) -> Check:
    name, text = spec
    return f"{name}'s reason holds {text!r}", lambda job: text in job.reasons[name]


def reason_starts(spec: Tuple[str, str]) -> Check:
    name, text = spec
    return f"{name}'s reason begins {text!r}", lambda job: job.reasons[name].startswith(text)


def reason_without_replacement(name: str) -> Check:
    """The operator cut no character of the reason in half (no U+FFFD where bytes were dropped)."""
    return (f"{name}'s reason holds no replacement character",
            lambda job: "\ufffd" not in job.reasons[name])


def reasons_one_line_within(limit: int) -> Check:
    def fits(reason: str) -> bool:
        one_line = not any(ord(c) < 0x20 or c == "\x7f" for c in reason)
        # The quotes of the JSON string do not count.
        return one_line and len(json.dumps(reason, ensure_ascii=False).encode()) <= limit + 2

    return (f"every reason is one line of at most {limit} bytes as a JSON string",
            lambda job: all(fits(reason) for reason in job.reasons.values()))


def best_is(trial: str) -> Check:
    return f"status.best.trial is {trial}", lambda job: job.status["best"]["trial"] == trial


def best_micro_batch_above(least: int) -> Check:
    return (f"the best trial's micro-batch is above {least}",
            lambda job: int(job.status["best"]["trial"].rsplit("tmbspg", 1)[1]) > least)


def each_gpu_model(model: str) -> Check:
    return (f"every result ran on {model}",
            lambda job: all(r.get("gpuModel") == model for r in job.results))


def all_reused() -> Check:
    return ("every result was reused (reusedFrom)",
            lambda job: all(r.get("reusedFrom") for r in job.results))


def none_reused() -> Check:
    return ("no result was reused (reusedFrom)",
            lambda job: not any(r.get("reusedFrom") for r in job.results))


def reused_from_prefix(prefix: str) -> Check:
    return (f"every result was reused from a ConfigMap {prefix}...",
            lambda job: all(r.get("reusedFrom", "").startswith(prefix) for r in job.results))


def fresh_trials(*names: str) -> Check:
    return (f"the results not reused are exactly {' '.join(names) or 'none'}",
            lambda job: sorted(r["name"] for r in job.results if not r.get("reusedFrom"))
            == sorted(names))


def reused_counted() -> Check:
    return ("status.trials.reused counts the reused results",
            lambda job: job.status["trials"]["reused"]
            == sum(1 for r in job.results if r.get("reusedFrom")))


def spaces_succeeded(*spaces: str) -> Check:
    return (f"a result of each of {' '.join(spaces)} Succeeded",
            lambda job: {r["space"] for r in job.results if r["outcome"] == "Succeeded"}
            >= set(spaces))


def model_searches(*specs: str) -> Check:
    """MODEL=JOB=PHASE each: the searches per GPU model, exactly."""
    expected = sorted(tuple(spec.split("=", 2)) for spec in specs)
    if any(len(search) != 3 for search in expected):
        raise ValueError("expected MODEL=JOB=PHASE")
    return (f"status.gpuModels is exactly {expected}",
            lambda job: sorted((m["gpuModel"], m["job"], m["phase"])
                               for m in job.status["gpuModels"]) == expected)


def refused_search(spec: str) -> Check:
    """MODEL=JOB=TEXT: the search of MODEL at JOB Failed, its message holding TEXT, with no best."""
    model, job_name, text = (spec.split("=", 2) + ["", ""])[:3]
    return (f"status.gpuModels has {model} at {job_name} Failed with {text!r} and no best",
            lambda job: any(m["gpuModel"] == model and m["job"] == job_name
                            and m["phase"] == "Failed" and text in m.get("message", "")
                            and "best" not in m for m in job.status["gpuModels"]))


def running_follows_trials() -> Check:
    """Kueue's jobs: Running is True while some trial runs, else False."""
    return ("condition Running is True exactly when status.trials.running is above 0",
            lambda job: job.condition("Running")["status"]
            == ("True" if job.status["trials"].get("running", 0) else "False"))


def same_results_as(path: str) -> Check:
    def summary(results: Iterable[Dict[str, Any]]) -> List[Tuple[Any, ...]]:
        return sorted((r["name"], r["outcome"], r.get("value"), r["durationSeconds"])
                      for r in results)

    with open(path, encoding="utf-8") as earlier:
        expected = summary(json.load(earlier)["status"]["results"])
    return (f"the results (names, outcomes, values, durations) are those of {path}",
            lambda job: summary(job.results) == expected)


JOB_CHECKS: CheckTable = [
    ("--phase", phase_is, "status.phase is PHASE", {"metavar": "PHASE"}),
    ("--phase-not", phase_is_not, "status.phase is not PHASE (or absent)", {"metavar": "PHASE"}),
    ("--condition", condition_status, "condition TYPE has status STATUS",
     {"metavar": "TYPE=STATUS", "value_type": pair}),
    ("--condition-reason", condition_reason, "condition TYPE has reason REASON",
     {"metavar": "TYPE=REASON", "value_type": pair}),
    ("--condition-reason-not", condition_reason_not, "condition TYPE has no reason REASON",
     {"metavar": "TYPE=REASON", "value_type": pair}),
    ("--condition-message", condition_message_holds, "condition TYPE's message holds TEXT",
     {"metavar": "TYPE=TEXT", "value_type": pair}),
    ("--condition-message-starts", condition_message_starts,
     "condition TYPE's message begins TEXT", {"metavar": "TYPE=TEXT", "value_type": pair}),
    ("--message", message_holds, "status.message holds TEXT", {"metavar": "TEXT"}),
    ("--message-starts", message_starts, "status.message begins TEXT", {"metavar": "TEXT"}),
    ("--equals", status_equals, "status's PATH (dotted) is VALUE, a number or a string",
     {"metavar": "PATH=VALUE", "value_type": pair}),
    ("--near", status_near, "status's PATH is the number VALUE within 1e-9",
     {"metavar": "PATH=VALUE", "value_type": pair}),
    ("--at-least", status_at_least, "status's PATH is at least N",
     {"metavar": "PATH=N", "value_type": pair}),
    ("--above", status_above, "status's PATH is above N",
     {"metavar": "PATH=N", "value_type": pair}),
    ("--zero-or-absent", status_zero_or_absent, "status's PATH is 0, or absent",
     {"metavar": "PATH"}),
    ("--unset", status_unset, "status's PATH is absent or empty", {"metavar": "PATH"}),
    ("--all-zero", status_all_zero, "every value of the map at status's PATH is 0",
     {"metavar": "PATH"}),
    ("--counts-results", counts_results, "status's PATH is the number of results",
     {"metavar": "PATH"}),
    ("--results", results_number, "exactly N results", {"metavar": "N", "value_type": count}),
    ("--results-at-least", results_at_least, "at least N results",
     {"metavar": "N", "value_type": count}),
    ("--results-at-most", results_at_most, "at most N results",
     {"metavar": "N", "value_type": count}),
    ("--results-more-than", results_more_than, "more than N results",
     {"metavar": "N", "value_type": count}),
    ("--unique-names", unique_names, "no trial name recorded twice", {"nargs": 0}),
    ("--recorded-once", recorded_once,
     "distinct result names, as many as status.trials.launched", {"nargs": 0}),
    ("--names", names_are, "the results' names are exactly these",
     {"nargs": "+", "metavar": "NAME"}),
    ("--first-trial", first_trial, "the first result is NAME's (with OUTCOME)",
     {"metavar": "NAME[=OUTCOME]"}),
    ("--outcome", outcome_of, "trial NAME's outcome is OUTCOME",
     {"metavar": "NAME=OUTCOME", "value_type": pair}),
    ("--outcomes", outcomes_are, "the outcomes by trial are exactly these",
     {"nargs": "+", "metavar": "NAME=OUTCOME"}),
    ("--outcome-values", outcome_values, "the outcomes, whatever the trials, are these",
     {"nargs": "+", "metavar": "OUTCOME"}),
    ("--some-outcome", some_outcome, "some result has OUTCOME", {"metavar": "OUTCOME"}),
    ("--every-outcome", every_outcome, "every result has OUTCOME", {"metavar": "OUTCOME"}),
    ("--outcome-counted", outcome_counted, "status.trials.KEY counts the OUTCOME results",
     {"metavar": "KEY=OUTCOME", "value_type": pair}),
    ("--each-reason", each_reason, "every OUTCOME result's reason holds TEXT",
     {"metavar": "OUTCOME=TEXT", "value_type": pair}),
    ("--reason", reason_holds, "trial NAME's reason holds TEXT",
     {"metavar": "NAME=TEXT", "value_type": pair}),
    ("--reason-starts", reason_starts, "trial NAME's reason begins TEXT",
     {"metavar": "NAME=TEXT", "value_type": pair}),
    ("--reason-without-replacement", reason_without_replacement,
     "trial NAME's reason holds no U+FFFD", {"metavar": "NAME"}),
    ("--reasons-one-line-within", reasons_one_line_within,
     "every reason is one line of at most BYTES as a JSON string",
     {"metavar": "BYTES", "value_type": count}),
    ("--best", best_is, "status.best.trial is TRIAL", {"metavar": "TRIAL"}),
    ("--best-micro-batch-above", best_micro_batch_above,
     "the best trial's micro-batch (its name's tmbspg) is above N",
     {"metavar": "N", "value_type": count}),
    ("--each-gpu-model", each_gpu_model, "every result ran on MODEL", {"metavar": "MODEL"}),
    ("--all-reused", all_reused, "every result has reusedFrom", {"nargs": 0}),
    ("--none-reused", none_reused, "no result has reusedFrom", {"nargs": 0}),
    ("--reused-from-prefix", reused_from_prefix, "every result's reusedFrom begins PREFIX",
     {"metavar": "PREFIX"}),
    ("--fresh", fresh_trials, "the results without reusedFrom are exactly these",
     {"nargs": "*", "metavar": "NAME"}),
    ("--reused-counted", reused_counted, "status.trials.reused counts the reused results",
     {"nargs": 0}),
    ("--spaces-succeeded", spaces_succeeded, "some result of each SPACE Succeeded",
     {"nargs": "+", "metavar": "SPACE"}),
    ("--model-searches", model_searches, "status.gpuModels is exactly these searches",
     {"nargs": "+", "metavar": "MODEL=JOB=PHASE"}),
    ("--refused-search", refused_search,
     "status.gpuModels has MODEL's search at JOB Failed, with TEXT and no best",
     {"metavar": "MODEL=JOB=TEXT"}),
    ("--running-follows-trials", running_follows_trials,
     "condition Running is True exactly while some trial runs", {"nargs": 0}),
    ("--same-results-as", same_results_as,
     "names, outcomes, values and durations of the results are those of job FILE",
     {"metavar": "FILE"}),
]


def job_command(arguments: argparse.Namespace) -> int:
    job = Job(json.load(sys.stdin))
    failed = failures(arguments.checks, job)
    for meaning in failed:
        print("not true:", meaning)
    if failed:
        print(trimmed(json.dumps(job.status, indent=1)))
        return EXIT_FAILED
    return 0


# --- the kept measurements -----------------------------------------------------------------------

MEASUREMENT_LABEL = "autotune.io/measurement"
MEASUREMENT_VERSION = "v3"
ENVIRONMENT_LABEL = "autotune.io/environment"
MEASURED_BY = "autotune.io/measured-by"
IDENTITY_KEY, RESULT_KEY = "identity.json", "result.json"


def parsed(text: Any) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return None


def identity_names(name: str, data: Dict[str, str]) -> List[str]:
    """The identities a measurement ConfigMap's data keys name: NAME.identity.json and
    NAME.result.json for each; a v2 one's identity.json and result.json are under its own name."""
    names = set()
    for key in data:
        for suffix in (IDENTITY_KEY, RESULT_KEY):
            if key == suffix:
                names.add(name)
            elif key.endswith("." + suffix):
                names.add(key[:-len(suffix) - 1])
    return sorted(names)


def data_key(configmap: str, identity: str, suffix: str) -> str:
    return suffix if identity == configmap else f"{identity}.{suffix}"


class KeptConfigMap:
    """A ConfigMap labelled autotune.io/measurement, and what the operator reads of it
    (measurements_of's facts: sealed, hashed, environment, readable, trials)."""

    def __init__(self, item: Dict[str, Any], facts: Dict[str, Any]) -> None:
        meta, data = item["metadata"], item.get("data") or {}
        self.name: str = meta["name"]
        self.labels: Dict[str, str] = meta.get("labels") or {}
        self.annotations: Dict[str, str] = meta.get("annotations") or {}
        self.resource_version: str = meta["resourceVersion"]
        self.owners: List[Any] = meta.get("ownerReferences") or []
        self.size: int = sum(len(k) + len(v) for k, v in data.items())
        self.facts = facts
        self.measurements = [Measurement(self, identity, data)
                             for identity in identity_names(self.name, data)]

    @property
    def sealed(self) -> bool:
        return bool(self.facts["sealed"])

    def line(self, namespace: str) -> str:
        trials = ",".join(str(m.trial) for m in self.measurements)
        sound = all(m.sound(namespace) for m in self.measurements)
        return (f"{self.name} v={self.labels.get(MEASUREMENT_LABEL)} rv={self.resource_version}"
                f" by={self.annotations.get(MEASURED_BY)} trials={trials}"
                f" size={self.size} sealed={self.sealed} sound={sound}"
                f" readable={self.facts['readable'] or 'yes'}")


class Measurement:
    """One measurement a KeptConfigMap holds: an identity and its trial's result."""

    def __init__(self, configmap: KeptConfigMap, identity: str, data: Dict[str, str]) -> None:
        self.configmap = configmap
        self.identity_name = identity
        self.identity: Any = parsed(data.get(data_key(configmap.name, identity, IDENTITY_KEY), ""))
        self.result: Any = parsed(data.get(data_key(configmap.name, identity, RESULT_KEY)))
        self.trial: Optional[str] = (self.result.get("name") if isinstance(self.result, dict)
                                     else None)

    def sound(self, namespace: str) -> bool:
        """A measurement as the operator keeps it: under its identity's name, in a ConfigMap it
        sealed and reads, owned by no one, whose environment label is the operator's for that
        identity; its result that of its trial."""
        configmap, identity, result = self.configmap, self.identity, self.result
        return bool(
            configmap.labels.get(MEASUREMENT_LABEL) == MEASUREMENT_VERSION
            and configmap.facts["hashed"] and configmap.sealed and not configmap.facts["readable"]
            and not configmap.owners and isinstance(identity, dict) and isinstance(result, dict)
            and identity.get("namespace") == namespace
            and configmap.labels.get(ENVIRONMENT_LABEL) == configmap.facts["environment"]
            and isinstance(result.get("outcome"), str)
            and configmap.facts["trials"].get(self.identity_name) == self.trial
            and re.fullmatch(r"[^/]+/[^/]+", configmap.annotations.get(MEASURED_BY, "")))


def read_json(path: str) -> Any:
    with open(path, encoding="utf-8") as file:
        return json.load(file)


class Kept:
    """The case's measurement ConfigMaps now (and, if saved, before) and its jobs."""

    def __init__(self, namespace: str, configmaps: str, facts: str, jobs: str,
                 before: Optional[str]) -> None:
        self.namespace = namespace
        known = read_json(facts)
        self.now: Dict[str, KeptConfigMap] = {
            item["metadata"]["name"]: KeptConfigMap(item, known[item["metadata"]["name"]])
            for item in read_json(configmaps)["items"]}
        self.measurements = [m for c in self.now.values() for m in c.measurements]
        self.before: Dict[str, str] = {}
        if before:
            self.before = {item["metadata"]["name"]: item["metadata"]["resourceVersion"]
                           for item in read_json(before)["items"]}
        self.jobs = {j["metadata"]["name"]: j for j in read_json(jobs)["items"]}

    def results(self, job: str) -> Dict[str, Dict[str, Any]]:
        return {r["name"]: r for r in self.jobs[job].get("status", {}).get("results", [])}

    def by(self, job: str) -> Dict[Optional[str], Measurement]:
        """The measurements job measured (autotune.io/measured-by), by trial."""
        return {m.trial: m for m in self.measurements
                if m.configmap.annotations.get(MEASURED_BY) == f"{self.namespace}/{job}"}

    def sound(self, measurement: Measurement) -> bool:
        return measurement.sound(self.namespace)

    def all_sound(self, configmap: str) -> bool:
        """ConfigMap holds measurements, each sound."""
        held = self.now[configmap].measurements
        return bool(held) and all(self.sound(m) for m in held)


def kept_count(expected: int) -> Check:
    return f"{expected} measurements", lambda kept: len(kept.measurements) == expected


def kept_count_is_results(*jobs: str) -> Check:
    return (f"as many measurements as results of {' '.join(jobs)}",
            lambda kept: len(kept.measurements) == sum(len(kept.results(j)) for j in jobs))


def kept_one_per_trial(*jobs: str) -> Check:
    def trials(kept: Kept) -> set:
        return set().union(*(set(kept.results(j)) for j in jobs))

    return (f"as many measurements as trials of {' '.join(jobs)}",
            lambda kept: len(kept.measurements) == len(trials(kept)))


def kept_all_sound() -> Check:
    return ("every measurement is sound",
            lambda kept: all(kept.sound(m) for m in kept.measurements))


def kept_sound(*names: str) -> Check:
    return (f"{' '.join(names)} hold measurements, each sound",
            lambda kept: all(kept.all_sound(n) for n in names))


def kept_sound_by(job: str) -> Check:
    return (f"every measurement of {job} is sound",
            lambda kept: all(kept.sound(k) for k in kept.by(job).values()))


def kept_unsealed(*names: str) -> Check:
    return (f"{' '.join(names)} bear no seal",
            lambda kept: not any(kept.now[n].sealed for n in names))


def kept_unchanged(*names: str) -> Check:
    return (f"{' '.join(names)} have the resourceVersion they had before",
            lambda kept: all(kept.now[n].resource_version == kept.before[n] for n in names))


def kept_resource_version(spec: Tuple[str, str]) -> Check:
    name, version = spec
    return (f"{name} is at resourceVersion {version}",
            lambda kept: kept.now[name].resource_version == version)


def kept_larger_than(spec: Tuple[str, str]) -> Check:
    name, size = spec[0], int(spec[1])
    return (f"{name}'s data is larger than {size}", lambda kept: kept.now[name].size > size)


def kept_all_unchanged() -> Check:
    return ("every ConfigMap of --before is there at the resourceVersion it had",
            lambda kept: bool(kept.before) and all(
                name in kept.now and kept.now[name].resource_version == version
                for name, version in kept.before.items()))


def kept_held_together(spec: Tuple[str, str]) -> Check:
    job, count = spec[0], int(spec[1])
    return (f"the {count} measurements of {job} are held in one ConfigMap",
            lambda kept: len(kept.by(job)) == count
            and len({m.configmap.name for m in kept.by(job).values()}) == 1)


def measured_count(spec: Tuple[str, str]) -> Check:
    job, expected = spec[0], int(spec[1])
    return f"{expected} measurements of {job}", lambda kept: len(kept.by(job)) == expected


def measured_trials(job: str, *trials: str) -> Check:
    return (f"{job} measured exactly {' '.join(trials) or 'nothing'}",
            lambda kept: sorted(kept.by(job)) == sorted(trials))


def measured_results(job: str) -> Check:
    return (f"a measurement of {job} for each of its results, and none other",
            lambda kept: sorted(kept.by(job)) == sorted(kept.results(job)))


def kept_trials_are_results(job: str) -> Check:
    return (f"the measurements are of the trials of {job}'s results, each once",
            lambda kept: sorted(kept.results(job))
            == sorted(str(m.trial) for m in kept.measurements))


def outcomes_kept(job: str) -> Check:
    return (f"each measurement of {job} holds its result's outcome",
            lambda kept: all(k.result["outcome"] == kept.results(job)[t]["outcome"]
                             for t, k in kept.by(job).items()))


def reused_from_kept(job: str) -> Check:
    return (f"each result of {job} for a trial measured by a {job} came from that measurement",
            lambda kept: all(kept.results(job)[t].get("reusedFrom") == m.configmap.name
                             for t, m in kept.by(job).items()))


def reused_where_measured(spec: Tuple[str, str]) -> Check:
    """JOB=EARLIER: what EARLIER measured, JOB took from its measurement, at its value and
    outcome; the rest JOB measured itself."""
    job, earlier = spec

    def holds(kept: Kept) -> bool:
        measured, theirs = kept.results(earlier), kept.by(earlier)
        for trial, result in kept.results(job).items():
            if trial not in measured:
                if result.get("reusedFrom"):
                    return False
            elif not (result.get("reusedFrom") == theirs[trial].configmap.name
                      and result.get("value") == measured[trial].get("value")
                      and result["outcome"] == measured[trial]["outcome"]):
                return False
        return True

    return (f"each result of {job} for a trial {earlier} measured came from {earlier}'s"
            " measurement, of equal value and outcome; no other was reused", holds)


def measured_afresh(spec: Tuple[str, str]) -> Check:
    """JOB=EARLIER: each measurement of JOB holds JOB's start of its trial, not EARLIER's."""
    job, earlier = spec
    return (f"each measurement of {job} holds {job}'s startTime, not {earlier}'s",
            lambda kept: all(k.result["startTime"] == kept.results(job)[t]["startTime"]
                             != kept.results(earlier)[t]["startTime"]
                             for t, k in kept.by(job).items()))


def identities_hold(job: str, spec: str) -> Check:
    """JOB PATH=VALUE: the identity of every measurement of JOB has VALUE at PATH (and some has)."""
    path, value = pair(spec)
    return (f"the identity of each measurement of {job} (one at least) has {path} {value}",
            lambda kept: bool(kept.by(job))
            and all(same_value(at(k.identity, path), value) for k in kept.by(job).values()))


KEPT_CHECKS: CheckTable = [
    ("--count", kept_count, "exactly N measurements", {"metavar": "N", "value_type": count}),
    ("--count-is-results", kept_count_is_results,
     "as many measurements as the jobs' results together", {"nargs": "+", "metavar": "JOB"}),
    ("--one-per-trial", kept_one_per_trial,
     "as many measurements as the jobs have trials together", {"nargs": "+", "metavar": "JOB"}),
    ("--all-sound", kept_all_sound, "every measurement is sound", {"nargs": 0}),
    ("--sound", kept_sound, "these ConfigMaps hold measurements, each sound",
     {"nargs": "+", "metavar": "NAME"}),
    ("--sound-by", kept_sound_by, "every measurement of JOB is sound", {"metavar": "JOB"}),
    ("--unsealed", kept_unsealed, "these bear no seal", {"nargs": "+", "metavar": "NAME"}),
    ("--unchanged", kept_unchanged, "these have their --before resourceVersion",
     {"nargs": "+", "metavar": "NAME"}),
    ("--resource-version", kept_resource_version, "NAME is at resourceVersion RV",
     {"metavar": "NAME=RV", "value_type": pair}),
    ("--larger-than", kept_larger_than, "NAME's data is larger than SIZE",
     {"metavar": "NAME=SIZE", "value_type": pair}),
    ("--all-unchanged", kept_all_unchanged,
     "every ConfigMap of --before is there at its resourceVersion", {"nargs": 0}),
    ("--held-together", kept_held_together, "JOB's N measurements are in one ConfigMap",
     {"metavar": "JOB=N", "value_type": pair}),
    ("--measured-count", measured_count, "JOB measured N of them",
     {"metavar": "JOB=N", "value_type": pair}),
    ("--measured", measured_trials, "the first NAME, a job, measured exactly the trials named"
     " after it", {"nargs": "+", "metavar": "NAME"}),
    ("--measured-results", measured_results, "JOB measured each of its results, no other",
     {"metavar": "JOB"}),
    ("--trials-are-results-of", kept_trials_are_results,
     "the measurements' trials are JOB's results", {"metavar": "JOB"}),
    ("--outcomes-kept", outcomes_kept, "JOB's measurements hold its results' outcomes",
     {"metavar": "JOB"}),
    ("--reused-from-kept", reused_from_kept,
     "JOB's results came from the measurements of a job JOB", {"metavar": "JOB"}),
    ("--reused-where-measured", reused_where_measured,
     "JOB reused exactly what EARLIER measured, at equal value and outcome",
     {"metavar": "JOB=EARLIER", "value_type": pair}),
    ("--measured-afresh", measured_afresh,
     "JOB's measurements hold its start times, not EARLIER's",
     {"metavar": "JOB=EARLIER", "value_type": pair}),
    ("--identity", identities_hold, "every identity JOB measured has VALUE at PATH",
     {"nargs": 2, "metavar": ("JOB", "PATH=VALUE")}),
]


def kept_command(arguments: argparse.Namespace) -> int:
    kept = Kept(arguments.namespace, arguments.configmaps, arguments.facts, arguments.jobs,
                arguments.before)
    failed = failures(arguments.checks, kept)
    for meaning in failed:
        print("not true:", meaning)
    if failed:
        print(trimmed("\n".join(k.line(kept.namespace) for k in kept.now.values())))
        return EXIT_FAILED
    return 0


# --- listings and the audit log ------------------------------------------------------------------


def new_trials(jobs: Dict[str, Any], earlier: str, later: str) -> List[str]:
    """The trials of job `later` that job `earlier` has no result of, sorted."""
    results = {j["metadata"]["name"]: j["status"]["results"] for j in jobs["items"]}
    measured = {r["name"] for r in results[earlier]}
    return sorted(r["name"] for r in results[later] if r["name"] not in measured)


def new_trials_command(arguments: argparse.Namespace) -> int:
    print(" ".join(new_trials(json.load(sys.stdin), arguments.earlier, arguments.later)))
    return 0


def measurement_keys_command(arguments: argparse.Namespace) -> int:
    """The data keys of a measurement ConfigMap that end in the suffix ("result.json", say), one a
    line, or with --trials the trials its results name."""
    configmap = json.load(sys.stdin)
    data = configmap.get("data") or {}
    if arguments.trials:
        held = KeptConfigMap(configmap, {"sealed": False}).measurements
        print("\n".join(str(m.trial) for m in held))
    else:
        print("\n".join(sorted(key for key in data if key.endswith(arguments.suffix))))
    return 0


def audit_events(path: str) -> Iterable[Dict[str, Any]]:
    with open(path, encoding="utf-8") as log:
        for line in log:
            yield json.loads(line)


def created(event: Dict[str, Any], resource: str, namespace: str) -> bool:
    """A successful create of a resource (not of a subresource) in the namespace."""
    ref = event.get("objectRef", {})
    return (event["verb"] == "create" and ref.get("resource") == resource
            and not ref.get("subresource") and ref.get("namespace") == namespace
            and event.get("responseStatus", {}).get("code") == 201)


def objects_created(log: str, resource: str, namespace: str, prefix: str,
                    since: str) -> List[str]:
    """The objects of the resource created in the namespace whose names begin with prefix,
    received at or after since (the audit log's timestamp format; "" for all), sorted."""
    return sorted(event["objectRef"]["name"] for event in audit_events(log)
                  if created(event, resource, namespace)
                  and event["objectRef"].get("name", "").startswith(prefix)
                  and event["requestReceivedTimestamp"] >= since)


def pods_created_command(arguments: argparse.Namespace) -> int:
    names = objects_created(arguments.log, arguments.resource, arguments.namespace,
                            arguments.prefix, arguments.since)
    if names:
        print("\n".join(names))
    return 0


def created_once_command(arguments: argparse.Namespace) -> int:
    """No name of the resource was created twice in the namespace, and some was created."""
    times = collections.Counter(
        event["objectRef"].get("name") for event in audit_events(arguments.log)
        if created(event, arguments.resource, arguments.namespace))
    twice = sorted(name for name, made in times.items() if made > 1)
    print(f"{len(times)} {arguments.resource} created"
          + (f"; more than once: {twice}" if twice else ""))
    return EXIT_FAILED if twice or not times else 0


def configmaps_deleted_command(arguments: argparse.Namespace) -> int:
    """The ConfigMaps deleted (successfully) in the namespace, sorted, one a line."""
    names = sorted(event["objectRef"]["name"] for event in audit_events(arguments.log)
                   if event["verb"] == "delete"
                   and event.get("objectRef", {}).get("resource") == "configmaps"
                   and event["objectRef"].get("namespace") == arguments.namespace
                   and event.get("responseStatus", {}).get("code") == 200)
    print("\n".join(names))
    return 0


def nothing_refused_command(arguments: argparse.Namespace) -> int:
    """No request in the audit log was refused (403)."""
    refused: collections.Counter = collections.Counter()
    for event in audit_events(arguments.log):
        if event.get("responseStatus", {}).get("code") == 403:
            ref = event.get("objectRef", {})
            refused[(event["verb"], ref.get("resource"), ref.get("namespace"))] += 1
    print("refused:", dict(refused) or "none")
    return EXIT_FAILED if refused else 0


def deleted_only_own_command(arguments: argparse.Namespace) -> int:
    """The user deleted nothing in the namespaces that it had not created itself."""
    namespaces = set(arguments.namespaces)
    created_keys, deleted = set(), []
    for event in audit_events(arguments.log):
        ref = event.get("objectRef", {})
        if (event.get("user", {}).get("username") != arguments.user
                or ref.get("namespace") not in namespaces):
            continue
        key = (ref.get("resource"), ref.get("namespace"), ref.get("name"))
        if event["verb"] == "create" and event.get("responseStatus", {}).get("code") == 201:
            created_keys.add(key)
        elif event["verb"] == "delete":
            deleted.append(key)
    foreign = sorted(set(key for key in deleted if key not in created_keys))
    print(f"{len(deleted)} deletes by the operator; of objects it did not create: {foreign}")
    return EXIT_FAILED if foreign else 0


def quota_refused_command(arguments: argparse.Namespace) -> int:
    """At least LEAST Pod creates in the namespace were refused as over quota."""
    refused = 0
    for event in audit_events(arguments.log):
        ref, status = event.get("objectRef", {}), event.get("responseStatus", {})
        if (event["verb"] == "create" and ref.get("resource") == "pods"
                and ref.get("namespace") == arguments.namespace and status.get("code") == 403
                and "exceeded quota" in status.get("message", "")):
            refused += 1
    print(f"{refused} Pod creates refused by the quota")
    return 0 if refused >= arguments.least else EXIT_FAILED


def within_command(arguments: argparse.Namespace) -> int:
    """Two numbers (a metric and what it should be) differ by no more than the tolerance."""
    return 0 if abs(arguments.actual - arguments.expected) <= arguments.tolerance else EXIT_FAILED


# --- events, tables and configs ------------------------------------------------------------------


def warning_holding(lines: Sequence[str], texts: Sequence[str]) -> bool:
    """Some "TYPE MESSAGE" line is a Warning whose message holds every text."""
    return any(line.startswith("Warning ") and all(t in line for t in texts) for line in lines)


def warning_command(arguments: argparse.Namespace) -> int:
    lines = sys.stdin.read().splitlines()
    if warning_holding(lines, arguments.texts):
        return 0
    print("no Warning holding", arguments.texts, "among:")
    print("\n".join(lines) or "(none)")
    return EXIT_FAILED


def reused_said(lines: Sequence[str]) -> Dict[str, str]:
    """Trial -> ConfigMap as the Normal TrialReused Events say: one trial an Event, or several
    (TRIAL (... from ConfigMap NAME); ...)."""
    said = {}
    for line in lines:
        kind, _, message = line.partition(" ")
        if kind != "Normal":
            continue
        single = re.fullmatch(r"Trial (\S+) reused: .* from ConfigMap (\S+)", message)
        if single:
            said[single.group(1)] = single.group(2)
            continue
        for item in message.split(":", 1)[-1].split(";"):
            found = re.fullmatch(r"\s*(\S+) \(.* from ConfigMap (\S+)\)", item)
            if found:
                said[found.group(1)] = found.group(2)
    return said


def reuse_events_command(arguments: argparse.Namespace) -> int:
    """The TrialReused Events name each reused result of the job with its ConfigMap, and no other
    trial; some result is reused."""
    said = reused_said(arguments.events.splitlines())
    results = json.load(sys.stdin)["status"].get("results", [])
    reused = {r["name"]: r["reusedFrom"] for r in results if r.get("reusedFrom")}
    print("TrialReused Events:", said)
    return 0 if said == reused and reused else EXIT_FAILED


def column(header: str, row: str, name: str, following: str) -> str:
    """A column of kubectl's table: its text from under its name to under the next one's."""
    return row[header.index(name):header.index(following)].strip()


def wide_columns_command(arguments: argparse.Namespace) -> int:
    """kubectl get atj -o wide (standard input) shows GPU-HOURS and SAVED as given."""
    header, row = sys.stdin.read().splitlines()[:2]
    used = float(column(header, row, "GPU-HOURS", "SAVED"))
    saved = float(column(header, row, "SAVED", "AGE"))
    return 0 if used == arguments.used and saved == arguments.saved else EXIT_FAILED


def ds_config_problems(config: Dict[str, Any], micro_batch: Optional[int],
                       zero_stage: Optional[int], without: Sequence[str]) -> List[str]:
    problems = []
    if micro_batch is not None and config["train_micro_batch_size_per_gpu"] != micro_batch:
        problems.append(f"micro-batch is not {micro_batch}")
    if zero_stage is not None and config["zero_optimization"]["stage"] != zero_stage:
        problems.append(f"ZeRO stage is not {zero_stage}")
    problems.extend(f"{key} is in it" for key in without if key in config)
    return problems


def ds_config_command(arguments: argparse.Namespace) -> int:
    """A DeepSpeed config (standard input) tuned as given."""
    config = json.load(sys.stdin)
    print(json.dumps(config))
    try:
        problems = ds_config_problems(config, arguments.micro_batch, arguments.zero_stage,
                                      arguments.without)
    except (LookupError, TypeError) as missing:
        problems = [f"missing or malformed: {missing!r}"]
    for problem in problems:
        print(problem)
    return EXIT_FAILED if problems else 0


def results_json_problems(trials: List[Dict[str, Any]], recorded: Sequence[str],
                          best: str) -> List[str]:
    """results.json of an output ConfigMap: the recorded trials, each with its config patch; the
    best alone with none (it ran ds_config.json itself)."""
    names = sorted(t["name"] for t in trials)
    print("results.json:", " ".join(names))
    print("status:      ", " ".join(sorted(recorded)))
    if names != sorted(recorded):
        return ["results.json does not hold the recorded trials"]
    bare = [t["name"] for t in trials if not isinstance(t.get("configPatch"), dict)]
    if bare:
        return ["results.json lacks the config patch of " + ", ".join(bare)]
    unpatched = [t["name"] for t in trials if t["configPatch"] == {}]
    if unpatched != [best]:
        return ["the best trial alone ran ds_config.json itself: " + ", ".join(unpatched)]
    return []


def results_json_command(arguments: argparse.Namespace) -> int:
    problems = results_json_problems(json.load(sys.stdin), arguments.recorded, arguments.best)
    for problem in problems:
        print(problem)
    return EXIT_FAILED if problems else 0


def same_json_command(arguments: argparse.Namespace) -> int:
    """Two files hold the same JSON value."""
    return 0 if read_json(arguments.first) == read_json(arguments.second) else EXIT_FAILED


def data_keys_command(arguments: argparse.Namespace) -> int:
    """The keys of a ConfigMap's data (standard input), sorted, on one line."""
    print(*sorted(json.load(sys.stdin).get("data", {})))
    return 0


def auto_paths(config: Dict[str, Any], prefix: str = "") -> Iterable[str]:
    """Where a DeepSpeed config says "auto", other than the batch keys the operator tunes and its
    autotuning section."""
    tuned = {"train_micro_batch_size_per_gpu", "gradient_accumulation_steps"}
    for key, value in config.items():
        path = prefix + key
        if key == "autotuning":
            continue
        if isinstance(value, dict):
            yield from auto_paths(value, path + ".")
        elif value == "auto" and key not in tuned:
            yield path


def user_values_problems(spec: Dict[str, Any], optimal: Dict[str, Any]) -> List[str]:
    """The optimal config keeps the job's "auto" values and its numeric train_batch_size, which its
    micro-batch x accumulation x data-parallel ranks make, and no autotuning section."""
    given = spec["deepspeedConfig"]
    lost = [path for path in auto_paths(given) if at(optimal, path) != "auto"]
    if lost:
        return [f"auto values lost: {lost}"]
    if isinstance(given.get("train_batch_size"), int):
        batch = given["train_batch_size"]
        if optimal["train_batch_size"] != batch:
            return ["train_batch_size changed"]
        product = optimal["train_micro_batch_size_per_gpu"] * optimal["gradient_accumulation_steps"]
        model_parallel = (spec["resources"].get("modelParallelSize")
                          or given.get("autotuning", {}).get("mp_size", 1))
        ranks = spec["resources"]["gpusPerTrial"] // model_parallel
        if product * ranks != batch:
            return ["the batch keys miss it"]
    if "autotuning" in optimal:
        return ["the autotuning section is left in"]
    return []


def user_values_command(arguments: argparse.Namespace) -> int:
    spec = json.load(sys.stdin)["spec"]
    optimal = read_json(arguments.optimal)
    problems = user_values_problems(spec, optimal)
    if problems:
        print(*problems, sep="\n")
        return EXIT_FAILED
    print("kept:", sorted(auto_paths(spec["deepspeedConfig"])),
          "train_batch_size:", optimal.get("train_batch_size"))
    return 0


def output_per_model_command(arguments: argparse.Namespace) -> int:
    """The output ConfigMap holds each search's best config as ds_config.MODEL.json and, as
    ds_config.json, that of the search whose best is fastest."""
    data = read_json(arguments.configmap)["data"]
    bests = {model: read_json(path)["status"]["best"]
             for model, path in (pair(search) for search in arguments.searches)}
    for name, best in bests.items():
        held = json.loads(data.get(f"ds_config.{name}.json", "null"))
        if held != best["config"]:
            print(f"ds_config.{name}.json is {held}, its search's best config {best['config']}")
            return EXIT_FAILED
    fastest = max(bests, key=lambda name: bests[name]["value"])
    if json.loads(data["ds_config.json"]) != bests[fastest]["config"]:
        print(f"ds_config.json is not {fastest}'s")
        return EXIT_FAILED
    print(f"each model's config; ds_config.json is {fastest}'s")
    return 0


def status_written_command(arguments: argparse.Namespace) -> int:
    """The job (with its managedFields) has one status entry of the manager, dated no earlier than
    the second of its completionTime."""
    job = json.load(sys.stdin)
    entries = [e for e in job["metadata"].get("managedFields", [])
               if e.get("manager") == arguments.manager and e.get("subresource") == "status"]
    completed = job["status"]["completionTime"][:19]
    print("entries:", entries, "completionTime:", completed)
    return 0 if len(entries) == 1 and entries[0]["time"][:19] >= completed else EXIT_FAILED


# --- the node simulator's log --------------------------------------------------------------------


def rank_nodes(log: str, namespace: str) -> Dict[str, List[str]]:
    """The nodes each multi-node trial's Pods were started on, by trial."""
    nodes: Dict[str, List[str]] = collections.defaultdict(list)
    started = re.compile(r"started pod " + re.escape(namespace)
                         + r"/(\S+)-(\d+)-[a-z0-9]{5} on (\S+) ")
    with open(log, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            found = started.search(line)
            if found:
                nodes[found.group(1)].append(found.group(3))
    return nodes


def ranks_on_distinct_nodes_command(arguments: argparse.Namespace) -> int:
    """Each trial had RANKS Pods, each on a node none of the others ran on."""
    nodes = rank_nodes(arguments.log, arguments.namespace)
    print({trial: places for trial, places in sorted(nodes.items())})
    distinct = all(len(set(p)) == len(p) == arguments.ranks for p in nodes.values())
    return 0 if nodes and distinct else EXIT_FAILED


# --- the command line ----------------------------------------------------------------------------


def add_checks(parser: argparse.ArgumentParser, table: CheckTable) -> None:
    for option, make, help_text, settings in table:
        add_check(parser, option, make, help_text, **settings)
    parser.set_defaults(checks=[])


def command_line() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    job = commands.add_parser("job", help="checks of an AutotuneJob read from standard input")
    add_checks(job, JOB_CHECKS)
    job.set_defaults(run=job_command)

    kept = commands.add_parser("kept", help="checks of a namespace's measurement ConfigMaps")
    kept.add_argument("--namespace", required=True)
    kept.add_argument("--configmaps", required=True, help="kubectl get configmaps -o json")
    kept.add_argument("--facts", required=True, help="measurements_of's output on them")
    kept.add_argument("--jobs", required=True, help="kubectl get atj -o json of the namespace")
    kept.add_argument("--before", help="the ConfigMaps as saved earlier")
    add_checks(kept, KEPT_CHECKS)
    kept.set_defaults(run=kept_command)

    fresh = commands.add_parser("new-trials", help="trials of LATER that EARLIER has no result of,"
                                " from kubectl get atj -o json on standard input")
    fresh.add_argument("earlier")
    fresh.add_argument("later")
    fresh.set_defaults(run=new_trials_command)

    keys = commands.add_parser("measurement-keys",
                               help="data keys of a measurement ConfigMap on standard input")
    keys.add_argument("suffix", nargs="?", default="")
    keys.add_argument("--trials", action="store_true", help="the trials its results name instead")
    keys.set_defaults(run=measurement_keys_command)

    pods = commands.add_parser("pods-created", help="Pods (or --resource) created, from the audit log")
    pods.add_argument("--resource", default="pods")
    pods.add_argument("log")
    pods.add_argument("namespace")
    pods.add_argument("prefix")
    pods.add_argument("since", nargs="?", default="")
    pods.set_defaults(run=pods_created_command)

    once = commands.add_parser("created-once", help="no name created twice (audit log)")
    once.add_argument("log")
    once.add_argument("namespace")
    once.add_argument("resource")
    once.set_defaults(run=created_once_command)

    deleted = commands.add_parser("configmaps-deleted", help="ConfigMaps deleted (audit log)")
    deleted.add_argument("log")
    deleted.add_argument("namespace")
    deleted.set_defaults(run=configmaps_deleted_command)

    refused = commands.add_parser("nothing-refused", help="no request refused (audit log)")
    refused.add_argument("log")
    refused.set_defaults(run=nothing_refused_command)

    own = commands.add_parser("deleted-only-own", help="USER deleted only what it created in the"
                              " NAMESPACES (audit log)")
    own.add_argument("log")
    own.add_argument("user")
    own.add_argument("namespaces", nargs="+")
    own.set_defaults(run=deleted_only_own_command)

    quota = commands.add_parser("quota-refused", help="at least LEAST Pod creates refused over"
                                " quota (audit log)")
    quota.add_argument("log")
    quota.add_argument("namespace")
    quota.add_argument("least", type=count)
    quota.set_defaults(run=quota_refused_command)

    warning = commands.add_parser("warning", help="some \"TYPE MESSAGE\" line of standard input"
                                  " is a Warning holding every TEXT")
    warning.add_argument("texts", nargs="+", metavar="TEXT")
    warning.set_defaults(run=warning_command)

    reuse = commands.add_parser("reuse-events", help="the TrialReused Events (EVENTS, TYPE MESSAGE"
                                " lines) name each reused result of the job on standard input")
    reuse.add_argument("events")
    reuse.set_defaults(run=reuse_events_command)

    wide = commands.add_parser("wide-columns", help="kubectl get atj -o wide on standard input"
                               " shows GPU-HOURS USED and SAVED")
    wide.add_argument("used", type=number)
    wide.add_argument("saved", type=number)
    wide.set_defaults(run=wide_columns_command)

    ds_config = commands.add_parser("ds-config", help="a DeepSpeed config on standard input")
    ds_config.add_argument("--micro-batch", type=count)
    ds_config.add_argument("--zero-stage", type=count)
    ds_config.add_argument("--without", action="append", default=[], metavar="KEY")
    ds_config.set_defaults(run=ds_config_command)

    results_json = commands.add_parser("results-json", help="an output ConfigMap's results.json"
                                       " on standard input")
    results_json.add_argument("--best", required=True)
    results_json.add_argument("--recorded", nargs="*", default=[], metavar="TRIAL")
    results_json.set_defaults(run=results_json_command)

    same = commands.add_parser("same-json", help="two files hold the same JSON")
    same.add_argument("first")
    same.add_argument("second")
    same.set_defaults(run=same_json_command)

    keys = commands.add_parser("data-keys", help="a ConfigMap's data keys, from standard input")
    keys.set_defaults(run=data_keys_command)

    user_values = commands.add_parser("user-values", help="the optimal config OPTIMAL keeps what"
                                      " the job on standard input fixed")
    user_values.add_argument("optimal")
    user_values.set_defaults(run=user_values_command)

    per_model = commands.add_parser("output-per-model", help="the output ConfigMap holds each"
                                    " search's best")
    per_model.add_argument("configmap")
    per_model.add_argument("searches", nargs="+", metavar="MODEL=JOB_FILE")
    per_model.set_defaults(run=output_per_model_command)

    written = commands.add_parser("status-written", help="the job on standard input has one status"
                                  " entry of MANAGER, no older than its completion")
    written.add_argument("manager")
    written.set_defaults(run=status_written_command)

    ranks = commands.add_parser("ranks-on-distinct-nodes", help="each multi-node trial had RANKS"
                                " Pods on distinct nodes (the node simulator's log)")
    ranks.add_argument("log")
    ranks.add_argument("namespace")
    ranks.add_argument("ranks", type=count)
    ranks.set_defaults(run=ranks_on_distinct_nodes_command)

    within = commands.add_parser("within", help="ACTUAL is EXPECTED within TOLERANCE")
    within.add_argument("actual", type=number)
    within.add_argument("expected", type=number)
    within.add_argument("tolerance", type=number)
    within.set_defaults(run=within_command)
    return parser


def main(argv: Sequence[str]) -> int:
    parser = command_line()
    arguments = parser.parse_args(argv)
    if arguments.command in ("job", "kept") and not arguments.checks:
        parser.error(f"{arguments.command}: no check given")
    return arguments.run(arguments)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
