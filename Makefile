# kvsim — build, run and test.
#
#   make            build bin/kvsim and bin/kvcal (CUDA parts whenever the toolkit is found; bin/kvsim-mpi
#                   whenever mpicc is found)
#   make run        install missing packages, build bin/kvsim (no CUDA needed), run the default comparison
#   make figures    PNG renders of results/default/*.svg (needs rsvg-convert or ImageMagick)
#   make reproduce  run every published claim (configs/claims/), report in results/reproduce/
#   make test       the whole suite (unit, golden, end-to-end, report.html in headless Chromium); GPU tests
#                   skip without a device, the browser checks without Chromium (make deps installs it)
#   make test-fakegpu  the cuda replay (kvcal execute --backend cuda) on a host stand-in of the GPU (part of make test)
#   make bench      benchmarks (tables on stdout); make check-long: slow tests
#   make fuzz       every libFuzzer harness of tests/fuzz/ for FUZZ_SECONDS each (default 300; clang)
#   make valgrind   the main commands under valgrind (errors and leaks fail)
#   make lint       make lint-layers (includes and engine calls run downward) and its test; no working
#                   words in source and docs (tools/lint_words.sh) and its test; make test runs them all
#   make deps       install missing Debian packages (root) or print the command
#   make install    PREFIX=/usr/local
#
# Switches: NO_CUDA=1 (no CUDA even if found), NO_MPI=1 (no bin/kvsim-mpi), CUDA_ARCH=90 (target sm_90),
#           NO_LTO=1 (no link-time optimisation of the programs; it is on with GCC, off with DEBUG or SANITIZE),
#           SANITIZE=address,undefined, DEBUG=1 (-O0, KV_DEBUG: the engine's accounting walker at
#           every iteration boundary), CUDA_HOME=/usr/local/cuda. check-long runs the walker too (KVSIM_CHECK=8: every
#           8th iteration boundary; KVSIM_CHECK=1: every one).
# Builds run in parallel on every core unless -jN is given. Only what links CUDA (bin/kvcal, the
# tests) is compiled with nvcc: the CUDA objects live in their own archive, libkvcuda.a.

SHELL      := /bin/bash
NPROC      := $(shell nproc 2>/dev/null || echo 1)
ifeq ($(MAKELEVEL),0)
  MAKEFLAGS += -j$(NPROC)   # a -jN on the command line wins; sub-makes share the jobserver
endif
comma      := ,
PREFIX     ?= /usr/local
CC         ?= cc
BUILD      ?= build
CUDA_HOME  ?= /usr/local/cuda
CUDA_ARCH  ?=
PKGS       := libcjson gsl sqlite3 libcrypto
# BUILD_DEBS: what bin/kvsim and bin/kvcal need at the least (PKGS above; the README's CI job installs
# these and the suite checks it does); DEB_PKGS adds the optional backends, the sanitizer, MPI and
# the browser the suite opens report.html in (tests/html_report_test.sh)
BUILD_DEBS := build-essential pkg-config libcjson-dev libgsl-dev libsqlite3-dev libssl-dev
DEB_PKGS   := $(BUILD_DEBS) sqlite3 libopenblas-dev liburing-dev \
              clang libclang-rt-dev valgrind libopenmpi-dev openmpi-bin chromium

# ---- dependency detection (pkg-config, evaluated once) ----
PKG_OK     := $(shell pkg-config --exists $(PKGS) 2>/dev/null && echo yes)
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
BLAS_OK    := $(shell pkg-config --exists openblas 2>/dev/null && echo yes)
URING_OK   := $(shell pkg-config --exists liburing 2>/dev/null && echo yes)

ifeq ($(NO_CUDA),1)
  NVCC :=
else
  NVCC := $(shell command -v nvcc 2>/dev/null || { test -x $(CUDA_HOME)/bin/nvcc && echo $(CUDA_HOME)/bin/nvcc; })
endif
ifneq ($(NVCC),)
  CUDA_ROOT := $(patsubst %/bin/nvcc,%,$(realpath $(NVCC)))
  CUBLAS_OK := $(shell test -f $(CUDA_ROOT)/include/cublas_v2.h && ls $(CUDA_ROOT)/lib64/libcublas.so* >/dev/null 2>&1 && echo yes)
endif
HAVE_CUDA := $(if $(and $(NVCC),$(CUBLAS_OK)),1,)
# MPI: bin/kvsim-mpi, the sweep as MPI ranks (only sim/cli/sweep.c differs: compiled by mpicc with KVSIM_MPI)
ifeq ($(NO_MPI),1)
  MPICC :=
else
  MPICC := $(shell command -v mpicc 2>/dev/null)
endif
HAVE_MPI := $(if $(MPICC),1,)

CFLAGS_BASE := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter -Wno-format-truncation \
               -I. $(PKG_CFLAGS)
ifeq ($(DEBUG),1)
  OPT := -O0 -g3 -DKV_DEBUG
else
  OPT := -O3 -g
endif
# Link-time optimisation of the programs (bin/kvsim, bin/kvcal, bin/kvsim-mpi): GCC only, not with
# DEBUG or SANITIZE, NO_LTO=1 without. The objects are fat (their machine code next to the LTO
# bytecode), so the test binary and anything else links them without LTO. No -ffast-math and no
# contraction: the same floating-point operations in the same order, results byte-identical
# (docs/performance.md, "Build").
CC_IS_GCC := $(shell $(CC) --version 2>/dev/null | grep -q 'Free Software Foundation' && echo yes)
LTO := $(if $(and $(filter yes,$(CC_IS_GCC)),$(if $(filter 1,$(DEBUG)),,x),$(if $(SANITIZE),,x),$(if $(filter 1,$(NO_LTO)),,x)),yes,)
LTO_CFLAGS  := $(if $(LTO),-flto=auto -ffat-lto-objects)
LTO_LDFLAGS := $(if $(LTO),-flto=auto $(OPT))
CFLAGS  ?=
CFLAGS  += $(CFLAGS_BASE) $(OPT) -ffp-contract=off $(LTO_CFLAGS)
LDLIBS  := -Wl,--as-needed $(PKG_LIBS) -lm -lpthread
BIN     := bin
ifneq ($(SANITIZE),)
  CFLAGS  += -fsanitize=$(SANITIZE) -fno-sanitize-recover=all -fno-omit-frame-pointer
  LDFLAGS += -fsanitize=$(SANITIZE)
  BUILD   := $(BUILD)/san
  BIN     := $(BUILD)/bin
endif
ifeq ($(BLAS_OK),yes)
  # GSL's own CBLAS would shadow OpenBLAS's cblas_sgemm: link OpenBLAS in its place
  CFLAGS += -DKV_HAVE_BLAS $(shell pkg-config --cflags openblas)
  LDLIBS := $(filter-out -lgslcblas,$(LDLIBS)) $(shell pkg-config --libs openblas)
endif
ifeq ($(URING_OK),yes)
  CFLAGS += -DKV_HAVE_URING
  LDLIBS += $(shell pkg-config --libs liburing)
endif
# kvsim calls no BLAS (only kvcal's cpu kernels do): it links without OpenBLAS, whose worker
# threads, started when the library loads, would spin beside a compare's worker processes
SIM_LDLIBS := $(filter-out $(if $(filter yes,$(BLAS_OK)),$(shell pkg-config --libs openblas)),$(LDLIBS))
CUDA_LDLIBS :=
ifeq ($(HAVE_CUDA),1)
  CFLAGS += -DKV_HAVE_CUDA -I$(CUDA_ROOT)/include
  CUDA_LDLIBS := -L$(CUDA_ROOT)/lib64 -Wl,-rpath,$(CUDA_ROOT)/lib64 -lcublas -lcudart -lstdc++
  NVFLAGS := -O2 -std=c++17 -Xcompiler -Wall,-Werror,-fPIC -I. \
             $(if $(CUDA_ARCH),-gencode arch=compute_$(CUDA_ARCH)$(comma)code=sm_$(CUDA_ARCH))
endif

# ---- sources: every .c in the module folders; mains and tests apart ----
# the library: every layer below the two command-line programs (sim/cli, calibrate/cli)
LIB_DIRS  := sim/base sim/catalog sim/cost sim/engine kernels traces policies results calibrate
LIB_SRC   := $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c))
KVSIM_CLI := $(wildcard sim/cli/*.c)
KVCAL_CLI := $(wildcard calibrate/cli/*.c)
CLI_OBJ   := $(patsubst %.c,$(BUILD)/%.o,$(filter-out %_main.c,$(KVSIM_CLI) $(KVCAL_CLI)))  # tested directly
CU_SRC    := $(if $(HAVE_CUDA),$(wildcard kernels/*.cu),)
TEST_SRC  := $(wildcard tests/test_*.c) tests/harness.c tests/simtest.c
EMBED_SRC := $(BUILD)/gen/embedded.c $(BUILD)/gen/gitrev.c
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/%.o) $(EMBED_SRC:%.c=%.o)
CU_OBJ    := $(CU_SRC:%.cu=$(BUILD)/%.cu.o)
TEST_OBJ  := $(TEST_SRC:%.c=$(BUILD)/%.o)
LIB       := $(BUILD)/libkvsim.a
# the CUDA kernels (gpu.cu) apart, linked only into what calls them: bin/kvcal and the tests;
# bin/kvsim never does (with CUDA, kernels/gpu_stub.c compiles to nothing, so a stray kgpu_ call
# in the simulator would fail to link instead of pulling CUDA in)
CUDA_LIB  := $(if $(CU_OBJ),$(BUILD)/libkvcuda.a,)
EMBEDDED  := configs/models.json configs/hardware.json $(sort $(wildcard configs/scenarios/*.json)) \
             $(sort $(wildcard configs/claims/*.json)) $(sort $(wildcard results/costmodels/*.sql))
DEFAULT_POLICIES ?= all

#   (make reproduce: every published claim of configs/claims/, report in results/reproduce/)
.PHONY: print-build-debs findings reproduce all run test bench check-long clean install deps found gpu-check test-plain test-san lint-layers lint validate validate-real \
        fuzz fuzz-build fuzz-test valgrind figures test-fakegpu
.DEFAULT_GOAL := all

all: found $(BIN)/kvsim $(BIN)/kvcal $(if $(HAVE_MPI),$(BIN)/kvsim-mpi)

found:
	@printf 'kvsim build: %s cjson/gsl/sqlite3/libcrypto %s openblas %s liburing %s CUDA%s\n' \
	  "$(if $(PKG_OK),✓,✗)" "$(if $(BLAS_OK),✓,✗ (cpu GEMMs use the C path))" \
	  "$(if $(URING_OK),✓,✗ (SSD probes use threads))" \
	  "$(if $(HAVE_CUDA),✓,✗)" "$(if $(HAVE_CUDA), $(CUDA_ROOT)$(if $(CUDA_ARCH), sm_$(CUDA_ARCH)),$(if $(filter 1,$(NO_CUDA)), (NO_CUDA=1), (nvcc/cuBLAS not found)))"
	@printf 'kvsim build: %s MPI%s\n' "$(if $(HAVE_MPI),✓,✗)" \
	  "$(if $(HAVE_MPI), bin/kvsim-mpi ($(MPICC)),$(if $(filter 1,$(NO_MPI)), (NO_MPI=1), (mpicc not found: kvsim sweep runs on one machine; make deps installs Open MPI)))"
	@$(if $(PKG_OK),true,echo "missing: $(PKGS) — run 'make deps'"; false)
	@$(if $(SANITIZE),echo "sanitizers: $(SANITIZE) (objects in $(BUILD))",true)
	@$(if $(LTO),echo "kvsim build: -O3 and link-time optimisation of the programs (NO_LTO=1: without)",true)

# Objects depend on the configuration they were compiled with (compiler, flags, what was found):
# switching NO_CUDA=1, DEBUG=1 or CUDA_ARCH, or installing a library, rebuilds them instead of
# mixing objects of two configurations (e.g. the empty CUDA-build gpu_stub.o with no libkvcuda.a).
# The stamp is rewritten only when the configuration changes.
CONFIG_STAMP := $(BUILD)/config.stamp
BUILD_CONFIG := $(CC) $(CFLAGS) | $(NVCC) $(NVFLAGS) | $(LDLIBS) $(CUDA_LDLIBS)
$(CONFIG_STAMP): FORCE
	@mkdir -p $(dir $@)
	@echo '$(BUILD_CONFIG)' > $@.new
	@cmp -s $@.new $@ && rm -f $@.new || mv $@.new $@

$(BUILD)/%.o: %.c $(CONFIG_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/%.cu.o: %.cu $(wildcard kernels/*.cuh) $(CONFIG_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c $< -o $@

$(EMBED_SRC:%.c=%.o): $(CONFIG_STAMP)

# The git revision, rewritten only when it changes (so results name the code that made them).
GIT_REV := $(shell git describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)
$(BUILD)/gen/gitrev.c: FORCE
	@mkdir -p $(dir $@)
	@echo 'const char *kv_git_rev(void) { return "$(GIT_REV)"; }' > $@.new
	@cmp -s $@.new $@ && rm -f $@.new || mv $@.new $@
FORCE:

# Catalogs are compiled into the binaries so they run from anywhere; --models/--hardware override.
$(BUILD)/gen/embedded.c: $(EMBEDDED) tools/embed.sh Makefile
	@mkdir -p $(dir $@)
	bash tools/embed.sh $@ $(EMBEDDED)

$(LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libkvcuda.a: $(CU_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BIN)/kvsim: $(KVSIM_CLI:%.c=$(BUILD)/%.o) $(LIB)
	@mkdir -p $(BIN)
	$(CC) $(LDFLAGS) $(LTO_LDFLAGS) -o $@ $^ $(SIM_LDLIBS)

$(BUILD)/mpi/%.o: %.c $(CONFIG_STAMP)
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) -DKVSIM_MPI -MMD -MP -c $< -o $@

$(BIN)/kvsim-mpi: $(filter-out $(BUILD)/sim/cli/sweep.o,$(KVSIM_CLI:%.c=$(BUILD)/%.o)) $(BUILD)/mpi/sim/cli/sweep.o $(LIB)
	@mkdir -p $(BIN)
	$(MPICC) $(LDFLAGS) $(LTO_LDFLAGS) -o $@ $^ $(SIM_LDLIBS)

$(BIN)/kvcal: $(KVCAL_CLI:%.c=$(BUILD)/%.o) $(LIB) $(CUDA_LIB)
	@mkdir -p $(BIN)
	$(CC) $(LDFLAGS) $(LTO_LDFLAGS) -o $@ $^ $(LDLIBS) $(CUDA_LDLIBS)

$(BUILD)/kvtest: $(TEST_OBJ) $(CLI_OBJ) $(LIB) $(CUDA_LIB)
	$(CC) $(LDFLAGS) -o $@ $(TEST_OBJ) $(CLI_OBJ) $(LIB) $(CUDA_LIB) $(LDLIBS) $(CUDA_LDLIBS)

# ---- the two README commands ----
# the pages under docs/ whose commands were the README's: tests/readme_examples.sh runs them too
README_PAGES := docs/reference.md docs/capacity-planning.md docs/findings.md docs/published-setups.md \
	docs/shared-prefixes.md docs/storage-tiers.md
run: deps
	@$(MAKE) --no-print-directory found bin/kvsim bin/kvcal
	bin/kvsim compare --config configs/default.json --policies $(DEFAULT_POLICIES) --seeds 5 --baseline kv-offload --quiet --out results/default

print-build-debs:
	@echo $(BUILD_DEBS)

# every published claim (configs/claims/*.json) run and judged: results/reproduce/report.md, report.json
reproduce: found $(BIN)/kvsim
	$(BIN)/kvsim reproduce --out results/reproduce

# results/findings.md: the questions the papers left open, 5 seeds each (tools/findings.sh; ~10 s)
findings: found $(BIN)/kvsim
	bash tools/findings.sh $(BIN)/kvsim results/findings.md

# PNG renders of the default comparison's figures, for a quick look (make run first)
SVG2PNG := $(shell command -v rsvg-convert 2>/dev/null || command -v convert 2>/dev/null)
figures:
	@test -n "$(SVG2PNG)" || { echo "figures: need rsvg-convert (apt-get install librsvg2-bin) or ImageMagick convert"; exit 1; }
	@test -f results/default/ttft_cdf.svg || { echo "figures: no results/default/*.svg; run 'make run' first"; exit 1; }
	@for f in results/default/*.svg; do \
	  case "$(SVG2PNG)" in *rsvg-convert) "$(SVG2PNG)" -f png -o "$${f%.svg}.png" "$$f" ;; \
	                       *) "$(SVG2PNG)" "$$f" "$${f%.svg}.png" ;; esac && echo "figures: $${f%.svg}.png"; \
	done

test-plain: all $(BUILD)/kvtest
	@bash tools/lint_layers.sh
	@bash tools/lint_words.sh
	@bash tests/lint_test.sh
	@bash tests/lint_words_test.sh
	KVSIM_ROOT=$(CURDIR) $(BUILD)/kvtest $(TEST_ARGS)
	KVSIM_BIN=$(BIN) bash tests/cli_test.sh
	KVSIM_BIN=$(BIN) bash tests/html_report_test.sh

test: test-plain
ifeq ($(SANITIZE),)
	@echo "== every command the README and the pages moved out of it show, from a scratch directory =="
	bash tests/readme_examples.sh README.md $(README_PAGES)
	@echo "== every result the README and docs/*.md quote, regenerated and compared =="
	bash tools/readme_tables.sh --check $(BIN)/kvsim
	@echo "== the cuda replay on the host stand-in of the GPU (tests/fakegpu/) =="
	@$(MAKE) --no-print-directory test-fakegpu
	@echo "== the same suite under SANITIZE=address,undefined =="
	@$(MAKE) --no-print-directory test-plain SANITIZE=address,undefined
	@echo "== every fuzz harness for $(FUZZ_TEST_SECONDS) s =="
	@$(MAKE) --no-print-directory fuzz-test
endif

# ---- the cuda replay without a GPU (tests/fakegpu/) ----
# The library compiled again without CUDA into $(BUILD)/fakegpu/ (its own objects and config stamp,
# never mixed with the main build's: no KV_HAVE_CUDA, no LTO, -O1 to keep the build short unless
# DEBUG or SANITIZE), linked
# with tests/fakegpu/fake_gpu.c — a host emulation of kernels/gpu.h's streams and events — in place
# of kernels/gpu_stub.o, into kvtest-fakegpu: the stand-in's own tests, the replay of emitted
# validation cases, and test_execute.c's exec_cuda_* (which run on it instead of skipping). Part of
# make test (plain); SANITIZE=address,undefined make test-fakegpu runs it under the sanitizers.
FAKE_BUILD    := $(BUILD)/fakegpu
FAKE_OPT      := $(if $(or $(filter 1,$(DEBUG)),$(SANITIZE)),$(OPT),-O1 -g) # -O1 with the sanitizers trips a false -Wrestrict
FAKE_CFLAGS   := $(filter-out -DKV_HAVE_CUDA -I$(CUDA_ROOT)/include $(LTO_CFLAGS) $(OPT),$(CFLAGS)) $(FAKE_OPT)
FAKE_LIB_OBJ  := $(patsubst %.c,$(FAKE_BUILD)/%.o,$(filter-out kernels/gpu_stub.c,$(LIB_SRC))) $(FAKE_BUILD)/gen/embedded.o \
                 $(FAKE_BUILD)/gen/gitrev.o
FAKE_TEST_SRC := tests/harness.c tests/simtest.c tests/test_execute.c tests/fakegpu/fake_gpu.c tests/fakegpu/test_fakegpu.c
FAKE_TEST_OBJ := $(FAKE_TEST_SRC:%.c=$(FAKE_BUILD)/%.o)
FAKE_STAMP    := $(FAKE_BUILD)/config.stamp

$(FAKE_STAMP): FORCE
	@mkdir -p $(dir $@)
	@echo '$(CC) $(FAKE_CFLAGS) | $(LDLIBS)' > $@.new
	@cmp -s $@.new $@ && rm -f $@.new || mv $@.new $@
$(FAKE_BUILD)/%.o: %.c $(FAKE_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(FAKE_CFLAGS) -MMD -MP -c $< -o $@
$(FAKE_BUILD)/gen/%.o: $(BUILD)/gen/%.c $(FAKE_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(FAKE_CFLAGS) -c $< -o $@
$(FAKE_BUILD)/libkvsim.a: $(FAKE_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(FAKE_BUILD)/kvtest-fakegpu: $(FAKE_TEST_OBJ) $(FAKE_BUILD)/libkvsim.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

test-fakegpu: $(BIN)/kvsim $(FAKE_BUILD)/kvtest-fakegpu
	KVSIM_ROOT=$(CURDIR) KVSIM_BIN=$(BIN) $(FAKE_BUILD)/kvtest-fakegpu fakegpu_ exec_cuda_

# ---- fuzzing (libFuzzer): tests/fuzz/fuzz_NAME.c, seeds in tests/fuzz/corpus/NAME/ ----
# The library is compiled again with clang into build/fuzz/ (coverage for libFuzzer, ASan + UBSan,
# no CUDA); each harness links it with -fsanitize=fuzzer. tools/fuzz.sh runs them one after another.
FUZZ_CC           ?= clang
FUZZ_SECONDS      ?= 300
FUZZ_TEST_SECONDS ?= 10
FUZZ_BUILD        := build/fuzz
FUZZ_SAN          := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS       := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-unused-parameter -I. $(PKG_CFLAGS) -O1 -g \
                     $(FUZZ_SAN) $(if $(filter yes,$(URING_OK)),-DKV_HAVE_URING)
FUZZ_LDLIBS       := -Wl,--as-needed $(PKG_LIBS) -lm -lpthread $(if $(filter yes,$(URING_OK)),$(shell pkg-config --libs liburing))
FUZZ_NAMES        := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BINS         := $(FUZZ_NAMES:%=$(FUZZ_BUILD)/bin/fuzz_%)
FUZZ_LIB_OBJ      := $(LIB_SRC:%.c=$(FUZZ_BUILD)/%.o) $(FUZZ_BUILD)/gen/embedded.o $(FUZZ_BUILD)/gen/gitrev.o

$(FUZZ_BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@
$(FUZZ_BUILD)/gen/%.o: build/gen/%.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@
$(FUZZ_BUILD)/libkvsim.a: $(FUZZ_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(FUZZ_BUILD)/bin/fuzz_%: $(FUZZ_BUILD)/tests/fuzz/fuzz_%.o $(FUZZ_BUILD)/libkvsim.a
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -fsanitize=fuzzer $(FUZZ_SAN) -o $@ $^ $(FUZZ_LDLIBS)

fuzz-build: $(FUZZ_BINS)
.SECONDARY: $(FUZZ_NAMES:%=$(FUZZ_BUILD)/tests/fuzz/fuzz_%.o)

fuzz:
	@bash tools/fuzz.sh --probe $(FUZZ_CC) || { echo "fuzz: $(FUZZ_CC) with libFuzzer not found; run 'make deps'"; exit 1; }
	@$(MAKE) --no-print-directory fuzz-build
	bash tools/fuzz.sh $(FUZZ_SECONDS) $(FUZZ_NAMES)

# part of make test: short runs; installs clang through make deps when missing, else says SKIPPED
fuzz-test:
	@bash tools/fuzz.sh --probe $(FUZZ_CC) || $(MAKE) --no-print-directory deps || true
	@if bash tools/fuzz.sh --probe $(FUZZ_CC); then \
	  $(MAKE) --no-print-directory fuzz-build && bash tools/fuzz.sh $(FUZZ_TEST_SECONDS) $(FUZZ_NAMES); \
	else echo "fuzz: SKIPPED — $(FUZZ_CC) with libFuzzer (packages clang libclang-rt-dev) is not installed; 'make deps' installs it"; fi

# ---- valgrind: the main commands, errors and leaks fail (tools/valgrind.sh) ----
valgrind: all
	bash tools/valgrind.sh $(BIN)

bench: all
	bash tests/bench.sh

check-long: all $(BUILD)/kvtest
	KVSIM_LONG=1 KVSIM_CHECK=8 KVSIM_ROOT=$(CURDIR) $(BUILD)/kvtest $(TEST_ARGS)
	@$(MAKE) --no-print-directory SANITIZE=address,undefined all
	bash tests/stress.sh

lint-layers:
	bash tools/lint_layers.sh

# lint-layers and its test, and no working words in tracked source and docs (tools/lint_words.sh, its test)
lint: lint-layers
	bash tests/lint_test.sh
	bash tools/lint_words.sh
	bash tests/lint_words_test.sh

gpu-check:
	bash tools/gpu_check.sh

# kvsim's predictions against real execution on this machine (docs/validation.md; <= 10 min on 2 cores)
validate: all
	KVSIM_BIN=$(BIN) bash tools/validate.sh $(BUILD)/validate

# kvsim against real vLLM runs replayed on measured cost stores (docs/fidelity.md; about a second)
validate-real: all
	python3 tools/validate_real.py --kvsim $(BIN)/kvsim --kvcal $(BIN)/kvcal --out $(BUILD)/validate-real

deps:
	@bash tools/deps.sh $(DEB_PKGS)

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/kvsim/configs
	install -m 755 bin/kvsim bin/kvcal $(DESTDIR)$(PREFIX)/bin/
	install -d $(DESTDIR)$(PREFIX)/share/kvsim/configs/scenarios
	install -m 644 configs/*.json $(DESTDIR)$(PREFIX)/share/kvsim/configs/
	install -m 644 configs/scenarios/*.json $(DESTDIR)$(PREFIX)/share/kvsim/configs/scenarios/

clean:
	rm -rf build bin

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
