#!/usr/bin/env python3
"""The metrics reference of docs/operator.md ("Metrics") names exactly the metrics the code defines.

    metrics_reference_test.py SOURCE_DIR [METRICS_CPP]

The code's metrics are the operator's own names in METRICS_CPP (by default
SOURCE_DIR/src/observability/metrics.cpp), as tests/support/operator_metrics.py reads them: the
families registered with `.Name("...")` and those built at each scrape. The reference is the table
of the section "## Metrics", one row per metric: `name` | type | labels | meaning. Fails when the
table misses a metric of the code, lists one the code lacks or lists one twice, when a row's type
is not the one the code gives it (where the code says), or when a row has no meaning.

The states of `autotune_job_trials` are those SOURCE_DIR/operator/operator_metrics.cpp gives it
(`figures.trials = {{"launched", ...}, ...}`): its row must name each (`state` one of `a`, `b`,
...;), and the chart's values.yaml, where it counts the series per AutotuneJob ("N series per
AutotuneJob", N a number word), must count as many.
"""

import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import markdown_tables  # noqa: E402  (tests/support)
import operator_metrics  # noqa: E402  (tests/support)

DOCUMENT = os.path.join("docs", "operator.md")
SECTION = "## Metrics"
TYPES = ("counter", "gauge", "histogram", "summary")
JOB_TRIALS = "autotune_job_trials"
STATES_SOURCE = os.path.join("operator", "operator_metrics.cpp")
VALUES = os.path.join("charts", "autotune-operator", "values.yaml")
NUMBERS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
           "fifteen sixteen seventeen eighteen nineteen twenty").split()


def documented(text):
    """[(line number, name, type, labels, meaning)] of the reference table's rows."""
    rows = markdown_tables.named_rows(text.split("\n"), SECTION, stop_prefix="## ",
                                      first_table_only=False)
    if rows is None:
        return None
    padded = [(number, name, cells + [""] * (3 - len(cells))) for number, name, cells in rows]
    return [(number, name, cells[0], cells[1], "|".join(cells[2:]))
            for number, name, cells in padded]


def code_states(source_dir):
    """The `state` values of autotune_job_trials, in the order the operator gives them."""
    with open(os.path.join(source_dir, STATES_SOURCE), encoding="utf-8") as file:
        text = file.read()
    found = re.search(r"figures\.trials\s*=\s*\{(.*?)\};", text, re.S)
    return re.findall(r'\{\s*"(\w+)"\s*,', found.group(1)) if found else []


def check_states(source_dir, rows):
    states = code_states(source_dir)
    if not states:
        return [f"{STATES_SOURCE}: no `figures.trials = {{...}}` giving {JOB_TRIALS}'s states"]
    problems = []
    for number, name, _kind, _labels, meaning in rows:
        if name != JOB_TRIALS:
            continue
        listed = re.search(r"`state` one of ([^;]*);", meaning)
        named = re.findall(r"`(\w+)`", listed.group(1)) if listed else []
        if sorted(named) != sorted(states):
            problems.append(f"{DOCUMENT}:{number}: {JOB_TRIALS}'s states are "
                            f"{', '.join(named) or 'not listed as `state` one of ...;'}; "
                            f"{STATES_SOURCE} gives {', '.join(states)}")
    with open(os.path.join(source_dir, VALUES), encoding="utf-8") as file:
        counted = re.findall(rf"{JOB_TRIALS} \((\w+) series per AutotuneJob", file.read())
    for word in counted:
        if word not in NUMBERS or NUMBERS.index(word) != len(states):
            problems.append(f"{VALUES}: counts {word} series of {JOB_TRIALS} per AutotuneJob; "
                            f"{STATES_SOURCE} gives {len(states)} states")
    return problems


def check(source_dir, metrics_source):
    problems = []
    defined = operator_metrics.defined_metrics(metrics_source)
    if not defined:
        return [f"{metrics_source}: defines no autotune_ metric"]
    with open(os.path.join(source_dir, DOCUMENT), encoding="utf-8") as file:
        rows = documented(file.read())
    if rows is None:
        return [f"{DOCUMENT}: no section {SECTION!r}"]
    if not rows:
        return [f"{DOCUMENT}: the section {SECTION!r} has no table of metrics"]
    seen = set()
    for number, name, kind, _labels, meaning in rows:
        where = f"{DOCUMENT}:{number}"
        if name in seen:
            problems.append(f"{where}: {name} is listed twice")
        seen.add(name)
        if name not in defined:
            problems.append(f"{where}: {name} is not a metric {metrics_source} defines")
            continue
        if kind not in TYPES:
            problems.append(f"{where}: {name}'s type {kind!r} is none of {', '.join(TYPES)}")
        elif defined[name] and kind != defined[name]:
            problems.append(f"{where}: {name} is a {defined[name]} in the code, not a {kind}")
        if not meaning.strip():
            problems.append(f"{where}: {name} has no meaning")
    for name in defined:
        if name not in seen:
            problems.append(f"{DOCUMENT}: the table of {SECTION!r} misses {name}, which "
                            f"{metrics_source} defines")
    return problems + check_states(source_dir, rows)


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__)
        return 2
    source_dir = argv[1]
    metrics_source = argv[2] if len(argv) == 3 else os.path.join(
        source_dir, "src", "observability", "metrics.cpp")
    try:
        problems = check(source_dir, metrics_source)
    except OSError as error:
        problems = [str(error)]
    return markdown_tables.report(problems, lambda: (
        f"metrics reference: {DOCUMENT} lists the "
        f"{len(operator_metrics.defined_metrics(metrics_source))} metrics {metrics_source} defines"))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
