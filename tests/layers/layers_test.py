#!/usr/bin/env python3
"""Each library of src/ includes only the layers below it.

    layers_test.py SOURCE_DIR

A layer is a folder of src/ (the controller's four are folders of src/controller). Every
`#include "folder/..."` of its headers and sources must name its own layer or one that BELOW
allows it, so that what a layer may not know of cannot reach it through a header either: the
tuning engine knows nothing of Kubernetes, the Kubernetes client nothing of tuning, and the
controller's decision neither the runtime (threads, locks, clocks) nor the client (it reads the
cluster through controller/objects/cluster_view.h and never talks to the API server). A folder of
src/ that BELOW does not name fails too: a new layer is placed by adding it here.
"""

import os
import re
import sys

# Each layer, and the layers it may include.
BELOW = {
    "object": set(),
    "spawn": set(),
    "api": set(),
    "tuning": {"api"},
    "observability": {"object"},
    "k8s": {"object", "spawn"},
    "runtime": {"k8s", "object"},
    "report": {"api", "object", "tuning"},
    "executor": {"api", "object", "report", "spawn", "tuning"},
    "controller/objects": {"api", "object", "tuning"},
    "controller/cache": {"api", "object", "runtime", "controller/objects"},
    "controller/decision": {"api", "object", "tuning", "controller/objects"},
    "controller/apply": {"api", "object", "tuning", "k8s", "runtime", "observability",
                         "controller/objects", "controller/cache", "controller/decision"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def layer_of(path):
    """The layer of a path relative to src/ ("controller/plan.h" has none: it is no layer's)."""
    parts = path.split("/")
    if parts[0] == "controller":
        return "/".join(parts[:2]) if len(parts) > 2 else None
    return parts[0] if len(parts) > 1 else None


def violations(source_dir):
    src = os.path.join(source_dir, "src")
    found = []
    for folder, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith((".h", ".cpp")):
                continue
            path = os.path.relpath(os.path.join(folder, name), src)
            layer = layer_of(path)
            if layer not in BELOW:
                found.append(f"src/{path}: its folder is no layer of BELOW in {__file__}")
                continue
            with open(os.path.join(src, path), encoding="utf-8") as file:
                text = file.read()
            for included in INCLUDE.findall(text):
                target = layer_of(included)
                if target is None or target == layer:
                    continue
                if target not in BELOW[layer]:
                    found.append(f"src/{path}: includes {included}, but {layer} may include only "
                                 f"{', '.join(sorted(BELOW[layer])) or 'itself'}")
    return found


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    found = violations(sys.argv[1])
    for line in found:
        print(line)
    if found:
        print(f"layers: {len(found)} include(s) across layers that may not know of each other")
        return 1
    print(f"layers: every include of src/ keeps to its layer ({len(BELOW)} layers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
