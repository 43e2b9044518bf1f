# The project's commands. `make test` and `make demo` work on a fresh Debian bookworm machine.
BUILD_DIR ?= build
JOBS ?= 2
SOURCES = $(shell git ls-files '*.cpp' '*.h')

.PHONY: all deps configure build test unit lint format demo bench clean

all: build

deps:
	scripts/install-deps

configure:
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: configure
	cmake --build $(BUILD_DIR) -j$(JOBS)

# Every test tier that exists, after installing what they need.
test: deps build lint
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j$(JOBS)

unit: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -L unit -j$(JOBS)

lint:
	clang-format --dry-run -Werror $(SOURCES)
	scripts/tidy $(BUILD_DIR)

format:
	clang-format -i $(SOURCES)

# The end-to-end demo arrives with the controller; until then it shows the plan for the example.
demo: deps build
	$(BUILD_DIR)/bin/autotune plan examples/gpt2-large.yaml

bench: build
	$(BUILD_DIR)/bin/bench_tuning_efficiency

clean:
	rm -rf $(BUILD_DIR)
