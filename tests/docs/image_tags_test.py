#!/usr/bin/env python3
"""The project's images carry the project's version wherever they are built or named.

    image_tags_test.py SOURCE_DIR

The version is CMakeLists.txt's `project(... VERSION x.y.z)`; the chart's appVersion must be it
too. Then, in the repository's files (git's list where SOURCE_DIR is a checkout, else a walk),
every reference to one of the project's images (`autotune/trial-sim`,
`ghcr.io/autotune-operator/<name>`) with a tag must have that version as its tag (in the chart's
templates, `{{ .Chart.AppVersion }}`). One without a tag is an error where an image is built, run,
pushed, loaded or named for a Pod (a line with `docker`, `kind load`, `minikube image` or
`image:`), since it would mean `:latest`, a tag no build makes; a chart value naming only the
repository is fine (the chart adds appVersion).

Test inputs whose image no one pulls are not checked: the config corpus of tests/configs (run with
`autotune run`), the fuzzers' seed corpora and the node simulator's tests.
"""

import os
import re
import subprocess
import sys

IMAGE = re.compile(
    r"(autotune/trial-sim|ghcr\.io/autotune-operator/[a-z0-9-]+)(:\{\{[^}]*\}\}|:[A-Za-z0-9._-]+)?")
# The chart's templates name the version as the chart's appVersion, which must be the project's.
APP_VERSION = ":{{ .Chart.AppVersion }}"
USES = re.compile(r"docker |kind load|minikube image|image:")
SKIPPED = ("tests/configs/", "tests/fuzz/", "tests/node-sim/", "tests/docs/")
TEXT = (".md", ".yaml", ".yml", ".json", ".sh", ".txt", ".tpl", ".py", "Dockerfile", "Makefile")


def files(source_dir):
    try:
        listed = subprocess.run(
            ["git", "-C", source_dir, "ls-files", "--cached", "--others", "--exclude-standard"],
            check=True, capture_output=True, text=True).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        listed = []
        for root, dirs, names in os.walk(source_dir):
            dirs[:] = [d for d in dirs if not d.startswith(".") and not d.startswith("build")]
            listed += [os.path.relpath(os.path.join(root, n), source_dir) for n in names]
    return sorted(path for path in listed
                  if path and path.endswith(TEXT) and not path.startswith(SKIPPED)
                  and os.path.isfile(os.path.join(source_dir, path)))


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    source_dir = os.path.abspath(sys.argv[1])
    with open(os.path.join(source_dir, "CMakeLists.txt"), encoding="utf-8") as handle:
        version = re.search(r"project\(\S+ VERSION ([0-9.]+)", handle.read()).group(1)
    problems = []
    chart = os.path.join(source_dir, "charts", "autotune-operator", "Chart.yaml")
    with open(chart, encoding="utf-8") as handle:
        app_version = re.search(r'^appVersion: "?([^"\n]+)"?$', handle.read(), re.M).group(1)
    if app_version != version:
        problems.append(f"charts/autotune-operator/Chart.yaml: appVersion {app_version}, "
                        f"but the project's version is {version}")
    checked = 0
    for path in files(source_dir):
        with open(os.path.join(source_dir, path), encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, 1):
                for match in IMAGE.finditer(line):
                    checked += 1
                    image, tag = match.group(1), match.group(2)
                    if tag is not None and tag not in (":" + version, APP_VERSION):
                        problems.append(f"{path}:{number}: {image}{tag}, but the project's "
                                        f"version is {version}")
                    elif tag is None and USES.search(line):
                        problems.append(f"{path}:{number}: {image} without a tag (:latest); "
                                        f"use {image}:{version}")
    for problem in problems:
        print(problem)
    if problems:
        print(f"image_tags_test: {len(problems)} image references disagree with version {version}")
        return 1
    print(f"image_tags_test: all {checked} references to the project's images carry {version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
