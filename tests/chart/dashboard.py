#!/usr/bin/env python3
"""Checks the chart's Grafana dashboard against the operator's metrics:

    dashboard.py DASHBOARD_JSON [METRICS_CPP]

Every metric the operator defines (METRICS_CPP, by default src/observability/metrics.cpp; see
tests/support/operator_metrics.py) has a panel, and every query names only metrics the operator
exports; the panels take their Prometheus data source from the ${datasource} variable; the
namespace and autotunejob variables come from autotune_job_phase, which the operator exports for
every AutotuneJob it caches; every panel has a description; rates and histograms are taken over
$__rate_interval, and histogram quantiles over buckets summed by le. Prints each problem and exits
1 if there is one.
"""

import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import operator_metrics  # noqa: E402  (tests/support)

# Where the variables that pick AutotuneJobs come from: one series per job while it exists.
VARIABLE_SOURCE = "autotune_job_phase"


def series_of(metrics):
    """Each series name a query may use, mapped to its metric: a histogram's _bucket, _sum and
    _count."""
    series = {}
    for name, kind in metrics.items():
        if kind == "histogram":
            for suffix in ("_bucket", "_sum", "_count"):
                series[name + suffix] = name
        else:
            series[name] = name
    return series


def panels_of(dashboard):
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def balanced(expr):
    pairs = {")": "(", "]": "[", "}": "{"}
    stack, quoted = [], None
    for char in expr:
        if quoted:
            quoted = None if char == quoted else quoted
        elif char in "\"'":
            quoted = char
        elif char in "([{":
            stack.append(char)
        elif char in pairs:
            if not stack or stack.pop() != pairs[char]:
                return False
    return not stack and not quoted


def main(path, metrics_source=operator_metrics.DEFAULT_SOURCE):
    try:
        metrics = operator_metrics.defined_metrics(metrics_source)
    except OSError as error:
        print(f"{metrics_source}: cannot read the operator's metrics: {error}")
        return False
    series = series_of(metrics)
    try:
        with open(path, encoding="utf-8") as file:
            dashboard = json.load(file)
    except (OSError, ValueError) as error:
        print(f"{path}: cannot read the dashboard: {error}")
        return False
    problems = []
    variables = {item.get("name"): item for item in dashboard.get("templating", {}).get("list", [])}
    source = variables.get("datasource", {})
    if source.get("type") != "datasource" or source.get("query") != "prometheus":
        problems.append("no Prometheus data source variable named datasource")
    for name in ("namespace", "autotunejob"):
        query = variables.get(name, {}).get("query", {})
        query = query.get("query") if isinstance(query, dict) else query
        if not re.fullmatch(rf"label_values\({VARIABLE_SOURCE}(\{{.*\}})?, {name}\)", query or ""):
            problems.append(f"variable {name} does not come from "
                            f"label_values({VARIABLE_SOURCE}, {name}): {query}")
    for name, variable in variables.items():
        query = variable.get("query", {})
        query = query.get("query") if isinstance(query, dict) else query
        for metric in re.findall(r"\bautotune_[a-z_]+", query or ""):
            if metric not in series:
                problems.append(f"variable {name}: {metric} is not a series the operator exports")

    used, ids = set(), set()
    for panel in panels_of(dashboard):
        title = panel.get("title", "?")
        if panel.get("id") in ids:
            problems.append(f"panel {title}: id {panel.get('id')} is used twice")
        ids.add(panel.get("id"))
        if panel.get("type") == "row":
            continue
        if not str(panel.get("description", "")).strip():
            problems.append(f"panel {title}: no description")
        if panel.get("datasource", {}).get("uid") != "${datasource}":
            problems.append(f"panel {title}: data source is not ${{datasource}}")
        targets = panel.get("targets", [])
        if not targets:
            problems.append(f"panel {title}: no queries")
        for target in targets:
            expr = target.get("expr", "")
            names = list(dict.fromkeys(re.findall(r"\bautotune_[a-z_]+", expr)))
            if not names:
                problems.append(f"panel {title}: query names no autotune_ metric: {expr}")
            for name in names:
                if name not in series:
                    problems.append(f"panel {title}: {name} is not a series the operator exports")
                else:
                    used.add(series[name])
            if not balanced(expr):
                problems.append(f"panel {title}: unbalanced brackets or quotes: {expr}")
            unquoted = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
            for window in re.findall(r"\[([^\]]*)\]", unquoted):
                if window != "$__rate_interval":
                    problems.append(f"panel {title}: range [{window}] is not [$__rate_interval]")
            if "histogram_quantile" in expr and "_bucket" not in expr:
                problems.append(f"panel {title}: histogram_quantile over no _bucket series")
            for start in re.finditer(r"histogram_quantile\(\s*[^,]+,\s*", unquoted):
                summed = re.match(r"sum\s+by\s*\(([^)]*)\)", unquoted[start.end():])
                if not summed or "le" not in re.split(r"\s*,\s*", summed.group(1).strip()):
                    problems.append(f"panel {title}: histogram_quantile not over a sum by (le)")
    for name in sorted(set(metrics) - used):
        problems.append(f"no panel shows {name}")
    for line in problems:
        print(f"{path}: {line}")
    return not problems


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        print(__doc__)
        sys.exit(2)
    sys.exit(0 if main(*sys.argv[1:]) else 1)
