#!/usr/bin/env bash
# Builds trial-sim on its own (this directory as the CMake project, no tests) and puts the binary
# at OUT_DIR/trial-sim, linked with static libstdc++ and libgcc so it runs on a slim image. The
# image's build stage runs this; it works on any Debian bookworm machine too, and installs the
# packages it needs with apt only when they are missing.
# Usage: images/trial-sim/build.sh OUT_DIR
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 OUT_DIR" >&2
  exit 2
fi
out_dir=$1
source_dir=$(cd "$(dirname "$0")" && pwd)
build_dir=$out_dir/build
packages=(g++ make cmake nlohmann-json3-dev libexpected-dev)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$package")
  fi
done
if [[ ${#missing[@]} -gt 0 ]]; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "trial-sim build: missing packages ${missing[*]}; install them as root" >&2
    exit 1
  fi
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi

mkdir -p "$out_dir"
cmake -S "$source_dir" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc"
cmake --build "$build_dir" --target trial-sim -j"${JOBS:-2}"
install -m 0755 "$build_dir/bin/trial-sim" "$out_dir/trial-sim"
echo "trial-sim built: $out_dir/trial-sim"
