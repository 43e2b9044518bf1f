#!/usr/bin/env python3
"""The DeepSpeed config corpus: every AutotuneJob in this directory (*.yaml, *.json) is planned
and run with trial-sim, and every DeepSpeed config the run wrote is checked against the job's own
spec.deepspeedConfig.

    corpus_test.py AUTOTUNE TRIAL_SIM_DIR [FILE...]   plan and run each file, check the results
    corpus_test.py --parse-only [FILE...]             read each file and its expectations only

How it works
------------
Input side. The driver reads each job itself, so that it knows the deepspeedConfig the user wrote:
  - .json files with the json module;
  - .yaml files with the small reader below, which covers the subset of YAML the corpus uses (block
    mappings and sequences, flow collections spread over several lines, plain and quoted scalars,
    comments) and resolves plain scalars exactly as the operator's decoder does (scalarToJson in
    src/api/yaml.cpp): YAML 1.1's booleans, as Kubernetes reads them (true/True/TRUE, yes, on, y
    and their false counterparts), and otherwise the YAML 1.2 core schema: `1e9`, `5.0e+8` and
    `16.0` are floats, `16`, `0x10` and `0o10` integers, `~` null, quoted scalars strings. Mapping
    keys stay text. Anything outside that subset (anchors, aliases, tags, block scalars, several
    documents) is refused rather than misread.
Every file also declares what it expects in one line of JSON: a comment `# expect: {...}` near the
top of a YAML file, or the annotation `corpus.autotune.io/expect` of a JSON file (JSON has no
comments; its `corpus.autotune.io/shape` annotation says where the shape comes from, as the
`# Shape:` comment does in YAML). The driver derives the same facts from the parsed config and
refuses a file where they disagree, which catches a misread by the reader as well as an expectation
that drifted from its file. Keys of "expect":
  auto             dotted keys whose value is "auto" other than the two tuned batch keys (and
                   outside `autotuning`): kept verbatim in every config the run writes
  knobs            dotted keys whose value is a list of candidates (tuning dimensions)
  fixedTrainBatch  the numeric train_batch_size, or null
  profiling        whether the run starts with the profiling trial (the job has no spec.model)
  dataParallel     (optional) GPUs per trial ÷ model-parallel size, when the job's autotuning
                   section sets mp_size; else taken from spec.resources
  microBatchRange  (optional) [min, max] every trial's micro-batch lies in
  maxTrainBatch    (optional) bound on every trial's micro-batch × accumulation × data-parallel
                   size
  batchValues      (optional) {key: [allowed values]} for train_micro_batch_size_per_gpu and
                   gradient_accumulation_steps

Output side. For each file: `autotune plan FILE` exits 0 and prints a plan; `autotune run FILE
--gpus 0-(gpusPerTrial × parallelism − 1) --results DIR`, run in a scratch directory with
TRIAL_SIM_DIR first on PATH, exits 0 and leaves DIR/ds_config_optimal.json. Then every
DIR/results/<trial>/ds_config.json (a pruned trial never has one) and ds_config_optimal.json obey:
  1. every "auto" key (expect.auto) is still the string "auto", train_batch_size included;
  2. train_micro_batch_size_per_gpu and gradient_accumulation_steps are positive integers;
  3. with a numeric train_batch_size T: train_batch_size == T and micro-batch × accumulation ×
     data-parallel size == T; without one: a numeric train_batch_size equals that product (the
     profiling trial `profile_model_info` is left out of these batch rules and of the stage rule);
  4. every other key that is neither tuned nor "auto" keeps its value (numbers compare as numbers,
     1e9 == 1000000000; booleans are not numbers);
  5. every knob holds one of its candidates, zero_optimization.stage one of the stages asked for;
  6. ds_config_optimal.json has no `autotuning` key and is the config of one of the trials (less
     the protocol's `autotuning` section, and less train_batch_size when the job gives none:
     DeepSpeed derives it where the tuned config runs);
  7. cmd.txt and cmd_optimal.txt pass each mapped flag (spec.argMappings, else the autotuning
     section's arg_mappings) the value of its key in that config; a mapping whose key names no
     config key, as DeepSpeed's own `"gradient_accumulation_steps "` with its trailing space, is
     not checked (DeepSpeed's autotuner skips it too);
  8. start_profile_step/end_profile_step of the autotuning section reach the trials' autotuning
     section (DeepSpeed's autotuning section read as defaults);
  9. every trial in results.json ended Succeeded or OOM: these configs are valid, so a trial that
     Failed (say, the Trainer refusing a micro-batch flag that contradicts the config), timed out
     or wrote no metrics is a fault even when the search still found a best.
Every failure names the file, the trial (or ds_config_optimal.json) and the key.

AUTOTUNE_CORPUS_KEEP=1 keeps the scratch directories and prints where they are.
"""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
MICRO = "train_micro_batch_size_per_gpu"
GAS = "gradient_accumulation_steps"
TRAIN = "train_batch_size"
STAGE = "zero_optimization.stage"
AUTOTUNING = "autotuning"
PROFILE_TRIAL = "profile_model_info"
EXPECT_ANNOTATION = "corpus.autotune.io/expect"
SHAPE_ANNOTATION = "corpus.autotune.io/shape"
EXPECT_KEYS = {"auto", "knobs", "fixedTrainBatch", "profiling", "dataParallel", "microBatchRange",
               "maxTrainBatch", "batchValues"}
PLAN_TIMEOUT = 60
RUN_TIMEOUT = 300


# ------------------------------------------------------------------------------------------------
# A reader for the subset of YAML the corpus is written in.

class YamlError(Exception):
    pass


class _Incomplete(Exception):
    """A flow collection or quoted scalar goes on past the end of the text read so far."""


_INT = re.compile(r"[-+]?[0-9]+\Z")
_OCT = re.compile(r"0o[0-7]+\Z")
_HEX = re.compile(r"0x[0-9a-fA-F]+\Z")
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?\Z")
_UNSUPPORTED_START = "&*!|>%@`"


_TRUE = ("true", "True", "TRUE", "yes", "Yes", "YES", "y", "Y", "on", "On", "ON")
_FALSE = ("false", "False", "FALSE", "no", "No", "NO", "n", "N", "off", "Off", "OFF")


def resolve_plain(text):
    """A plain scalar as src/api/yaml.cpp's scalarToJson reads it: YAML 1.1 booleans (as
    Kubernetes), else the YAML 1.2 core schema."""
    if text in ("", "~", "null", "Null", "NULL"):
        return None
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    if _INT.match(text):
        return int(text, 10)
    if _OCT.match(text):
        return int(text[2:], 8)
    if _HEX.match(text):
        return int(text[2:], 16)
    if _FLOAT.match(text):
        return float(text)
    return text


def _quoted(text, pos):
    """The quoted scalar starting at text[pos] and the position just after it."""
    quote = text[pos]
    i = pos + 1
    while i < len(text):
        c = text[i]
        if quote == '"' and c == "\\":
            i += 2
            continue
        if c == quote:
            if quote == "'" and i + 1 < len(text) and text[i + 1] == "'":
                i += 2
                continue
            if quote == '"':
                try:
                    return json.loads(text[pos:i + 1]), i + 1
                except ValueError as error:
                    raise YamlError(f"unsupported escape in {text[pos:i + 1]}: {error}") from None
            return text[pos + 1:i].replace("''", "'"), i + 1
        i += 1
    raise _Incomplete()


def _token_starts(line, i):
    """Whether a quote at line[i] opens a quoted scalar (rather than sitting inside a word)."""
    j = i - 1
    while j >= 0 and line[j] == " ":
        j -= 1
    return j < 0 or line[j] in ":-[{,?"


def _strip_comment(line):
    quote = None
    i = 0
    while i < len(line):
        c = line[i]
        if quote:
            if quote == '"' and c == "\\":
                i += 2
                continue
            if c == quote:
                if quote == "'" and i + 1 < len(line) and line[i + 1] == "'":
                    i += 2
                    continue
                quote = None
        elif c == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip()
        elif c in "'\"" and _token_starts(line, i):
            quote = c
        i += 1
    return line.rstrip()


def _is_item(text):
    return text == "-" or text.startswith("- ")


def _split_key(text):
    """(key, rest) for a block mapping entry `key: rest`, or None when the text is not one."""
    if not text or text[0] in "[{":
        return None
    if text[0] in "'\"":
        try:
            key, end = _quoted(text, 0)
        except _Incomplete:
            return None
        rest = text[end:].lstrip(" ")
        if rest == ":" or rest.startswith(": "):
            return key, rest[1:].strip()
        return None
    for i, c in enumerate(text):
        if c == ":" and (i + 1 == len(text) or text[i + 1] == " "):
            key = text[:i].rstrip()
            if not key or key[0] in _UNSUPPORTED_START or key[0] == "?":
                raise YamlError(f"unsupported key {key!r}")
            return key, text[i + 1:].strip()
    return None


class _Flow:
    """A flow collection ([...] or {...}) or scalar, possibly the join of several lines."""

    def __init__(self, text):
        self.text = text
        self.pos = 0

    def parse(self):
        value = self.value()
        self.skip()
        if self.pos != len(self.text):
            raise YamlError(f"unexpected text after a flow value: {self.text[self.pos:]!r}")
        return value

    def skip(self):
        while self.pos < len(self.text) and self.text[self.pos] == " ":
            self.pos += 1

    def peek(self):
        self.skip()
        if self.pos >= len(self.text):
            raise _Incomplete()
        return self.text[self.pos]

    def value(self):
        c = self.peek()
        if c == "[":
            return self.sequence()
        if c == "{":
            return self.mapping()
        if c in "'\"":
            value, self.pos = _quoted(self.text, self.pos)
            return value
        return resolve_plain(self.plain())

    def plain(self):
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] not in ",[]{}":
            if self.text[self.pos] == ":" and (self.pos + 1 == len(self.text)
                                               or self.text[self.pos + 1] in " ,[]{}"):
                break
            self.pos += 1
        token = self.text[start:self.pos].strip()
        if not token:
            raise YamlError(f"an empty entry in {self.text!r}")
        if token[0] in _UNSUPPORTED_START:
            raise YamlError(f"unsupported YAML {token!r}")
        return token

    def sequence(self):
        self.pos += 1
        items = []
        while True:
            if self.peek() == "]":
                self.pos += 1
                return items
            items.append(self.value())
            c = self.peek()
            if c == ",":
                self.pos += 1
            elif c != "]":
                raise YamlError(f"expected ',' or ']' in {self.text!r}")

    def mapping(self):
        self.pos += 1
        result = {}
        while True:
            c = self.peek()
            if c == "}":
                self.pos += 1
                return result
            if c in "'\"":
                key, self.pos = _quoted(self.text, self.pos)
            else:
                key = self.plain()  # keys stay text, as yaml-cpp's Scalar() gives them
            if self.peek() != ":":
                raise YamlError(f"expected ':' after {key!r}")
            self.pos += 1
            value = None if self.peek() in ",}" else self.value()
            if key in result:
                raise YamlError(f"duplicate key {key!r}")
            result[key] = value
            c = self.peek()
            if c == ",":
                self.pos += 1
            elif c != "}":
                raise YamlError(f"expected ',' or '}}' in {self.text!r}")


class _Block:
    def __init__(self, text):
        self.lines = []  # [line number, indent, content]
        for number, raw in enumerate(text.splitlines(), 1):
            body = raw.lstrip(" ")
            if body.startswith("\t"):
                raise YamlError(f"line {number}: tab in indentation")
            content = _strip_comment(raw)
            stripped = content.lstrip(" ")
            if not stripped:
                continue
            if stripped == "---":
                if self.lines:
                    raise YamlError(f"line {number}: a second document is not supported")
                continue
            if stripped.startswith(("...", "%")):
                raise YamlError(f"line {number}: directives and document ends are not supported")
            self.lines.append([number, len(content) - len(stripped), stripped])

    def parse(self):
        if not self.lines:
            raise YamlError("the document is empty")
        value, i = self.block(0, self.lines[0][1])
        if i != len(self.lines):
            raise YamlError(f"line {self.lines[i][0]}: unexpected indentation")
        return value

    def where(self, i):
        return f"line {self.lines[i][0]}"

    def block(self, i, indent):
        text = self.lines[i][2]
        if _is_item(text):
            return self.sequence(i, indent)
        if _split_key(text) is not None:
            return self.mapping(i, indent)
        return self.inline(i, text)

    def nested(self, i, indent):
        """The value of `key:` or `-` with nothing after it on line i."""
        following = i + 1 < len(self.lines)
        if following and (self.lines[i + 1][1] > indent or
                          (self.lines[i + 1][1] == indent and _is_item(self.lines[i + 1][2]))):
            return self.block(i + 1, self.lines[i + 1][1])
        return None, i + 1

    def mapping(self, i, indent):
        result = {}
        while i < len(self.lines):
            _, line_indent, text = self.lines[i]
            if line_indent < indent or (line_indent == indent and _is_item(text)):
                break
            if line_indent > indent:
                raise YamlError(f"{self.where(i)}: unexpected indentation")
            split = _split_key(text)
            if split is None:
                raise YamlError(f"{self.where(i)}: expected 'key: value', found {text!r}")
            key, rest = split
            if key in result:
                raise YamlError(f"{self.where(i)}: duplicate key {key!r}")
            if rest:
                result[key], i = self.inline(i, rest)
            else:
                result[key], i = self.nested(i, indent)
        return result, i

    def sequence(self, i, indent):
        result = []
        while i < len(self.lines):
            number, line_indent, text = self.lines[i]
            if line_indent < indent or (line_indent == indent and not _is_item(text)):
                break
            if line_indent > indent:
                raise YamlError(f"{self.where(i)}: unexpected indentation")
            rest = text[1:].lstrip(" ")
            if not rest:
                value, i = self.nested(i, indent)
            elif _is_item(rest) or _split_key(rest) is not None:
                column = line_indent + len(text) - len(rest)
                self.lines[i] = [number, column, rest]  # `- key: v` opens a mapping at its column
                value, i = self.block(i, column)
            else:
                value, i = self.inline(i, rest)
            result.append(value)
        return result, i

    def inline(self, i, text):
        """A value that starts on line i: a scalar on that line or a flow value over several."""
        if text[0] in _UNSUPPORTED_START:
            raise YamlError(f"{self.where(i)}: unsupported YAML {text!r}")
        if text[0] in "'\"[{":
            j = i
            while True:
                try:
                    return _Flow(text).parse(), j + 1
                except _Incomplete:
                    j += 1
                    if j >= len(self.lines) or text[0] in "'\"":
                        raise YamlError(f"{self.where(i)}: unterminated {text[0]}") from None
                    text += " " + self.lines[j][2]
        return resolve_plain(text), i + 1


def read_yaml(text):
    return _Block(text).parse()


def _reader_self_test():
    """Spellings the corpus relies on, read as src/api/codec.cpp reads them."""
    cases = [
        ("a: 1e9", {"a": 1e9}), ("a: 5.0e+8", {"a": 5.0e8}), ("a: 16.0", {"a": 16.0}),
        ("a: 16", {"a": 16}), ("a: yes", {"a": True}), ("a: No", {"a": False}),
        ("a: on", {"a": True}), ("a: OFF", {"a": False}), ("a: 'yes'", {"a": "yes"}),
        ("a: yEs", {"a": "yEs"}), ("on: 1", {"on": 1}),
        ("a: True", {"a": True}), ("a: FALSE", {"a": False}), ("a: auto", {"a": "auto"}),
        ("a: 'auto'", {"a": "auto"}), ('a: "1"', {"a": "1"}), ("a: ~", {"a": None}),
        ("a: 0x10", {"a": 16}), ("a: .5", {"a": 0.5}), ("a: 2e-5", {"a": 2e-5}),
        ('"k ": v', {"k ": "v"}), ("a: b # c", {"a": "b"}), ("a: 'b # c'", {"a": "b # c"}),
        ("a: [1, 2e8, x]", {"a": [1, 2e8, "x"]}),
        ('a: {"b": [1,\n  2], c: {d: auto}}', {"a": {"b": [1, 2], "c": {"d": "auto"}}}),
        ("a:\n- x: 1\n  y: [p, q]\n- z\nb: 2", {"a": [{"x": 1, "y": ["p", "q"]}, "z"], "b": 2}),
        ("a:\n  b:\n    c: 1\n  d: 2", {"a": {"b": {"c": 1}, "d": 2}}),
        ("a: x:y", {"a": "x:y"}), ("a: /etc/x.json", {"a": "/etc/x.json"}),
    ]
    for text, expected in cases:
        got = read_yaml(text)
        if not same(got, expected):
            raise AssertionError(f"the YAML reader reads {text!r} as {got!r}, not {expected!r}")
    for text in ("a: &x 1", "a: *x", "a: |\n  x", "a: !!str 1", "a: 1\n---\nb: 2", "a: [1, 2"):
        try:
            read_yaml(text)
        except YamlError:
            continue
        raise AssertionError(f"the YAML reader accepts unsupported {text!r}")


# ------------------------------------------------------------------------------------------------
# Values and paths

def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_positive_int(value):
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def same(a, b):
    """Equality as a DeepSpeed config means it: numbers as numbers, booleans apart from them."""
    if is_number(a) and is_number(b):
        return a == b
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def dump(value):
    return json.dumps(value)


def leaves(value, prefix=""):
    """(dotted path, value) of every setting: values that are not sections."""
    for key, child in value.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(child, dict) and child:
            yield from leaves(child, path)
        else:
            yield path, child


def lookup(config, path):
    node = config
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def under(path, section):
    return path == section or path.startswith(section + ".")


def is_plain_list(path, value):
    """Adam's betas and the like: a flat list of numbers under optimizer/scheduler params."""
    return (path.startswith(("optimizer.params.", "scheduler.params.")) and bool(value)
            and all(is_number(v) for v in value))


# ------------------------------------------------------------------------------------------------
# One corpus file

class CorpusError(Exception):
    pass


class Job:
    def __init__(self, path):
        self.path = path
        self.name = path.name
        text = path.read_text()
        try:
            self.document = json.loads(text) if path.suffix == ".json" else read_yaml(text)
        except (ValueError, YamlError) as error:
            raise CorpusError(f"cannot be read: {error}") from None
        if not isinstance(self.document, dict) or not isinstance(self.document.get("spec"), dict):
            raise CorpusError("has no spec")
        self.spec = self.document["spec"]
        self.config = self.spec.get("deepspeedConfig")
        if not isinstance(self.config, dict):
            raise CorpusError("has no spec.deepspeedConfig mapping")
        self.expect = self._expectations(text)
        self._derive()
        self._check_expectations()

    def _expectations(self, text):
        annotations = (self.document.get("metadata") or {}).get("annotations") or {}
        if self.path.suffix == ".json":
            raw = annotations.get(EXPECT_ANNOTATION)
            if not annotations.get(SHAPE_ANNOTATION):
                raise CorpusError(f"has no {SHAPE_ANNOTATION} annotation saying where it comes "
                                  f"from")
        else:
            found = [line[len("# expect:"):] for line in text.splitlines()
                     if line.startswith("# expect:")]
            raw = found[0] if len(found) == 1 else None
            if not any(line.startswith("# Shape:") for line in text.splitlines()):
                raise CorpusError("has no '# Shape:' comment saying where it comes from")
        if raw is None:
            raise CorpusError("must declare exactly one expectation line (see corpus_test.py)")
        try:
            expect = json.loads(raw)
        except ValueError as error:
            raise CorpusError(f"its expectation line is not JSON: {error}") from None
        unknown = set(expect) - EXPECT_KEYS
        missing = {"auto", "knobs", "fixedTrainBatch", "profiling"} - set(expect)
        if unknown or missing:
            raise CorpusError(f"expectation keys: unknown {sorted(unknown)}, "
                              f"missing {sorted(missing)}")
        return expect

    def _derive(self):
        config = self.config
        self.autos = sorted(p for p, v in leaves(config)
                            if v == "auto" and p not in (MICRO, GAS) and not under(p, AUTOTUNING))
        self.knobs = {p: v for p, v in leaves(config)
                      if isinstance(v, list) and not under(p, AUTOTUNING)
                      and p not in (MICRO, GAS, TRAIN, STAGE) and not is_plain_list(p, v)}
        train = config.get(TRAIN)
        self.fixed_train = train if is_number(train) else None
        resources = self.spec.get("resources") or {}
        self.gpus_per_trial = resources.get("gpusPerTrial", 1)
        self.parallelism = self.spec.get("parallelism", 1)
        self.data_parallel = self.expect.get(
            "dataParallel", self.gpus_per_trial // resources.get("modelParallelSize", 1))
        autotuning = config.get(AUTOTUNING) if isinstance(config.get(AUTOTUNING), dict) else {}
        self.autotuning = autotuning
        flags = {k: v for k, v in (autotuning.get("arg_mappings") or {}).items()
                 if isinstance(v, str)}
        flags.update(self.spec.get("argMappings") or {})
        self.arg_flags = flags
        found, stage = lookup(config, STAGE)
        stage = stage if found else 0  # no stage: ZeRO disabled, as in DeepSpeed
        if stage == "all":
            self.stages = [0, 1, 2, 3]
        elif isinstance(stage, list):
            self.stages = stage
        else:
            self.stages = [stage]

    def _check_expectations(self):
        problems = []
        if sorted(self.expect["auto"]) != self.autos:
            problems.append(f"expect.auto {sorted(self.expect['auto'])} but the file reads "
                            f"{self.autos}")
        if sorted(self.expect["knobs"]) != sorted(self.knobs):
            problems.append(f"expect.knobs {sorted(self.expect['knobs'])} but the file reads "
                            f"{sorted(self.knobs)}")
        if not same(self.expect["fixedTrainBatch"], self.fixed_train):
            problems.append(f"expect.fixedTrainBatch {dump(self.expect['fixedTrainBatch'])} but "
                            f"the file reads train_batch_size {dump(self.config.get(TRAIN))}")
        if self.expect["profiling"] != ("model" not in self.spec):
            problems.append(f"expect.profiling {dump(self.expect['profiling'])} but spec.model is "
                            f"{'absent' if 'model' not in self.spec else 'given'}")
        for key, allowed in (self.expect.get("batchValues") or {}).items():
            if key not in (MICRO, GAS) or not all(is_positive_int(v) for v in allowed):
                problems.append(f"expect.batchValues.{key} is not a list of positive integers "
                                f"of a batch key")
        if self.fixed_train is not None and self.fixed_train % self.data_parallel != 0:
            problems.append(f"train_batch_size {self.fixed_train} is not a multiple of the "
                            f"data-parallel size {self.data_parallel}")
        if problems:
            raise CorpusError("; ".join(problems))

    @property
    def gpus(self):
        return f"0-{self.gpus_per_trial * self.parallelism - 1}"


# ------------------------------------------------------------------------------------------------
# Checks on what a run wrote

class Checks:
    def __init__(self, job):
        self.job = job
        self.failures = []

    def fail(self, where, key, message):
        self.failures.append(f"{self.job.name}: {where}: {key}: {message}")

    def config(self, where, written, profiling):
        """Rules 1-5 on one written config; the profiling trial skips the batch and stage rules."""
        job = self.job
        if not isinstance(written, dict):
            self.fail(where, "(document)", f"is not a JSON object: {dump(written)[:80]}")
            return
        for path in job.autos:
            found, value = lookup(written, path)
            if not found:
                self.fail(where, path, 'is missing; the user\'s "auto" must be kept')
            elif value != "auto":
                self.fail(where, path, f'must stay "auto", found {dump(value)}')
        batch = {}
        for key in (MICRO, GAS):
            value = written.get(key)
            if is_positive_int(value):
                batch[key] = value
            else:
                self.fail(where, key, f"must be a positive integer, found {dump(value)}")
        self._kept(where, written)
        self._knobs(where, written)
        if profiling:
            return
        self._stage(where, written)
        if len(batch) == 2:
            self._batch(where, written, batch[MICRO], batch[GAS])

    def _kept(self, where, written):
        job = self.job
        for path, value in leaves(job.config):
            if (under(path, AUTOTUNING) or path in (MICRO, GAS, TRAIN, STAGE)
                    or path in job.knobs or value == "auto"):
                continue
            found, actual = lookup(written, path)
            if not found:
                self.fail(where, path, f"is missing; it must keep {dump(value)}")
            elif not same(actual, value):
                self.fail(where, path, f"must keep {dump(value)}, found {dump(actual)}")

    def _knobs(self, where, written):
        for path, candidates in self.job.knobs.items():
            found, actual = lookup(written, path)
            if not found:
                self.fail(where, path, f"is missing; it must hold one of {dump(candidates)}")
            elif not any(same(actual, c) for c in candidates):
                self.fail(where, path, f"must be one of {dump(candidates)}, found {dump(actual)}")

    def _stage(self, where, written):
        found, stage = lookup(written, STAGE)
        if not found and self.job.stages == [0]:
            return  # DeepSpeed's default: ZeRO disabled
        if not is_number(stage) or stage not in self.job.stages:
            self.fail(where, STAGE, f"must be one of {self.job.stages}, found {dump(stage)}")

    def _batch(self, where, written, micro, accumulation):
        job, expect = self.job, self.job.expect
        product = micro * accumulation * job.data_parallel
        formula = (f"{MICRO} × {GAS} × data-parallel size = {micro} × {accumulation} × "
                   f"{job.data_parallel} = {product}")
        train = written.get(TRAIN)
        if job.fixed_train is not None:
            if not same(train, job.fixed_train):
                self.fail(where, TRAIN, f"must stay {dump(job.fixed_train)}, found {dump(train)}")
            if product != job.fixed_train:
                self.fail(where, TRAIN, f"{formula}, not the fixed {dump(job.fixed_train)}")
        elif TRAIN not in job.autos and TRAIN in written and not (is_number(train) and
                                                                  train == product):
            self.fail(where, TRAIN, f"is {dump(train)} but {formula}")
        for key, allowed in (expect.get("batchValues") or {}).items():
            if written.get(key) not in allowed:
                self.fail(where, key, f"must be one of {allowed}, found {dump(written.get(key))}")
        if "microBatchRange" in expect:
            low, high = expect["microBatchRange"]
            if not low <= micro <= high:
                self.fail(where, MICRO, f"{micro} is outside [{low}, {high}]")
        if "maxTrainBatch" in expect and product > expect["maxTrainBatch"]:
            self.fail(where, TRAIN, f"{formula} exceeds max_train_batch_size "
                                    f"{expect['maxTrainBatch']}")

    def profile_steps(self, where, written):
        for key in ("start_profile_step", "end_profile_step"):
            if key in self.job.autotuning:
                path = f"{AUTOTUNING}.{key}"
                found, actual = lookup(written, path)
                if not found or not same(actual, self.job.autotuning[key]):
                    self.fail(where, path, f"must be the autotuning section's "
                              f"{dump(self.job.autotuning[key])}, found "
                              f"{dump(actual) if found else 'nothing'}")

    def command(self, where, command_file, written):
        """Rule 7: each mapped flag carries the config's value of its key."""
        if not self.job.arg_flags or not isinstance(written, dict):
            return
        try:
            argv = shlex.split(command_file.read_text())
        except (OSError, ValueError) as error:
            self.fail(where, command_file.name, f"cannot be read: {error}")
            return
        for key, flag in sorted(self.job.arg_flags.items()):
            found, value = lookup(written, key)
            if not found or not is_positive_int(value):
                continue  # rule 2 reports a batch key that is not an integer
            passed = None
            for i, word in enumerate(argv):
                if word == flag and i + 1 < len(argv):
                    passed = argv[i + 1]
                elif word.startswith(flag + "="):
                    passed = word[len(flag) + 1:]
            if passed != str(value):
                self.fail(where, key, f"{command_file.name} passes {flag} {passed or '(nothing)'}"
                                      f" but the config holds {value}")


def load_json(path):
    try:
        return json.loads(path.read_text()), None
    except (OSError, ValueError) as error:
        return None, str(error)


def tail(text, lines=15):
    return "\n".join(text.strip().splitlines()[-lines:])


def run_file(job, autotune, trial_sim_dir, scratch):
    checks = Checks(job)
    env = dict(os.environ)
    env["PATH"] = f"{trial_sim_dir}{os.pathsep}{env.get('PATH', '')}"
    env.pop("CUDA_VISIBLE_DEVICES", None)
    work = scratch / "work"
    results = scratch / "results"
    work.mkdir(parents=True)
    source = str(job.path.resolve())

    try:
        plan = subprocess.run([autotune, "plan", source], cwd=work, env=env, text=True,
                              capture_output=True, timeout=PLAN_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        checks.fail("autotune plan", "(exit)", f"did not finish in {PLAN_TIMEOUT}s")
        return checks.failures
    if plan.returncode != 0 or not plan.stdout.strip():
        checks.fail("autotune plan", "(exit)", f"exited {plan.returncode} with "
                    f"{'no plan' if not plan.stdout.strip() else 'a plan'}:\n"
                    f"{tail(plan.stderr + plan.stdout)}")

    command = [autotune, "run", source, "--gpus", job.gpus, "--results", str(results)]
    try:
        run = subprocess.run(command, cwd=work, env=env, text=True, capture_output=True,
                             timeout=RUN_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        checks.fail("autotune run", "(exit)", f"did not finish in {RUN_TIMEOUT}s")
        return checks.failures
    optimal_path = results / "ds_config_optimal.json"
    if run.returncode != 0 or not optimal_path.is_file():
        checks.fail("autotune run", "(exit)",
                    f"exited {run.returncode}"
                    f"{'' if optimal_path.is_file() else ', no ds_config_optimal.json'}"
                    f" ({shlex.join(command)}):\n{tail(run.stdout + run.stderr)}")

    if not (results / "results").is_dir():
        return checks.failures  # the run's own failure above says why

    trials = {}
    for directory in sorted((results / "results").glob("*")):
        name = directory.name
        written, error = load_json(directory / "ds_config.json")
        if error:
            checks.fail(name, "ds_config.json", f"cannot be read: {error}")
            continue
        trials[name] = written
        profiling = name == PROFILE_TRIAL
        checks.config(name, written, profiling)
        if not profiling:
            checks.profile_steps(name, written)
        checks.command(name, directory / "cmd.txt", written)

    records, error = load_json(results / "results.json")
    if error:
        checks.fail("results", "results.json", f"cannot be read: {error}")
    for record in (records or {}).get("trials", []) if isinstance(records, dict) else []:
        if record.get("outcome") not in ("Succeeded", "OOM"):
            reason = " / ".join(str(record.get("reason", "")).strip().splitlines())
            checks.fail(record.get("name", "?"), "outcome",
                        f"{record.get('outcome')}: {reason[:400]}")

    if job.expect["profiling"] and PROFILE_TRIAL not in trials:
        checks.fail("results", PROFILE_TRIAL,
                    "the job has no spec.model, so it should profile first")
    if not job.expect["profiling"] and PROFILE_TRIAL in trials:
        checks.fail("results", PROFILE_TRIAL, "the job gives spec.model; nothing to profile")
    if not [name for name in trials if name != PROFILE_TRIAL]:
        checks.fail("results", "results/*/ds_config.json", "no trial config was written")

    if optimal_path.is_file():
        where = "ds_config_optimal.json"
        optimal, error = load_json(optimal_path)
        if error:
            checks.fail(where, "(document)", f"cannot be read: {error}")
        else:
            if isinstance(optimal, dict) and AUTOTUNING in optimal:
                checks.fail(where, AUTOTUNING, "must not be in the optimal config")
            checks.config(where, optimal, profiling=False)
            # Without a train_batch_size of the job's own, DeepSpeed derives it where the tuned
            # config runs: the optimal config leaves out the one each trial was given.
            derived = TRAIN not in job.config
            if derived and isinstance(optimal, dict) and TRAIN in optimal:
                checks.fail(where, TRAIN, "the job gives none: it is DeepSpeed's to derive")
            dropped = {AUTOTUNING, TRAIN} if derived else {AUTOTUNING}
            stripped = {name: {k: v for k, v in c.items() if k not in dropped}
                        for name, c in trials.items()
                        if name != PROFILE_TRIAL and isinstance(c, dict)}
            if not any(same(optimal, c) for c in stripped.values()):
                checks.fail(where, "(document)", "is the config of no trial (less its autotuning "
                                                 "section)")
            if (results / "cmd_optimal.txt").is_file():
                checks.command(where, results / "cmd_optimal.txt", optimal)
            else:
                checks.fail(where, "cmd_optimal.txt", "is missing")
    return checks.failures


# ------------------------------------------------------------------------------------------------

def corpus_files(arguments):
    if arguments:
        return [Path(a) for a in arguments]
    return sorted(p for p in HERE.iterdir() if p.suffix in (".yaml", ".json"))


def read_jobs(files):
    jobs, failures = [], []
    readme = (HERE / "README.md").read_text() if (HERE / "README.md").is_file() else ""
    for path in files:
        try:
            jobs.append(Job(path))
        except CorpusError as error:
            failures.append(f"{path.name}: {error}")
            continue
        if path.parent.resolve() == HERE and f"`{path.name}`" not in readme:
            failures.append(f"{path.name}: is not described in tests/configs/README.md")
    return jobs, failures


def main(argv):
    if len(argv) >= 1 and argv[0] == "--parse-only":
        _reader_self_test()
        jobs, failures = read_jobs(corpus_files(argv[1:]))
        for job in jobs:
            print(f"ok - {job.name}: {len(job.autos)} auto keys, knobs {sorted(job.knobs)}, "
                  f"stages {job.stages}, train_batch_size {dump(job.config.get(TRAIN))}, "
                  f"data-parallel {job.data_parallel}, --gpus {job.gpus}, flags "
                  f"{dump(job.arg_flags)}")
        for failure in failures:
            print(f"not ok - {failure}")
        return 1 if failures else 0
    if len(argv) < 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    autotune, trial_sim_dir = str(Path(argv[0]).resolve()), str(Path(argv[1]).resolve())
    for needed in (Path(autotune), Path(trial_sim_dir) / "trial-sim"):
        if not os.access(needed, os.X_OK):
            print(f"corpus_test: {needed} is not an executable", file=sys.stderr)
            return 2
    _reader_self_test()
    jobs, failures = read_jobs(corpus_files(argv[2:]))
    for failure in failures:
        print(f"not ok - {failure}")
    keep = os.environ.get("AUTOTUNE_CORPUS_KEEP") == "1"
    root = Path(tempfile.mkdtemp(prefix="autotune-corpus-"))
    failed_files = len(failures)
    try:
        for job in jobs:
            job_failures = run_file(job, autotune, trial_sim_dir, root / job.path.stem)
            if job_failures:
                failed_files += 1
                print(f"not ok - {job.name}")
                for failure in job_failures:
                    print("    " + failure.replace("\n", "\n        "))
            else:
                print(f"ok - {job.name}")
            sys.stdout.flush()
    finally:
        if keep:
            print(f"corpus_test: results kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    total = len(jobs) + len(failures)
    print(f"corpus_test: {total - failed_files} of {total} files passed")
    return 1 if failed_files else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
