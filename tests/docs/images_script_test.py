#!/usr/bin/env python3
"""scripts/images, the one way the docs build, push and name the project's images, with a
recording `docker` in place of the real one (no Docker engine runs here).

    images_script_test.py SOURCE_DIR

Checked: every image folder is built from its own Dockerfile and context as REGISTRY/NAME:VERSION;
push pushes what it built and only what was named; a failed build pushes nothing; rewrite moves
the project's images under REGISTRY in every job file the repository ships and changes no other
byte; bad registries, names and files are refused with the reason before docker runs.
"""

import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from project_images import PROJECT_PREFIX, image_folders, image_name, version  # noqa: E402
REGISTRY = "registry.example.com:5000/ml-platform"

FAKE_DOCKER = """#!/bin/sh
printf '%s|%s\\n' "$PWD" "$*" >> "$DOCKER_LOG"
case "$*" in *"$DOCKER_FAIL_ON"*) [ -n "$DOCKER_FAIL_ON" ] && exit 1 ;; esac
exit 0
"""

failures = []


def expect(what, condition, detail=""):
    print(("ok    " if condition else "FAIL  ") + what)
    if not condition:
        failures.append(what)
        if detail:
            print("      " + detail.replace("\n", "\n      "))


class Script:
    def __init__(self, source_dir, scratch):
        self.path = os.path.join(source_dir, "scripts", "images")
        self.log = os.path.join(scratch, "docker.log")
        self.docker = os.path.join(scratch, "docker")
        with open(self.docker, "w", encoding="utf-8") as handle:
            handle.write(FAKE_DOCKER)
        os.chmod(self.docker, 0o755)

    def run(self, *args, fail_on=""):
        if os.path.exists(self.log):
            os.remove(self.log)
        env = dict(os.environ, DOCKER=self.docker, DOCKER_LOG=self.log, DOCKER_FAIL_ON=fail_on)
        done = subprocess.run([self.path, *args], capture_output=True, text=True, env=env,
                              check=False)
        calls = []
        if os.path.exists(self.log):
            with open(self.log, encoding="utf-8") as handle:
                calls = [line.rstrip("\n").split("|", 1) for line in handle]
        return done, calls


def check_builds(script, source_dir, version):
    done, calls = script.run("build", REGISTRY + "/")
    expect("build exits 0", done.returncode == 0, done.stderr)
    folders = image_folders(source_dir)
    expect(f"build runs docker once per image folder ({len(folders)})", len(calls) == len(folders),
           str(calls))
    for folder in folders:
        tag = f"{REGISTRY}/{image_name(folder)}:{version}"
        matching = [c for c in calls if f"-t {tag} " in c[1] + " "]
        expect(f"{folder} is built as {tag}", len(matching) == 1, str(calls))
        if not matching:
            continue
        directory, args = matching[0]
        words = args.split()
        expect(f"{folder} is built from its own Dockerfile",
               words[:3] == ["build", "-f", f"images/{folder}/Dockerfile"], args)
        context = os.path.normpath(os.path.join(directory, words[-1]))
        wanted = source_dir if folder == "operator" else os.path.join(source_dir, "images", folder)
        expect(f"{folder}'s build context is the one its Dockerfile's header names",
               context == wanted, f"{context} != {wanted}")
        with open(os.path.join(source_dir, "images", folder, "Dockerfile"),
                  encoding="utf-8") as handle:
            header = handle.read().split("\nFROM", 1)[0]
        expect(f"{folder}'s Dockerfile names the same tag under the project's prefix",
               f"{PROJECT_PREFIX}/{image_name(folder)}:{version}" in header)

    done, calls = script.run("list")
    expect("list without a registry names the images under the project's prefix",
           done.stdout.split() == [f"{PROJECT_PREFIX}/{image_name(f)}:{version}"
                                   for f in folders] and not calls, done.stdout)


def check_pushes(script, version):
    done, calls = script.run("push", REGISTRY, "trial-sim", "autotune-operator")
    verbs = [args.split()[0] + " " + args.split()[-1] for _, args in calls if args.split()]
    expect("push exits 0", done.returncode == 0, done.stderr)
    pushed = [v for v in verbs if v.startswith("push ")]
    expect("push pushes the two images named, each after it was built",
           sorted(pushed) == sorted(f"push {REGISTRY}/{n}:{version}"
                                    for n in ("trial-sim", "autotune-operator"))
           and all(verbs.index(p) >= 2 for p in pushed) and len(verbs) == 4, str(verbs))

    done, calls = script.run("push", REGISTRY, "trial-sim", fail_on="trial-sim")
    expect("a failed build fails push", done.returncode != 0)
    expect("and nothing is pushed", not any(args.startswith("push") for _, args in calls),
           str(calls))


def job_files(source_dir):
    listed = subprocess.run(["git", "-C", source_dir, "ls-files", "examples", "images"],
                            capture_output=True, text=True, check=False).stdout.split()
    if not listed:
        listed = [os.path.relpath(os.path.join(root, name), source_dir)
                  for top in ("examples", "images")
                  for root, _, names in os.walk(os.path.join(source_dir, top)) for name in names]
    return sorted(path for path in listed if path.endswith((".yaml", ".yml")))


def check_rewrite(script, source_dir, version):
    moved_any = 0
    for path in job_files(source_dir):
        with open(os.path.join(source_dir, path), encoding="utf-8") as handle:
            original = handle.read()
        done, calls = script.run("rewrite", REGISTRY, os.path.join(source_dir, path))
        if done.returncode != 0 or calls:
            expect(f"rewrite {path} exits 0 without docker", False, done.stderr)
            continue
        before, after = original.split("\n"), done.stdout.split("\n")
        changed = [(a, b) for a, b in zip(before, after) if a != b]
        wanted = [(line, line.replace(PROJECT_PREFIX + "/", REGISTRY + "/"))
                  for line in before if PROJECT_PREFIX + "/" in line]
        moved_any += len(wanted)
        expect(f"rewrite {path}: {len(wanted)} image(s) moved, nothing else changed",
               len(before) == len(after) and changed == wanted, str(changed))
    expect("the repository's job files name the project's images (some were moved)", moved_any > 0)

    sample = (f"image: {PROJECT_PREFIX}/trial-sim:{version}\n"
              f"image: \"{PROJECT_PREFIX}/deepspeed-example:{version}\"\n"
              f"image: {PROJECT_PREFIX}/trial-sim@sha256:00\n"
              f"image: {PROJECT_PREFIX}/trial-simulator:1\n"
              f"image: {PROJECT_PREFIX}-fork/trial-sim:1\n"
              f"image: example.org/gpt2-train:1.0\n")
    done = subprocess.run([script.path, "rewrite", "reg.example/a", "-"], input=sample,
                          capture_output=True, text=True, check=False)
    expect("rewrite reads a job from stdin and moves only the project's images",
           done.stdout == (f"image: reg.example/a/trial-sim:{version}\n"
                           f"image: \"reg.example/a/deepspeed-example:{version}\"\n"
                           f"image: reg.example/a/trial-sim@sha256:00\n"
                           f"image: {PROJECT_PREFIX}/trial-simulator:1\n"
                           f"image: {PROJECT_PREFIX}-fork/trial-sim:1\n"
                           "image: example.org/gpt2-train:1.0\n"), done.stdout)


def check_refusals(script):
    cases = [
        (("build", ""), "REGISTRY is empty"),
        (("push", "https://registry.example.com"), 'REGISTRY "https://registry.example.com"'),
        (("build", "Registry.example.com/ML"), "in lower case"),
        (("push", REGISTRY, "trial-sim", "operator"), 'no image is named "operator"'),
        (("rewrite", REGISTRY, "/nonexistent/job.yaml"), "/nonexistent/job.yaml: cannot be read"),
        (("rewrite", REGISTRY), "scripts/images rewrite REGISTRY FILE"),
        (("tag", REGISTRY), "scripts/images list"),
    ]
    for args, message in cases:
        done, calls = script.run(*args)
        expect(f"images {' '.join(args)}: exit 2, saying {message!r}, docker not run",
               done.returncode == 2 and message in done.stderr and not calls,
               f"rc {done.returncode}: {done.stderr}")


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    source_dir = os.path.abspath(sys.argv[1])
    project_version = version(source_dir)
    with tempfile.TemporaryDirectory() as scratch:
        script = Script(source_dir, scratch)
        check_builds(script, source_dir, project_version)
        check_pushes(script, project_version)
        check_rewrite(script, source_dir, project_version)
        check_refusals(script)
    if failures:
        print(f"images_script_test: {len(failures)} checks failed")
        return 1
    print("images_script_test: every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
