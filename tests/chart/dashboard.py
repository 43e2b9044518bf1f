#!/usr/bin/env python3
"""Checks the chart's Grafana dashboard (the file named by the first argument) against the
operator's metrics: every metric has a panel, every query names only metrics the operator exports,
the panels take their Prometheus data source from the ${datasource} variable, and the namespace and
autotunejob variables come from the operator's own series. Prints each problem and exits 1 if there is one.
"""

import json
import re
import sys

# The operator's metrics (DESIGN.md §6), and whether each is a histogram.
METRICS = {
    "autotune_jobs": False,
    "autotune_trials_launched_total": False,
    "autotune_trials_finished_total": False,
    "autotune_trials_relaunched_total": False,
    "autotune_trial_duration_seconds": True,
    "autotune_trial_pending_seconds": True,
    "autotune_best_value": False,
    "autotune_trial_value": False,
    "autotune_trials_queued": False,
    "autotune_gpu_slots": False,
    "autotune_reconcile_total": False,
    "autotune_reconcile_duration_seconds": True,
    "autotune_workqueue_depth": False,
    "autotune_kube_requests_total": False,
    "autotune_watch_restarts_total": False,
    "autotune_leader": False,
}
SERIES = {name: name for name, histogram in METRICS.items() if not histogram}
for name in (name for name, histogram in METRICS.items() if histogram):
    for suffix in ("_bucket", "_sum", "_count"):
        SERIES[name + suffix] = name


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


def main(path):
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
        if not re.fullmatch(rf"label_values\(autotune_trials_launched_total(\{{.*\}})?, {name}\)",
                            query or ""):
            problems.append(f"variable {name} does not come from "
                            f"label_values(autotune_trials_launched_total, {name}): {query}")

    used, ids = set(), set()
    for panel in panels_of(dashboard):
        title = panel.get("title", "?")
        if panel.get("id") in ids:
            problems.append(f"panel {title}: id {panel.get('id')} is used twice")
        ids.add(panel.get("id"))
        if panel.get("type") == "row":
            continue
        if panel.get("datasource", {}).get("uid") != "${datasource}":
            problems.append(f"panel {title}: data source is not ${{datasource}}")
        targets = panel.get("targets", [])
        if not targets:
            problems.append(f"panel {title}: no queries")
        for target in targets:
            expr = target.get("expr", "")
            names = re.findall(r"\bautotune_[a-z_]+", expr)
            if not names:
                problems.append(f"panel {title}: query names no autotune_ metric: {expr}")
            for name in names:
                if name not in SERIES:
                    problems.append(f"panel {title}: {name} is not a series the operator exports")
                else:
                    used.add(SERIES[name])
            if not balanced(expr):
                problems.append(f"panel {title}: unbalanced brackets or quotes: {expr}")
            if "histogram_quantile" in expr and "_bucket" not in expr:
                problems.append(f"panel {title}: histogram_quantile over no _bucket series")
    for name in sorted(set(METRICS) - used):
        problems.append(f"no panel shows {name}")
    for line in problems:
        print(f"{path}: {line}")
    return not problems


if __name__ == "__main__":
    sys.exit(0 if main(sys.argv[1]) else 1)
