# Thin wrapper over CMake. `make` builds a release-ish tree in build/
# (`make cli` only what ./crater runs);
# `make test` builds an ASan+UBSan tree in build-asan/ and runs ctest there
# (unit tests, integration tests and bounded fuzz runs).
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc)
CTEST_ARGS ?=

.PHONY: all cli deps test-deps test format format-check layers clean fuzz tsan

all: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# Only what ./crater runs: the crater program (crater up holds craterd and
# the agents in-process) and the GPU-slice interposer its agents preload.
# The test binaries are left to `make` and `make test`.
cli: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS) --target crater crater-gpuslice

deps:
	@scripts/deps.sh build

test-deps:
	@scripts/deps.sh test

# The release tree (gcc -O2) is built too: its -Werror catches warnings that
# only the optimiser sees, which the README's first command would hit.
test: test-deps format-check layers all
	@scripts/check-links.sh $(BUILD)
	@CC=clang cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug \
	    -DCRATER_SANITIZE=ON -DCRATER_FUZZ=ON >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	@cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

# ThreadSanitizer over the integration tests (TSAN_OPTIONS=log_path=DIR/r
# keeps every report). The GPU-slice tests preload the interposer into
# TSan-built tools and fail for that reason alone: excluded here.
TSAN_BUILD ?= build-tsan
tsan: test-deps
	@CC=clang cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=Debug \
	    -DCRATER_TSAN=ON >/dev/null
	@cmake --build $(TSAN_BUILD) -j $(JOBS)
	@cd $(TSAN_BUILD) && ctest -L integration --output-on-failure \
	    -j $(JOBS) -E 'test_slice|test_measure_context|test_up'

fuzz: test-deps
	@CC=clang cmake -S . -B $(ASAN_BUILD) -DCRATER_SANITIZE=ON -DCRATER_FUZZ=ON >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	@cd $(ASAN_BUILD) && ctest -L fuzz --output-on-failure

SOURCES = $(shell git ls-files '*.c' '*.h')

format:
	@clang-format -i $(SOURCES)

format-check:
	@clang-format --dry-run --Werror $(SOURCES)

# No include points up a floor (scripts/check-layers.sh, doc/design.md).
layers:
	@scripts/check-layers.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD)
