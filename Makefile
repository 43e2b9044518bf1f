# The project's commands. `make test` and `make demo` work on a fresh Debian bookworm machine.
BUILD_DIR ?= build
JOBS ?= 2
SOURCES = $(shell git ls-files '*.cpp' '*.h')

.PHONY: all deps configure build test unit integration e2e images controlplane lint format demo \
	bench clean

all: build

deps:
	scripts/install-deps

configure:
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: configure
	cmake --build $(BUILD_DIR) -j$(JOBS)

# Every test tier that exists, after installing what they need.
test: deps build lint images controlplane
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j$(JOBS)

unit: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -L unit -j$(JOBS)

integration: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -L integration -j$(JOBS)

e2e: build controlplane
	ctest --test-dir $(BUILD_DIR) --output-on-failure -L e2e

# The Kubernetes control-plane binaries, kubectl and helm, cached outside the repository.
controlplane:
	scripts/controlplane build

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
	$(BUILD_DIR)/bin/bench_tuning_efficiency
	bench/operator_overhead.sh 3

clean:
	rm -rf $(BUILD_DIR)
