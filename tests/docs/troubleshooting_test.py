#!/usr/bin/env python3
"""The troubleshooting tables of docs/operations.md name exactly the reasons the code gives.

    troubleshooting_test.py SOURCE_DIR

The code's reasons are read from the C++ sources of SOURCE_DIR/src/controller, comments left out:

  - condition reasons: the reason argument of `setCondition(status, TYPE, value, REASON, ...)`,
    of `setRunning(value, REASON, ...)` and `say(REASON, ...)` (condition Running), of
    `endRunning(draft, SUCCEEDED, REASON, ...)` (condition Complete when SUCCEEDED is `true`, else
    Failed), and the first member of `OutputRefusal{REASON, ...}` (condition OutputWritten, and
    the Warning Event `awaitOutput` posts with it);
  - Event reasons: the first member of every `{REASON, "Normal" | "Warning", ...}` JobEvent of
    events.cpp, and the first argument of its `aboutTrials(REASON, ...)` calls; a REASON that is a
    call of a function of that file stands for every string that function returns.

A REASON is a string literal, a constant of the controller's headers (`queued::kQuotaExceeded`,
`kCompletedReason`), or a `?:` choice between them; any other expression (a parameter passed on)
is the caller's, read where the caller gives it. A TYPE is read the same way, from the constants
of `namespace condition` in conditions.h.

The document's reasons are the rows of the table under "### Conditions and Events", one per
reason: `Reason` | where | what the user sees | cause | fix. Its "where" cell must name, as
`Type` or `Type=Status`, exactly the condition types the code gives that reason, and say "Event"
exactly when the code posts an Event with it. The rows of the table under "### Trial outcomes"
must be exactly the outcomes the operator records: each `api::Outcome::k...` that
src/tuning/protocol.cpp or src/controller gives to `ended(...)`, `recordOf(...)` or
`.outcome =`, spelt as src/api/job.cpp spells it.

Fails when a table misses a reason or outcome the code gives, names one the code never gives,
names one twice, or a row's cells are empty or name the wrong condition types.
"""

import glob
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import markdown_tables  # noqa: E402  (tests/support)

DOCUMENT = os.path.join("docs", "operations.md")
REASONS_SECTION = "### Conditions and Events"
OUTCOMES_SECTION = "### Trial outcomes"
CONTROLLER = os.path.join("src", "controller")
PROTOCOL = os.path.join("src", "tuning", "protocol.cpp")
SPELLINGS = os.path.join("src", "api", "job.cpp")

# C++ string and character literals, and comments: the literals kept, the comments dropped.
TOKENS = re.compile(r'("(?:[^"\\\n]|\\.)*")|(\'(?:[^\'\\\n]|\\.)*\')|(//[^\n]*|/\*.*?\*/)', re.S)
STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
CONSTANT = re.compile(r"\b(?:(\w+)::)?(k[A-Z]\w*)\b")
DECLARED = re.compile(r'inline\s+constexpr\s+std::string_view\s+(k\w+)\s*=\s*"([^"]*)"\s*;')
NAMESPACE = re.compile(r"\bnamespace\s+(\w+)\s*\{")
REASON_NAME = re.compile(r"[A-Z][A-Za-z0-9]*")
OUTCOME = re.compile(r"\bapi::Outcome::k(\w+)")
SPELLING = re.compile(r'\{\s*Outcome::k(\w+)\s*,\s*"(\w+)"\s*\}')


def without_comments(text):
    return TOKENS.sub(lambda match: match.group(1) or match.group(2) or " ", text)


def read(path):
    with open(path, encoding="utf-8") as file:
        return without_comments(file.read())


def sources(source_dir):
    """{file name: text without comments} of src/controller's headers and sources, every layer's."""
    paths = sorted(glob.glob(os.path.join(source_dir, CONTROLLER, "*", "*.h")) +
                   glob.glob(os.path.join(source_dir, CONTROLLER, "*", "*.cpp")))
    return {os.path.basename(path): read(path) for path in paths}


def constants(texts):
    """{"kName": value, "ns::kName": value} of the string_view constants the headers declare."""
    found = {}
    for name, text in texts.items():
        if not name.endswith(".h"):
            continue
        # The innermost named namespace that encloses each declaration.
        opened = [(match.start(), match.group(1)) for match in NAMESPACE.finditer(text)]
        for match in DECLARED.finditer(text):
            enclosing = None
            for start, namespace in opened:
                if start < match.start():
                    depth = text.count("{", start, match.start()) - text.count(
                        "}", start, match.start())
                    if depth > 0:
                        enclosing = namespace
            found[match.group(1)] = match.group(2)
            if enclosing:
                found[f"{enclosing}::{match.group(1)}"] = match.group(2)
    return found


def closing(text, opening):
    """The index just past the bracket that closes the one at `opening`."""
    pairs = {"(": ")", "{": "}", "[": "]"}
    depth, index = 0, opening
    while index < len(text):
        char = text[index]
        if char == '"':
            index = STRING.match(text, index).end()
            continue
        if char in pairs:
            depth += 1
        elif char in pairs.values():
            depth -= 1
            if depth == 0:
                return index + 1
        index += 1
    return len(text)


def split_arguments(inside):
    """The top-level comma-separated parts of a bracket's contents."""
    parts, depth, current, index = [], 0, "", 0
    while index < len(inside):
        char = inside[index]
        if char == '"':
            end = STRING.match(inside, index).end()
            current += inside[index:end]
            index = end
            continue
        if char in "({[":
            depth += 1
        elif char in ")}]":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
        index += 1
    if current.strip():
        parts.append(current.strip())
    return parts


def calls(text, name):
    """The argument lists of every `name(...)` (a call, or the function's own definition)."""
    for match in re.finditer(rf"(?<![\w:.>]){name}\s*\(|(?<=[.>]){name}\s*\(", text):
        opening = match.end() - 1
        yield split_arguments(text[opening + 1:closing(text, opening) - 1])


def braced(text, marker):
    """The member lists of every braced list that follows `marker` (a regex ending in `{`)."""
    for match in re.finditer(marker, text):
        opening = match.end() - 1
        yield split_arguments(text[opening + 1:closing(text, opening) - 1])


def values_of(expression, known):
    """The strings an expression stands for: its literals and known constants; empty when it is
    something else (a parameter passed on)."""
    literals = STRING.findall(expression)
    named = []
    for namespace, name in CONSTANT.findall(expression):
        key = f"{namespace}::{name}" if namespace else name
        if key in known:
            named.append(known[key])
        elif name in known and not namespace:
            named.append(known[name])
    return [value for value in literals + named if REASON_NAME.fullmatch(value)]


def returned_by(text, function, known):
    """The strings a function of `text` returns, by its definition's `return` statements."""
    definition = re.search(rf"\b[\w:<>]+\s+{function}\s*\([^)]*\)\s*\{{", text)
    if not definition:
        return []
    body = text[definition.end() - 1:closing(text, definition.end() - 1)]
    found = []
    for statement in re.findall(r"\breturn\b([^;]*);", body):
        found += values_of(statement, known)
    return found


def code_reasons(source_dir):
    """({condition reason: {types}}, {Event reasons}) as the controller's code gives them."""
    texts = sources(source_dir)
    known = constants(texts)
    types = {key: value for key, value in known.items() if key.startswith("condition::")}
    conditions, events = {}, set()

    def condition(reason, kinds):
        conditions.setdefault(reason, set()).update(kinds)

    for text in texts.values():
        for arguments in calls(text, "setCondition"):
            if len(arguments) >= 4:
                kinds = values_of(arguments[1], types)
                for reason in values_of(arguments[3], known):
                    condition(reason, kinds)
        for arguments in calls(text, "setRunning"):
            if len(arguments) >= 2:
                for reason in values_of(arguments[1], known):
                    condition(reason, {"Running"})
        for arguments in calls(text, "say"):
            if arguments:
                for reason in values_of(arguments[0], known):
                    condition(reason, {"Running"})
        for arguments in calls(text, "endRunning"):
            if len(arguments) >= 3 and arguments[1] in ("true", "false"):
                kind = "Complete" if arguments[1] == "true" else "Failed"
                for reason in values_of(arguments[2], known):
                    condition(reason, {kind})
        for members in braced(text, r"\bOutputRefusal\s*\{"):
            for reason in values_of(members[0], known) if members else []:
                condition(reason, {"OutputWritten"})
                events.add(reason)
    text = texts.get("events.cpp", "")
    for members in braced(text, r"\breturn\s*\{"):
        if len(members) >= 2 and STRING.fullmatch(members[1]) and \
                STRING.fullmatch(members[1]).group(1) in ("Normal", "Warning"):
            events.update(values_of(members[0], known))
    for arguments in calls(text, "aboutTrials"):
        if not arguments:
            continue
        called = re.fullmatch(r"(\w+)\s*\(.*\)", arguments[0], re.S)
        if called:
            events.update(returned_by(text, called.group(1), known))
        else:
            events.update(values_of(arguments[0], known))
    return conditions, events


def code_outcomes(source_dir):
    """The outcomes the operator records, spelt as the API spells them."""
    with open(os.path.join(source_dir, SPELLINGS), encoding="utf-8") as file:
        spelt = dict(SPELLING.findall(file.read()))
    texts = [read(os.path.join(source_dir, PROTOCOL))] + list(sources(source_dir).values())
    found = set()
    for text in texts:
        for name in ("ended", "recordOf"):
            for arguments in calls(text, name):
                for argument in arguments:
                    found.update(OUTCOME.findall(argument))
        found.update(re.findall(r"\.outcome\s*=\s*api::Outcome::k(\w+)", text))
    return {spelt.get(name, name) for name in found}


def check(source_dir):
    problems = []
    conditions, events = code_reasons(source_dir)
    if not conditions or not events:
        return [f"{CONTROLLER}: no condition reason or no Event reason found; has the code's "
                "shape changed? (see this test's docstring)"]
    types = set()
    for kinds in conditions.values():
        types |= kinds
    with open(os.path.join(source_dir, DOCUMENT), encoding="utf-8") as file:
        lines = file.read().split("\n")

    rows = markdown_tables.named_rows(lines, REASONS_SECTION)
    if rows is None:
        return [f"{DOCUMENT}: no section {REASONS_SECTION!r}"]
    seen = set()
    for number, reason, rest in rows:
        where = f"{DOCUMENT}:{number}"
        if reason in seen:
            problems.append(f"{where}: {reason} is listed twice")
        seen.add(reason)
        if reason not in conditions and reason not in events:
            problems.append(f"{where}: {reason} is a reason the code never gives")
            continue
        if len(rest) < 4 or not all(rest[:4]):
            problems.append(f"{where}: {reason}'s row needs where, what you see, cause and fix")
            continue
        named = {match for match in re.findall(r"`(\w+)(?:=\w+)?`", rest[0]) if match in types}
        expected = conditions.get(reason, set())
        if named != expected:
            problems.append(f"{where}: {reason}'s where names the conditions "
                            f"{sorted(named) or 'none'}; the code gives it to "
                            f"{sorted(expected) or 'none'}")
        says_event = re.search(r"\bEvent\b", rest[0]) is not None
        if says_event != (reason in events):
            problems.append(f"{where}: {reason}'s where " +
                            ("says Event; the code posts no Event with it" if says_event
                             else "does not say Event; the code posts one with it"))
    for reason in sorted(set(conditions) | events):
        if reason not in seen:
            problems.append(f"{DOCUMENT}: the table of {REASONS_SECTION!r} misses {reason}, "
                            "which the code gives")

    outcomes = code_outcomes(source_dir)
    rows = markdown_tables.named_rows(lines, OUTCOMES_SECTION)
    if rows is None:
        return problems + [f"{DOCUMENT}: no section {OUTCOMES_SECTION!r}"]
    seen = set()
    for number, outcome, rest in rows:
        where = f"{DOCUMENT}:{number}"
        if outcome in seen:
            problems.append(f"{where}: {outcome} is listed twice")
        seen.add(outcome)
        if outcome not in outcomes:
            problems.append(f"{where}: {outcome} is an outcome the operator never records")
        elif not rest or not all(rest):
            problems.append(f"{where}: {outcome}'s row has an empty cell")
    for outcome in sorted(outcomes - seen):
        problems.append(f"{DOCUMENT}: the table of {OUTCOMES_SECTION!r} misses {outcome}, "
                        "which the operator records")
    return problems


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    source_dir = argv[1]
    try:
        problems = check(source_dir)
    except OSError as error:
        problems = [str(error)]
    def success():
        conditions, events = code_reasons(source_dir)
        return (f"troubleshooting: {DOCUMENT} lists the {len(set(conditions) | events)} condition "
                f"and Event reasons and the {len(code_outcomes(source_dir))} trial outcomes the "
                "code gives")
    return markdown_tables.report(problems, success)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
