# The project's commands. `make test` and `make demo` work on a fresh Debian bookworm machine.
BUILD_DIR ?= build
JOBS ?= 2
SANITIZE_DIR = $(BUILD_DIR)/sanitize
SOURCES = $(shell git ls-files '*.cpp' '*.h')

.PHONY: all deps configure build sanitize test unit integration e2e fuzz images controlplane lint \
	format demo bench clean

all: build

deps:
	scripts/install-deps

configure:
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: configure
	cmake --build $(BUILD_DIR) -j$(JOBS)

# The unit tier and the fuzzers (tests/fuzz, written to $(BUILD_DIR)/bin/fuzz_*), built by clang
# under AddressSanitizer and UndefinedBehaviorSanitizer in a build tree of their own.
sanitize:
	cmake -S . -B $(SANITIZE_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
		-DAUTOTUNE_SANITIZE=ON -DAUTOTUNE_FUZZ_OUTPUT_DIRECTORY=$(abspath $(BUILD_DIR))/bin
	cmake --build $(SANITIZE_DIR) -j$(JOBS) --target unit_tier fuzzers

# Every test tier that exists, after installing what they need; then the unit tier once more
# under the sanitizers, and each fuzzer for 30 seconds (AUTOTUNE_FUZZ_SECONDS).
test: deps build lint images controlplane sanitize
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j$(JOBS)
	ctest --test-dir $(SANITIZE_DIR) --output-on-failure -j$(JOBS) -L 'unit|fuzz'

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
images:
	images/trial-sim/build.sh $(BUILD_DIR)/images/trial-sim
	images/operator/build.sh $(BUILD_DIR)/images/operator
	images/deepspeed-example/check.sh $(BUILD_DIR)

lint:
	clang-format --dry-run -Werror $(SOURCES)
	scripts/tidy $(BUILD_DIR)

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

clean:
	rm -rf $(BUILD_DIR)
