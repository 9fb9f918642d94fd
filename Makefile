# The front door. `make test` and `make demo` set the machine up first (see
# scripts/setup), so they work on a fresh Debian machine.
BUILD ?= build

.PHONY: all setup build test demo bench sanitize tsan crash-torture torture fuzz clean

all: build

setup:
	@scripts/setup

build: setup
	@ninja -C $(BUILD)

test: build
	@scripts/run-tests $(BUILD)

# The guided tour (docs/cli.md, "demo") on ./magnetite-data.
demo: build
	@$(BUILD)/tools/magnetite demo

# Our engine beside RocksDB, LMDB and raw fdatasync (db_bench), then the log
# alone beside raw fdatasync (wal_bench); files under ./bench-data.
bench: build
	@$(BUILD)/tools/magnetite --data bench-data bench
	@$(BUILD)/bench/wal_bench

# Address + undefined-behaviour sanitizers; any report fails the run. Builds
# the suites and what they run (the `suites` target), not the benchmarks.
sanitize:
	@BUILD_DIR=build-asan BUILD_TYPE=debugoptimized SANITIZE=address,undefined scripts/setup
	@ninja -C build-asan suites
	@scripts/run-tests build-asan

# The thread sanitizer, on the suites that run without CAF's scheduler threads
# (shard_tests drives the shard actors through CAF's test coordinator). The
# others hand work over through Debian's libcaf_core, which is not built with
# the sanitizer, so it cannot see that hand-off and reports races that are not
# there (docs/reliability.md, "Sanitizers"). TSAN_SUITES= (empty) runs them all.
TSAN_SUITES ?= core_tests wal_tests tree_tests node_store_tests ttl_tests shard_tests fuzz_corpus_tests
tsan:
	@BUILD_DIR=build-tsan BUILD_TYPE=debugoptimized SANITIZE=thread scripts/setup
	@ninja -C build-tsan $(if $(TSAN_SUITES),$(addprefix tests/,$(TSAN_SUITES)))
	@scripts/run-tests build-tsan $(TSAN_SUITES)

# The SIGKILL crash test at length (make test runs 100 iterations).
crash-torture: build
	@MAGNETITE_CRASH_ITERATIONS=$${ITERATIONS:-3000} build/tests/crash_tests

# kill -9 torture (tests/torture/torture.cc): a mixed workload killed at random
# moments, also in commits and gcs, checked against what was acknowledged.
# `make test` runs two short fixed-seed slices (torture_tests).
torture: build
	@$(BUILD)/tests/torture --seed $${SEED:-1} --iterations $${ITERATIONS:-1000} --shards $${SHARDS:-3}

# libFuzzer (docs/fuzzing.md): a clang build in build-fuzz/ (FUZZ=1 scripts/setup),
# then each target of tests/fuzz/ for FUZZ_SECONDS (60) from a scratch copy of
# its seed corpus, one after another; any crash or sanitizer report fails.
FUZZ_BUILD ?= build-fuzz
fuzz:
	@BUILD_DIR=$(FUZZ_BUILD) FUZZ=1 scripts/setup
	@tests/fuzz/run-fuzzers $(FUZZ_BUILD)

clean:
	rm -rf build build-asan build-tsan build-fuzz
