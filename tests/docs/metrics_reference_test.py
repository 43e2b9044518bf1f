#!/usr/bin/env python3
"""The metrics reference of docs/operator.md ("Metrics") names exactly the metrics the code defines.

    metrics_reference_test.py SOURCE_DIR [METRICS_CPP]

The code's metrics are the operator's own names in METRICS_CPP (by default
SOURCE_DIR/src/observability/metrics.cpp), as tests/support/operator_metrics.py reads them: the
families registered with `.Name("...")` and those built at each scrape. The reference is the table
of the section "## Metrics", one row per metric: `name` | type | labels | meaning. Fails when the
table misses a metric of the code, lists one the code lacks or lists one twice, when a row's type
is not the one the code gives it (where the code says), or when a row has no meaning.
"""

import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import operator_metrics  # noqa: E402  (tests/support)

DOCUMENT = os.path.join("docs", "operator.md")
SECTION = "## Metrics"
TYPES = ("counter", "gauge", "histogram", "summary")


def cells(line):
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def documented(text):
    """[(line number, name, type, labels, meaning)] of the reference table's rows."""
    lines = text.split("\n")
    try:
        start = lines.index(SECTION)
    except ValueError:
        return None
    rows = []
    for number, line in enumerate(lines[start + 1:], start=start + 2):
        if line.startswith("## "):
            break
        if not line.startswith("|"):
            continue
        row = cells(line)
        name = re.fullmatch(r"`([^`]+)`", row[0])
        if not name:  # the header and its rule
            continue
        row += [""] * (4 - len(row))
        rows.append((number, name.group(1), row[1], row[2], "|".join(row[3:])))
    return rows


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
    return problems


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
    for problem in problems:
        print(problem)
    if problems:
        return 1
    print(f"metrics reference: {DOCUMENT} lists the "
          f"{len(operator_metrics.defined_metrics(metrics_source))} metrics {metrics_source} "
          "defines")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
