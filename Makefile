# Thin wrapper over CMake. `make` builds a release-ish tree in build/
# (`make cli` only what ./crater runs);
# `make test` builds an ASan+UBSan tree in build-asan/ and runs ctest there
# (unit tests, integration tests and bounded fuzz runs), then a TSan tree
# in build-tsan/ for the threaded integration tests (TSAN_TESTS).
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
	@$(MAKE) --no-print-directory tsan TSAN_SELECT='$(TSAN_TESTS)'

# ThreadSanitizer over the integration tests: `make tsan` runs them all
# (about 10 minutes on 2 cores); `make test` runs the ones that drive
# craterd's and the agent's threads hardest (TSAN_TESTS). A report makes
# the process exit (halt_on_error), so its test fails. The GPU-slice tests
# preload the interposer into TSan-built tools and fail for that reason
# alone: excluded.
TSAN_BUILD ?= build-tsan
TSAN_TESTS ?= test_craterd|test_job_lifecycle|test_restart|test_gangs|test_sched_defects|test_services|test_gateway|test_adopt
TSAN_SELECT ?=
tsan: test-deps
	@CC=clang cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=Debug \
	    -DCRATER_TSAN=ON >/dev/null
	@cmake --build $(TSAN_BUILD) -j $(JOBS)
	@cd $(TSAN_BUILD) && TSAN_OPTIONS="halt_on_error=1 exitcode=66" \
	    ctest -L integration --output-on-failure -j $(JOBS) \
	    -E 'test_slice|test_measure_context|test_up' \
	    $(if $(TSAN_SELECT),-R '$(TSAN_SELECT)')

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
