#!/usr/bin/env python3
"""The project's images: one registry prefix and the project's version wherever they are named.

    image_tags_test.py SOURCE_DIR

The project's images are those of images/*/Dockerfile, named after their folder (the operator's
is autotune-operator), as scripts/images builds them. The version is CMakeLists.txt's
`project(... VERSION x.y.z)`; the chart's appVersion must be it too. Then, in the repository's
files (git's list where SOURCE_DIR is a checkout, else a walk), every reference to one of those
images (its name with a tag, or after a registry host) must be

- under the project's prefix, `ghcr.io/autotune-operator`, or a shell variable the reader sets
  (`$REGISTRY/trial-sim`): never under a Docker Hub namespace or a registry the project does not
  hold, where a node would pull someone else's image;
- tagged with that version (in the chart's templates, `{{ .Chart.AppVersion }}`; in a script, a
  variable). One without a tag is an error where an image is built, run, pushed, loaded or named
  for a Pod (a line with `docker`, `kind load`, `minikube image` or `image:`), since it would mean
  `:latest`, a tag no build makes; a chart value naming only the repository is fine (the chart
  adds appVersion).

Test inputs whose image no one pulls are not checked: the config corpus of tests/configs (run with
`autotune run`), the fuzzers' seed corpora and the node simulator's tests.
"""

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from project_images import PROJECT_PREFIX, image_folders, image_name, version  # noqa: E402
# The chart's templates name the version as the chart's appVersion, which must be the project's.
APP_VERSION = ":{{ .Chart.AppVersion }}"
VARIABLE = re.compile(r"^\$(\{\w+\}|\w+)$")
HOST = re.compile(r"^[a-z0-9-]+(\.[a-z0-9-]+)+(:[0-9]+)?$|^[a-z0-9-]+:[0-9]+$")
USES = re.compile(r"docker |kind load|minikube image|image:")
SKIPPED = ("tests/configs/", "tests/fuzz/", "tests/node-sim/", "tests/docs/")
TEXT = (".md", ".yaml", ".yml", ".json", ".sh", ".txt", ".tpl", ".py", "Dockerfile", "Makefile")


def reference_pattern(names):
    return re.compile(r"(?<![\w.$/-])((?:[\w.${}:-]+/)*)(" + "|".join(map(re.escape, names))
                      + r")(:\{\{[^}]*\}\}|:\$\{?\w+\}?|:[A-Za-z0-9._-]+)?(?![\w/-])")


def registry_like(prefix):
    """A prefix that is a variable or starts with a registry host, not a folder such as images/."""
    return bool(VARIABLE.match(prefix) or HOST.match(prefix.split("/")[0]))


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
    project_version = version(source_dir)
    problems = []
    chart = os.path.join(source_dir, "charts", "autotune-operator", "Chart.yaml")
    with open(chart, encoding="utf-8") as handle:
        app_version = re.search(r'^appVersion: "?([^"\n]+)"?$', handle.read(), re.M).group(1)
    if app_version != project_version:
        problems.append(f"charts/autotune-operator/Chart.yaml: appVersion {app_version}, "
                        f"but the project's version is {project_version}")
    names = [image_name(folder) for folder in image_folders(source_dir)]
    reference = reference_pattern(names)
    checked = 0
    for path in files(source_dir):
        with open(os.path.join(source_dir, path), encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, 1):
                for match in reference.finditer(line):
                    prefix, name, tag = match.group(1).rstrip("/"), match.group(2), match.group(3)
                    # The prefix itself, ghcr.io/autotune-operator, ends in an image's name.
                    if tag is None and (not registry_like(prefix)
                                        or f"{prefix}/{name}" == PROJECT_PREFIX):
                        continue
                    checked += 1
                    image = f"{prefix}/{name}" if prefix else name
                    if prefix != PROJECT_PREFIX and not VARIABLE.match(prefix):
                        problems.append(f"{path}:{number}: {image}: the project's images are "
                                        f"named {PROJECT_PREFIX}/{name} (scripts/images moves "
                                        f"them under your registry)")
                    elif tag is not None and tag not in (":" + project_version, APP_VERSION) \
                            and not VARIABLE.match(tag[1:]):
                        problems.append(f"{path}:{number}: {image}{tag}, but the project's "
                                        f"version is {project_version}")
                    elif tag is None and USES.search(line):
                        problems.append(f"{path}:{number}: {image} without a tag (:latest); "
                                        f"use {image}:{project_version}")
    for problem in problems:
        print(problem)
    if problems:
        print(f"image_tags_test: {len(problems)} references to the project's images are wrong")
        return 1
    print(f"image_tags_test: all {checked} references to the project's images ({', '.join(names)}) "
          f"are under {PROJECT_PREFIX} or a variable, with version {project_version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
