#!/usr/bin/env python3
"""Every repository path the Markdown documents name must exist.

    paths_test.py SOURCE_DIR

Checked in each Markdown file of the repository (git's list where SOURCE_DIR is a checkout, else
every *.md outside build folders):
  - relative links, [text](path), [text](path#anchor) and reference definitions [name]: path:
    the path, from the file's folder;
  - backticked paths, `src/tuning/engine.h` or `scripts/e2e-env up DIR` (the first word): a word
    that starts with a top-level folder of the repository, or that has a folder and a file
    extension, or that names a Markdown file. It may be written from the repository root, from
    the document's folder (a chart's README names `values.yaml`), or from src/ for sources (headers
    are included as "tuning/engine.h"). `*` and `<name>` match any part of a name, `{a,b}` each of
    its choices.

Not checked: absolute paths and URLs, what a run writes (build/, autotune_results/, results/), and
the explicit exceptions in ALLOWED below, each with its reason.
"""

import glob
import os
import re
import subprocess
import sys

# Top-level folders whose names start a repository path in prose.
TOP_LEVEL = ("bench", "charts", "crds", "docs", "examples", "images", "operator", "scripts",
             "src", "tests")
# Files that name a path only together with a folder (a lone `values.yaml` is a chart's, checked
# from the document's folder; `ds_config.json` is a trial's, not the repository's).
EXTENSIONS = (".h", ".cpp", ".py", ".sh", ".yaml", ".yml", ".json", ".md", ".txt", ".tpl",
              ".cmake")
# Where a run writes: named in prose, never shipped.
OUTPUT_PREFIXES = ("build/", "autotune_results/", "results/", "exps/")
# Words that look like repository paths but are not, each with its reason. Empty today: the
# rules above already pass over absolute paths, URLs, run outputs and files named without a folder.
ALLOWED: dict[str, str] = {}

BACKTICKS = re.compile(r"(?<!`)`([^`]+)`(?!`)")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
REFERENCE_LINK = re.compile(r"\[[^\]]*\]\[[^\]\n]*\]")
DEFINITION = re.compile(r"^ {0,3}\[[^\]\n]+\]:[ \t]+(\S+)", re.M)
FENCE = re.compile(r"^\s*(```|~~~)")


def markdown_files(source_dir):
    try:
        listed = subprocess.run(
            ["git", "-C", source_dir, "ls-files", "--cached", "--others", "--exclude-standard",
             "*.md"], check=True, capture_output=True, text=True).stdout.split("\n")
        return sorted(path for path in listed if path and os.path.isfile(
            os.path.join(source_dir, path)))
    except (OSError, subprocess.CalledProcessError):
        found = []
        for root, dirs, files in os.walk(source_dir):
            dirs[:] = [d for d in dirs if not d.startswith(".") and not d.startswith("build")]
            found += [os.path.relpath(os.path.join(root, f), source_dir)
                      for f in files if f.endswith(".md")]
        return sorted(found)


def looks_like_path(word):
    """Whether a backticked word names a repository path (see the module's docstring)."""
    if word.startswith(("/", "~", "$", "-", "http:", "https:")) or "://" in word:
        return False
    if word.startswith(OUTPUT_PREFIXES) or "=" in word or ":" in word:
        return False
    if word.split("/", 1)[0] in TOP_LEVEL and "/" in word:
        return True
    if word.endswith(".md"):
        return True
    name = word.rstrip("/").rsplit("/", 1)[-1]
    return "/" in word and name.endswith(EXTENSIONS)


def patterns(word):
    """The glob patterns a word stands for: {a,b} expanded, <name> and * as wildcards."""
    braces = re.search(r"\{([^{}]*)\}", word)
    if braces:
        out = []
        for choice in braces.group(1).split(","):
            out += patterns(word[:braces.start()] + choice + word[braces.end():])
        return out
    return [re.sub(r"<[^<>]*>", "*", word).rstrip("/")]


def exists(source_dir, document_dir, word, from_src):
    bases = [source_dir, os.path.join(source_dir, document_dir)]
    if from_src:
        bases.append(os.path.join(source_dir, "src"))
    for pattern in patterns(word):
        if not any(glob.glob(os.path.join(base, pattern)) for base in bases):
            return False
    return True


def blocks(lines):
    """Runs of non-blank lines outside fenced blocks, as (first line's number, text): a code span
    or a link may go on over a line break."""
    current, first, in_fence = [], 0, False
    for number, line in enumerate(lines, 1):
        if FENCE.match(line):
            in_fence = not in_fence
        if in_fence or FENCE.match(line) or not line.strip():
            if current:
                yield first, "\n".join(current)
            current = []
            continue
        if not current:
            first = number
        current.append(line.rstrip("\n"))
    if current:
        yield first, "\n".join(current)


def problems(source_dir, path):
    document_dir = os.path.dirname(path)
    found = []
    with open(os.path.join(source_dir, path), encoding="utf-8") as handle:
        lines = handle.readlines()
    for first, text in blocks(lines):
        def line_of(match):
            return first + text.count("\n", 0, match.start())

        for match in list(LINK.finditer(text)) + list(DEFINITION.finditer(text)):
            target = match.group(1).split("#", 1)[0]
            if not target or re.match(r"^[a-z]+:", target) or target.startswith("/"):
                continue
            if not os.path.exists(os.path.join(source_dir, document_dir, target)):
                found.append(f"{path}:{line_of(match)}: links to {target}, which does not exist")
        # A link's text names what its target is: checked through the target, or (a URL) not the
        # repository's at all. Links are blanked out, keeping their line breaks.
        def blank(match):
            return re.sub(r"[^\n]", " ", match.group(0))

        prose = REFERENCE_LINK.sub(blank, LINK.sub(blank, text))
        for match in BACKTICKS.finditer(prose):
            words = match.group(1).split()
            if not words:
                continue
            word = words[0].rstrip(".,;:)")
            if word in ALLOWED or not looks_like_path(word):
                continue
            from_src = word.endswith((".h", ".cpp"))
            if not exists(source_dir, document_dir, word, from_src):
                found.append(f"{path}:{line_of(match)}: names `{word}`, which does not exist")
    return found


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    source_dir = os.path.abspath(sys.argv[1])
    files = markdown_files(source_dir)
    found = []
    for path in files:
        found += problems(source_dir, path)
    for problem in found:
        print(problem)
    if found:
        print(f"paths_test: {len(found)} paths named in Markdown do not exist; fix the document, "
              "or add the path to ALLOWED in tests/docs/paths_test.py with the reason")
        return 1
    print(f"paths_test: every path named in {len(files)} Markdown files exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
