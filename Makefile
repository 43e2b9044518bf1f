# The project's commands. `make test` and `make demo` work on a fresh Debian bookworm machine.
BUILD_DIR ?= build
JOBS ?= 2
SOURCES = $(shell git ls-files '*.cpp' '*.h')

.PHONY: all deps configure build test unit integration images controlplane lint format demo bench \
	clean

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

# The Kubernetes control-plane binaries, kubectl and helm, cached outside the repository.
controlplane:
	scripts/controlplane build

# The build steps of each image's Dockerfile, run here so they cannot rot without a Docker engine.
images:
	images/trial-sim/build.sh $(BUILD_DIR)/images/trial-sim

lint:
	clang-format --dry-run -Werror $(SOURCES)
	scripts/tidy $(BUILD_DIR)

format:
	clang-format -i $(SOURCES)

# The operator's end-to-end demo arrives with the controller; until then the demo plans the example
# and runs its search locally, with trial-sim standing in for DeepSpeed.
demo: deps build
	$(BUILD_DIR)/bin/autotune plan examples/gpt2-large.yaml
	rm -rf $(BUILD_DIR)/demo-results
	$(BUILD_DIR)/bin/autotune run examples/gpt2-large-local.yaml --gpus 0-31 \
	  --results $(BUILD_DIR)/demo-results

bench: build
	$(BUILD_DIR)/bin/bench_tuning_efficiency

clean:
	rm -rf $(BUILD_DIR)
