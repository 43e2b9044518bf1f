"""The operator's metrics as its code defines them, for the tests that check what names them (the
metrics reference in docs/operator.md, the chart's dashboard).

Every string literal of src/observability/metrics.cpp that is a whole metric name of the
operator's own, `autotune_` then lower-case letters and underscores, is one: the families
registered with `.Name("...")` and those built at each scrape from the cache of AutotuneJobs.
Comments are left out. A metric's type is known where the file says it beside the name:
`Build<Type>() ... .Name("name")`, or `{"name", "help", MetricType::<Type>, ...}`; else it is None.
The standard process_* metrics are not among them.
"""

import os
import re

DEFAULT_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src",
                              "observability", "metrics.cpp")

NAME = r"autotune_[a-z_]+"
# C++ string and character literals, and comments: the literals kept, the comments dropped.
TOKENS = re.compile(r'("(?:[^"\\\n]|\\.)*")|(\'(?:[^\'\\\n]|\\.)*\')|(//[^\n]*|/\*.*?\*/)', re.S)
LITERAL = re.compile(rf'"({NAME})"')
BUILT = re.compile(rf'Build(Counter|Gauge|Histogram|Summary)\(\)\s*\.Name\(\s*"({NAME})"\s*\)')
FAMILY = re.compile(rf'"({NAME})"\s*,\s*(?:"(?:[^"\\\n]|\\.)*"\s*)+,'
                    r"\s*MetricType::(Counter|Gauge|Histogram|Summary)\b")


def without_comments(text):
    return TOKENS.sub(lambda match: match.group(1) or match.group(2) or " ", text)


def defined_metrics(path=DEFAULT_SOURCE):
    """{name: "counter" | "gauge" | "histogram" | "summary" | None} of the metrics the file
    defines, in the order the file first names them."""
    with open(path, encoding="utf-8") as file:
        text = without_comments(file.read())
    metrics = {name: None for name in LITERAL.findall(text)}
    for kind, name in BUILT.findall(text):
        metrics[name] = kind.lower()
    for name, kind in FAMILY.findall(text):
        metrics[name] = kind.lower()
    return metrics
