#!/usr/bin/env bash
# Builds the operator binary (the repository's CMake project, Release, no tests, only the
# autotune-operator target) and stages the runtime root of its image:
#   OUT_DIR/autotune-operator   the stripped binary
#   OUT_DIR/lib/                the shared libraries it loads that debian:bookworm-slim lacks
# and proves that the binary starts, with every symbol bound, on the slim base's libraries plus
# OUT_DIR/lib alone. The image's build stage runs this; it works on any Debian bookworm machine
# too, and installs the packages it needs with apt only when they are missing.
# Given BINARY, an autotune-operator already built from this tree (make test passes the main
# build's), it stages and checks that one instead of compiling the project a second time.
# Usage: images/operator/build.sh OUT_DIR [BINARY]   (JOBS=N for parallel compiles, default 2)
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 || -z $1 ]]; then
  echo "usage: $0 OUT_DIR [BINARY]" >&2
  exit 2
fi
out_dir=$1
prebuilt=${2:-}
if [[ -n $prebuilt && ! -x $prebuilt ]]; then
  echo "operator build: $prebuilt is not an executable" >&2
  exit 2
fi
image_dir=$(cd "$(dirname "$0")" && pwd)
source_dir=$(cd "$image_dir/../.." && pwd)
build_dir=$out_dir/build
packages=(g++ make cmake nlohmann-json3-dev libexpected-dev libyaml-cpp-dev libcpprest-dev
  libssl-dev prometheus-cpp-dev libcivetweb-dev)

# Packages of debian:bookworm-slim whose libraries the runtime image may take from the base rather
# than from OUT_DIR/lib: libc6 and libstdc++6/libgcc-s1 (apt needs them), and what dpkg itself
# depends on. Any other library is staged, even if the slim image happens to carry it too: a
# duplicate is harmless, a missing one is not. libstdc++ stays shared because the Debian libraries
# staged beside the binary (cpprestsdk, yaml-cpp, ...) link it anyway; the base and the build stage
# are the same Debian release, so they agree on its version.
slim_packages=(libc6 libgcc-s1 libstdc++6 zlib1g libzstd1 liblzma5 libbz2-1.0 libmd0 libselinux1
  libpcre2-8-0)

# The Dockerfile copies the source tree path by path (so that a build folder in the context never
# reaches the image); every directory the top-level CMakeLists.txt adds must be one of them.
if [[ -f $image_dir/Dockerfile ]]; then
  while read -r subdir; do
    copied=$subdir
    while [[ $copied != . ]] && ! grep -q "^COPY $copied " "$image_dir/Dockerfile"; do
      copied=$(dirname "$copied")
    done
    if [[ $copied == . ]]; then
      echo "operator build: CMakeLists.txt adds $subdir, which images/operator/Dockerfile" \
        "does not COPY" >&2
      exit 1
    fi
  done < <(sed -n 's/^add_subdirectory(\([^) ]*\).*/\1/p' "$source_dir/CMakeLists.txt")
fi

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$package")
  fi
done
if [[ ${#missing[@]} -gt 0 ]]; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "operator build: missing packages ${missing[*]}; install them as root" >&2
    exit 1
  fi
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi

mkdir -p "$out_dir"
if [[ -z $prebuilt ]]; then
  # Release at -O2, the level every test tier runs at (the project's RelWithDebInfo, without
  # debug information): at CMake's default -O3, GCC 12 reports false -Wrestrict errors inside
  # std::string (GCC bug 105651) and the project builds with -Werror.
  cmake -S "$source_dir" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" -DBUILD_TESTING=OFF
  cmake --build "$build_dir" --target autotune-operator -j"${JOBS:-2}"
  prebuilt=$build_dir/bin/autotune-operator
fi
binary=$out_dir/autotune-operator
install -m 0755 --strip "$prebuilt" "$binary"

# The package that owns a library file, whichever of /lib and /usr/lib (merged on bookworm) dpkg
# recorded it under; empty if none does.
owner() {
  local path candidates=()
  for path in "$1" "$(readlink -f "$1")"; do
    candidates+=("$path")
    case $path in
      /usr/lib/*) candidates+=("${path#/usr}") ;;
      /lib/*) candidates+=("/usr$path") ;;
    esac
  done
  for path in "${candidates[@]}"; do
    if dpkg-query -S "$path" >/dev/null 2>&1; then
      dpkg-query -S "$path" | head -n1 | cut -d: -f1
      return
    fi
  done
}

is_slim() {
  local package
  for package in "${slim_packages[@]}"; do
    [[ $1 == "$package" ]] && return 0
  done
  return 1
}

rm -rf "${out_dir:?}/lib"
mkdir -p "$out_dir/lib"
# ldd lists the whole closure: "soname => path (address)"; the loader and the vDSO have no "=>".
if ldd "$binary" | grep -q 'not found'; then
  ldd "$binary" >&2
  echo "operator build: the binary has unresolved libraries" >&2
  exit 1
fi
while read -r soname path; do
  package=$(owner "$path")
  if [[ -z $package ]]; then
    echo "operator build: no package owns $path; refusing to guess whether the image has it" >&2
    exit 1
  fi
  if is_slim "$package"; then
    echo "  from the base image: $soname ($package)"
  else
    echo "  staged:              $soname ($package)"
    cp -L "$path" "$out_dir/lib/$soname"
  fi
done < <(ldd "$binary" | awk '$2 == "=>" { print $1, $3 }')

echo "ldd with only OUT_DIR/lib added:"
ldd_output=$(LD_LIBRARY_PATH=$out_dir/lib ldd "$binary")
echo "$ldd_output"
if grep -q 'not found' <<<"$ldd_output"; then
  echo "operator build: a library is missing from $out_dir/lib" >&2
  exit 1
fi
LD_BIND_NOW=1 LD_LIBRARY_PATH=$out_dir/lib "$binary" --help >/dev/null

# On this machine every library is installed anyway, so the check that proves the staged set is
# enough runs the binary in a root holding only the slim packages' libraries and OUT_DIR/lib, with
# every symbol bound at start (LD_BIND_NOW). Where chroot is not allowed (not root, or a container
# without CAP_SYS_CHROOT) the ldd check above stands alone.
if chroot / true 2>/dev/null; then
  root=$out_dir/slim-root
  rm -rf "$root"
  mkdir -p "$root/usr/lib" "$root/usr/lib64" "$root/usr/local/bin"
  ln -s usr/lib "$root/lib"
  ln -s usr/lib64 "$root/lib64"
  for package in "${slim_packages[@]}"; do
    while read -r file; do
      if [[ -f $file || -L $file ]] && [[ $file =~ \.so(\.[0-9]+)*$ ]]; then
        mkdir -p "$root$(dirname "$file")"
        cp -a "$file" "$root$file"
      fi
    done < <(dpkg-query -L "$package" 2>/dev/null || true)
  done
  cp "$binary" "$root/usr/local/bin/"
  cp -a "$out_dir/lib" "$root/usr/local/lib"
  if ! env -i LD_BIND_NOW=1 LD_LIBRARY_PATH=/usr/local/lib "$(command -v chroot)" "$root" \
    /usr/local/bin/autotune-operator --help >/dev/null 2>"$out_dir/slim-root.log"; then
    cat "$out_dir/slim-root.log" >&2
    echo "operator build: the binary does not start on the slim base plus $out_dir/lib" >&2
    exit 1
  fi
  rm -rf "$root" "$out_dir/slim-root.log"
  echo "checked: runs on the slim base's libraries plus $out_dir/lib alone"
else
  echo "chroot not allowed here: checked with ldd only"
fi
staged=("$out_dir"/lib/*)
echo "operator built: $binary, libraries in $out_dir/lib: ${staged[*]##*/}"
