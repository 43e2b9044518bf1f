# The project's commands. `make test` and `make demo` work on a fresh Debian bookworm machine.
BUILD_DIR ?= build
JOBS ?= 2
SANITIZE_DIR = $(BUILD_DIR)/sanitize
SOURCES = $(shell git ls-files '*.cpp' '*.h')

.PHONY: all deps configure build sanitize test unit integration e2e fuzz images chart plugin \
	controlplane \
	lint format-check format demo bench clean

all: build

deps:
	scripts/install-deps

# -O2 with line tables only (-g1): backtraces name files and lines, and the build takes a third
# less time than with full debug information. A unity build (CMake compiles the sources of a target
# eight at a time as one) parses the shared headers once per batch: it takes two fifths less.
configure:
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_UNITY_BUILD=ON

build: configure
	cmake --build $(BUILD_DIR) -j$(JOBS)

# The unit tier and the fuzzers (tests/fuzz, written to $(BUILD_DIR)/bin/fuzz_*), built by clang
# under AddressSanitizer and UndefinedBehaviorSanitizer in a build tree of their own: -O1 and line
# tables, as the sanitizers' own documentation advises, in unity batches as the main tree.
sanitize:
	cmake -S . -B $(SANITIZE_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
		-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" -DCMAKE_UNITY_BUILD=ON \
		-DAUTOTUNE_SANITIZE=ON -DAUTOTUNE_FUZZ_OUTPUT_DIRECTORY=$(abspath $(BUILD_DIR))/bin
	cmake --build $(SANITIZE_DIR) -j$(JOBS) --target unit_tier fuzzers

# Every test tier that exists, after installing what they need: the main tree's tests, the lint,
# and the unit tier once more under the sanitizers with each fuzzer for 30 seconds
# (AUTOTUNE_FUZZ_SECONDS). scripts/test overlaps the phases and ends with the time of each.
test:
	scripts/test $(BUILD_DIR)

unit: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -L unit -j$(JOBS)

integration: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -L integration -j$(JOBS)

fuzz: sanitize
	ctest --test-dir $(SANITIZE_DIR) --output-on-failure -j$(JOBS) -L fuzz

e2e: build controlplane
	ctest --test-dir $(BUILD_DIR) --output-on-failure -L e2e

# The Kubernetes control-plane binaries, kubectl, helm and Kueue, cached outside the repository.
controlplane:
	scripts/controlplane build
	scripts/kueue build

# The build steps of each image's Dockerfile, run here so they cannot rot without a Docker engine.
# The operator's image stages and checks the main build's binary rather than compile it again;
# its Dockerfile still builds it from source.
images: build
	images/trial-sim/build.sh $(BUILD_DIR)/images/trial-sim
	images/operator/build.sh $(BUILD_DIR)/images/operator $(BUILD_DIR)/bin/autotune-operator
	images/deepspeed-example/check.sh $(BUILD_DIR)

# The Helm chart as the archive users install ($(BUILD_DIR)/chart/autotune-operator-VERSION.tgz),
# after helm lint; helm comes from scripts/controlplane's cache.
chart:
	helm=$$(scripts/controlplane tools)/helm && $$helm lint --strict charts/autotune-operator && \
		$$helm package charts/autotune-operator --destination $(BUILD_DIR)/chart

# kubectl-autotune as an archive for any x86-64 Linux, its libraries and loader beside it
# ($(BUILD_DIR)/dist/kubectl-autotune-VERSION-linux-amd64.tar.gz; scripts/package-plugin).
plugin: build
	scripts/package-plugin $(BUILD_DIR)/dist $(BUILD_DIR)/bin/autotune

lint: format-check build
	scripts/tidy $(BUILD_DIR)

format-check:
	clang-format --dry-run -Werror $(SOURCES)

format:
	clang-format -i $(SOURCES)

# The operator end to end on this machine (scripts/demo): a local control plane with a scheduler and
# a controller manager, the CRD, two simulated 16-GPU nodes, the operator with the chart's RBAC, and
# examples/gpt2-large-trial-sim.yaml run to its best config; everything is stopped at the end.
demo: deps build controlplane images
	scripts/demo $(BUILD_DIR)

bench: build controlplane
	bench/tuning/run $(BUILD_DIR)
	bench/operator_overhead.sh 3
	bench/operator_scale.sh
	bench/handover.sh 5
	bench/handover.sh 5 1000
	bench/big_cluster.sh

clean:
	rm -rf $(BUILD_DIR)
