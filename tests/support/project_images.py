"""The project's version and its images, as the repository defines them, for the document checks.

The version is CMakeLists.txt's `project(... VERSION x.y.z)`. The images are the folders of
images/ that hold a Dockerfile, each named after its folder except the operator's,
autotune-operator; scripts/images names them so. Their registry prefix is PROJECT_PREFIX.
"""

import os
import re

PROJECT_PREFIX = "ghcr.io/autotune-operator"


def version(source_dir):
    with open(os.path.join(source_dir, "CMakeLists.txt"), encoding="utf-8") as handle:
        return re.search(r"project\(\S+ VERSION ([0-9.]+)", handle.read()).group(1)


def image_folders(source_dir):
    images = os.path.join(source_dir, "images")
    return sorted(entry for entry in os.listdir(images)
                  if os.path.isfile(os.path.join(images, entry, "Dockerfile")))


def image_name(folder):
    return "autotune-operator" if folder == "operator" else folder
