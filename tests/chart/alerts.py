#!/usr/bin/env python3
"""The chart's PrometheusRule, for alerts_test.sh.

Reads the rendered objects as a stream of JSON documents on stdin (as manifests.py does) and runs
one command, named by the first argument. A check prints what it found wrong, one line each, and
exits 1; or prints what was asked for and exits 0.

  rules                    the PrometheusRule's spec as a Prometheus rule file (JSON, which is
                           YAML), for promtool
  annotated DOC            every alert has a summary, a description and a runbook_url whose
                           fragment names a heading of DOC (Markdown, GitHub's anchors)
  tested TESTS             every alert has a case in the promtool test file TESTS where it fires
                           and one where it stays quiet (`exp_alerts: []`)
  names                    the rules' names (alert or record), in order
  field ALERT KEY          the value of KEY (expr, for, or an annotation) in the rule of ALERT
"""

import json
import re
import sys

from manifests import one, run


def rules_of(objects):
    return [rule for group in one(objects, "PrometheusRule")["spec"]["groups"]
            for rule in group["rules"]]


def alerts_of(objects):
    return [rule for rule in rules_of(objects) if "alert" in rule]


def rules(objects, _args):
    json.dump({"groups": one(objects, "PrometheusRule")["spec"]["groups"]}, sys.stdout, indent=1)
    return True


def anchor(heading):
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces to dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def annotated(objects, args):
    with open(args[0], encoding="utf-8") as doc:
        anchors = {anchor(line.lstrip("#")) for line in doc if line.startswith("#")}
    problems = []
    for rule in alerts_of(objects):
        annotations = rule.get("annotations", {})
        for key in ("summary", "description", "runbook_url"):
            if not annotations.get(key, "").strip():
                problems.append(f"{rule['alert']}: no {key} annotation")
        fragment = annotations.get("runbook_url", "").partition("#")[2]
        if fragment not in anchors:
            problems.append(f"{rule['alert']}: runbook_url fragment #{fragment} names no "
                            f"heading of {args[0]}")
    for line in problems:
        print(line)
    return not problems


def tested(objects, args):
    """Reads the test file as text: Python's standard library has no YAML parser. Each case is
    an `alertname:` line followed by its `exp_alerts:`, either `[]` or a list below it."""
    with open(args[0], encoding="utf-8") as tests:
        cases = re.findall(r"^\s*alertname:\s*(\S+)\s*\n\s*exp_alerts:\s*(\[\])?", tests.read(),
                           re.MULTILINE)
    fires = {name for name, empty in cases if not empty}
    quiet = {name for name, empty in cases if empty}
    problems = []
    for rule in alerts_of(objects):
        if rule["alert"] not in fires:
            problems.append(f"{rule['alert']}: no case where it fires")
        if rule["alert"] not in quiet:
            problems.append(f"{rule['alert']}: no case where it stays quiet")
    for line in problems:
        print(line)
    return not problems


def names(objects, _args):
    for rule in rules_of(objects):
        print(rule.get("alert") or rule.get("record"))
    return True


def field(objects, args):
    found = [rule for rule in alerts_of(objects) if rule["alert"] == args[0]]
    if len(found) != 1:
        print(f"expected one alert {args[0]}, found {len(found)}")
        return False
    print(found[0].get(args[1], found[0].get("annotations", {}).get(args[1], "")))
    return True


COMMANDS = {
    "rules": rules,
    "annotated": annotated,
    "tested": tested,
    "names": names,
    "field": field,
}

if __name__ == "__main__":
    run(COMMANDS)
