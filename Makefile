# Thin wrapper around CMake.
#   make                the libraries and the tools (build/libstrata.so, build/bin/strata-*)
#   make install        those, into PREFIX (default /usr/local)
#   make test           build everything, tests included, and run the whole test suite
#   make bench          the quick comparison with glibc, jemalloc, tcmalloc, mimalloc 2/3, snmalloc
#                       (3 min on 2 idle cores); FULL=1 for every workload (about 45 min).
#                       Results in bench/runs/<time>/, bench/runs/latest points at the last.
#   make bench-record   a full run, copied into bench/results/ (the committed record)
#   make debug          internal assertions everywhere (STRATA_DEBUG), in build-debug/
#   make test-cluster   a two-node Slurm cluster built on this machine (namespaces,
#                       root needed) and Strata's multi-node checks in it (docs/mpi.md)
# NODEPS=1 skips the package check; DEV=1 makes warnings errors (as CI=true does);
# BENCH_ARGS passes options to bench/run-bench (see bench/README.md).
BUILD   ?= build
PREFIX  ?= /usr/local
JOBS    ?= $(shell nproc)
CMAKE_FLAGS ?=
BENCH_ARGS ?=

yes = $(filter-out 0 no false off,$(1))
# QUICK=0 (the old spelling) also asks for the full run.
full_flag = $(if $(or $(call yes,$(FULL)),$(filter 0 no false off,$(QUICK))),--full)

.PHONY: all build build-all reconfigure test test-numa test-cluster deps-cluster bench bench-record bench-programs install clean deps-test deps-bench debug

all: build

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(if $(call yes,$(DEV)),-DSTRATA_DEV=ON) $(CMAKE_FLAGS)

build: $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target strata-libs

build-all: $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

bench-programs: $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target strata-bench-programs

# A build tree configured before the packages were installed (a plain `make`
# on a fresh machine) found no MPI, clang or valgrind; configuring again after
# the package check finds what it just installed (CMake searches again for
# whatever it did not find).
reconfigure: $(BUILD)/build.ninja
	@cmake $(BUILD) >/dev/null

deps-test:
	@$(if $(call yes,$(NODEPS)),true,scripts/install-deps.sh test)

deps-bench:
	@$(if $(call yes,$(NODEPS)),true,scripts/install-deps.sh bench)

test: deps-test
	@$(MAKE) --no-print-directory reconfigure
	cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 900

# NUMA placement in a two-node qemu guest (also part of `make test`).
test-numa: deps-test $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target numa_locality
	tests/numa/test-numa.sh $(BUILD)

deps-cluster:
	@$(if $(call yes,$(NODEPS)),true,scripts/install-deps.sh cluster)

# Every check on one cluster (the cluster_* rows of `make test` build one each).
test-cluster: deps-cluster deps-test
	@$(MAKE) --no-print-directory reconfigure
	cmake --build $(BUILD) -j $(JOBS)
	tests/cluster/cluster-test.sh $(BUILD) all

# exec: the harness takes make's place, so a signal reaches it directly and
# make has no child to wait for.
bench: deps-bench
	@$(MAKE) --no-print-directory reconfigure bench-programs
	@bench/run-bench --build $(BUILD) $(full_flag) $(BENCH_ARGS)
	@# The heap profiler's cost, beside heaptrack's (standalone: bench/prof/run-prof-bench).
	@bench/prof/run-prof-bench --build $(BUILD) --runs 3 --out $${BENCH_RUNS_DIR:-bench/runs}/latest/prof-overhead.md

bench-record: deps-bench
	@$(MAKE) --no-print-directory reconfigure bench-programs
	@exec bench/run-bench --build $(BUILD) --full --record $(BENCH_ARGS)

# A build with internal assertions everywhere (STRATA_DEBUG), in build-debug/.
debug:
	cmake -S . -B build-debug -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSTRATA_DEBUG=ON $(CMAKE_FLAGS)
	cmake --build build-debug -j $(JOBS)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD)
