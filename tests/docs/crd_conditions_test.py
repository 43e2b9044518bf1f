#!/usr/bin/env python3
"""The CRD's description of status.conditions names exactly the condition types the code sets.

    crd_conditions_test.py SOURCE_DIR

The code's types are the string_view constants of `namespace condition` in
SOURCE_DIR/src/controller/objects/conditions.h. The CRD's are read from the `description` of the
`conditions` property of `status`, in crds/autotunejobs.autotune.io.yaml and in the chart's copy
(charts/autotune-operator/crds/): each type written as `Type (what it says)`. Fails when the
description misses a type the code declares, names one it does not, or cannot be found.
"""

import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import markdown_tables  # noqa: E402  (tests/support)

CONDITIONS_H = os.path.join("src", "controller", "objects", "conditions.h")
CRDS = (os.path.join("crds", "autotunejobs.autotune.io.yaml"),
        os.path.join("charts", "autotune-operator", "crds", "autotunejobs.autotune.io.yaml"))
COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
DECLARED = re.compile(r'inline\s+constexpr\s+std::string_view\s+k\w+\s*=\s*"([^"]*)"\s*;')
NAMED = re.compile(r"\b([A-Z][A-Za-z0-9]*) \(")


def code_types(source_dir):
    with open(os.path.join(source_dir, CONDITIONS_H), encoding="utf-8") as file:
        text = COMMENT.sub(" ", file.read())
    block = re.search(r"\bnamespace\s+condition\s*\{(.*?)\}", text, re.S)
    return set(DECLARED.findall(block.group(1))) if block else set()


def indent(line):
    return len(line) - len(line.lstrip(" "))


def described_types(text):
    """The types the status.conditions description names, or None when it is not found."""
    lines = text.split("\n")
    in_status = None
    for number, line in enumerate(lines):
        if re.fullmatch(r" +status:\s*", line):
            in_status = indent(line)
            continue
        if in_status is None or not re.fullmatch(r" +conditions:\s*", line) or \
                indent(line) <= in_status:
            continue
        own = indent(line)
        for index in range(number + 1, len(lines)):
            inner = lines[index]
            if inner.strip() and indent(inner) <= own:
                return None
            found = re.fullmatch(r" +description:\s*(.*)", inner)
            if not found or indent(inner) != own + 2:
                continue
            words = found.group(1).strip()
            if words in (">-", ">", "|", "|-"):
                words = ""
                for follow in lines[index + 1:]:
                    if follow.strip() and indent(follow) <= indent(inner):
                        break
                    words += " " + follow.strip()
            return set(NAMED.findall(words))
    return None


def check(source_dir):
    expected = code_types(source_dir)
    if not expected:
        return [f"{CONDITIONS_H}: no constant in namespace condition"]
    problems = []
    for crd in CRDS:
        with open(os.path.join(source_dir, crd), encoding="utf-8") as file:
            named = described_types(file.read())
        if named is None:
            problems.append(f"{crd}: no description of status.conditions")
            continue
        for kind in sorted(expected - named):
            problems.append(f"{crd}: the description of status.conditions misses {kind}, which "
                            f"{CONDITIONS_H} declares (write it as `{kind} (what it says)`)")
        for kind in sorted(named - expected):
            problems.append(f"{crd}: the description of status.conditions names {kind}, which "
                            f"{CONDITIONS_H} does not declare")
    return problems


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    try:
        problems = check(argv[1])
    except OSError as error:
        problems = [str(error)]
    return markdown_tables.report(problems, lambda: (
        f"crd conditions: both CRD copies name the {len(code_types(argv[1]))} condition types "
        f"{CONDITIONS_H} declares"))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
