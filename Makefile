# Thin wrapper around CMake.  The two commands of the quick start:
#   make test    build everything and run the whole test suite
#   make bench   build, install the allocators we compare with, run the comparison
BUILD   ?= build
PREFIX  ?= /usr/local
JOBS    ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all build test test-numa bench install clean deps-test deps-bench debug

all: build

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

deps-test:
	@scripts/install-deps.sh test

deps-bench:
	@scripts/install-deps.sh bench

test: deps-test build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 900

# NUMA placement in a two-node qemu guest (also part of `make test`).
test-numa: deps-test build
	tests/numa/test-numa.sh $(BUILD)

bench: deps-bench build
	bench/run-bench --build $(BUILD) $(if $(QUICK),--quick)

# A build with internal assertions everywhere (STRATA_DEBUG), in build-debug/.
debug:
	cmake -S . -B build-debug -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSTRATA_DEBUG=ON $(CMAKE_FLAGS)
	cmake --build build-debug -j $(JOBS)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD)
