"""What the document checks share: the rows of a Markdown table whose first cell names something
in backquotes, and how a check reports its findings."""

import re


def cells(line):
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def named_rows(lines, heading, stop_prefix="#", first_table_only=True):
    """[(line number, the name in the first cell, the other cells)] of the tables under `heading`
    (a whole line), up to the next line starting with `stop_prefix`, or the end of the first table
    when `first_table_only`; None without that heading. The header row and its rule name
    nothing, and are left out."""
    try:
        start = lines.index(heading)
    except ValueError:
        return None
    rows = []
    for number, line in enumerate(lines[start + 1:], start=start + 2):
        if line.startswith(stop_prefix):
            break
        if not line.startswith("|"):
            if rows and first_table_only:
                break
            continue
        row = cells(line)
        name = re.fullmatch(r"`([^`]+)`", row[0])
        if name:
            rows.append((number, name.group(1), row[1:]))
    return rows


def report(problems, success):
    """Prints each problem, or what `success()` says when there is none; the exit status."""
    for problem in problems:
        print(problem)
    if problems:
        return 1
    print(success())
    return 0
