# Run `make` (or `make help`) for the list of targets.
GO      ?= go
GOTEST  ?= $(GO) test
BIN     := bin
PYTHON  ?= python3

.DEFAULT_GOAL := help

include kernels/cuda/Makefile.inc

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "; w = 120 - 23} \
	  /^[a-zA-Z0-9_.-]+:.*## / { \
	    name = $$1; n = split($$2, words, " "); line = ""; \
	    for (i = 1; i <= n; i++) { \
	      if (line != "" && length(line) + 1 + length(words[i]) > w) { printf "  %-20s %s\n", name, line; name = ""; line = words[i] } \
	      else line = (line == "" ? words[i] : line " " words[i]) } \
	    printf "  %-20s %s\n", name, line }' $(MAKEFILE_LIST)

.PHONY: build
build: ## build every runnable into bin/
	$(GO) build -o $(BIN)/ ./phase07_chunked ./phase08 $(addprefix ./,$(VARIANTS)) ./phase08_router ./phase08_leak ./phase09_tiers

.PHONY: test
# The experiments that measure rather than prove (internal/testgate):
# skipped by `make test`, run by `make test-long` (CI runs both).
LONG_TESTS := TestWindowFreeTradeOff TestKVCacheDTypeParityLong
LONG_PKGS  := ./common/engine/ ./phase08/

test: ## run every test that proves behaviour (CPU only; no GPU, no downloads; a few minutes on 2 cores)
	$(GOTEST) -count=1 -timeout 20m ./...

# The fuzz targets `make test-long` runs, as package:Target:executions (go
# test -fuzz takes one target a run); append with +=. Their seed corpora
# (testdata/fuzz/<Target>) run in `make test` as plain tests, and a failing
# input the fuzzer finds is written there.
#
# Each target runs a count of executions, about 20 s of two cores, not a
# duration: Go 1.26's fuzzing coordinator can fail a clean run with a bare
# "context deadline exceeded" when a -fuzztime duration ends while a worker
# is busy (go.dev/issue/75804, fixed in Go 1.27), and a count never sets
# that deadline. FUZZ_TIME=5m (or 1000000x) runs every target for that
# instead.
FUZZ_TARGETS := ./common/server/:FuzzCacheFileScan:60000
FUZZ_TARGETS += ./common/server/:FuzzPromptBody:13000
FUZZ_TARGETS += ./phase08_prefix/radix/:FuzzFastLanes:20000
FUZZ_TARGETS += ./phase08_hashcow/blockhash/:FuzzWalkFast:17000
FUZZ_TARGETS += ./phase08_compressed/trie/:FuzzMergingIsInvisible:38000
FUZZ_TARGETS += ./common/grammar/jsonschema/:FuzzPattern:40000
FUZZ_TARGETS += ./common/grammar/jsonschema/:FuzzToGBNF:400000
FUZZ_TARGETS += ./common/toolcall/:FuzzStream:200000
FUZZ_TIME    ?=

.PHONY: test-long
test-long: ## the experiments that pin the docs' measured counts, then each fuzz target for its count of executions (minutes of CPU; internal/testgate)
	KVLAB_TEST_LONG=1 $(GOTEST) -count=1 -timeout 60m -run '^($(subst $(eval) ,|,$(LONG_TESTS)))$$' $(LONG_PKGS)
	@for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; budget=$(FUZZ_TIME); \
	  [ -n "$$budget" ] || budget=$${rest##*:}x; \
	  echo "== fuzz $$name in $$pkg for $$budget"; \
	  $(GOTEST) -run '^$$' -fuzz "^$$name\$$" -fuzztime $$budget $$pkg || exit 1; \
	done

.PHONY: test-arm64
# The arm64 build's tests, cross-compiled and run under qemu-user (Debian's
# qemu-user-static, installed here when missing): kernels/cpu holds the NEON
# kernels to the Go ones bit for bit, and KVLAB_KERNEL_SET makes it fail if
# the build ran any other set. Timings under emulation mean nothing.
QEMU_ARM64 ?= qemu-aarch64-static
ARM64_PKGS := kernels/cpu kernels common/model

test-arm64: ## the arm64 build's tests (kernels/cpu's NEON kernels against the Go ones, kernels, common/model) under qemu-user
	@command -v $(QEMU_ARM64) >/dev/null || { \
	  echo "== installing qemu-user-static (Debian)"; \
	  sudo=; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
	  DEBIAN_FRONTEND=noninteractive $$sudo apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends qemu-user-static >/dev/null; }
	GOARCH=arm64 $(GO) vet ./kernels/cpu/
	@d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && \
	for p in $(ARM64_PKGS); do \
	  GOARCH=arm64 $(GO) test -c -o "$$d/$$(echo $$p | tr / _).test" ./$$p || exit 1; \
	done && \
	for p in $(ARM64_PKGS); do \
	  echo "== $$p: linux/arm64 under $(QEMU_ARM64)"; \
	  (cd $$p && KVLAB_KERNEL_SET=neon $(QEMU_ARM64) "$$d/$$(echo $$p | tr / _).test" -test.short) || exit 1; \
	done

.PHONY: test-browser debug-screenshots
# serve's /debug/cache page in headless Chromium (Debian's chromium,
# installed here when missing; $$CHROMIUM names another binary): the page
# must draw each view the server streams, without a reload. Not in `make
# test`, which needs no browser.
CHROMIUM ?= /usr/bin/chromium

test-browser: ## serve's /debug/cache page in headless Chromium (chromedp; installs Debian's chromium when missing): live redraws over SSE, checked on screenshots
	@[ -x "$(CHROMIUM)" ] || { \
	  echo "== installing chromium (Debian)"; \
	  sudo=; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
	  DEBIAN_FRONTEND=noninteractive $$sudo apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null; }
	CHROMIUM=$(CHROMIUM) KVLAB_REQUIRE_BROWSER=1 KVLAB_SCREENSHOT_DIR=$(KVLAB_SCREENSHOT_DIR) $(GOTEST) -tags browser -run Browser -count=1 ./common/cli/

debug-screenshots: ## regenerate docs/img/debug-cache-*.png: the browser test's scripted workload (a shared system prompt, a second tenant, evictions) on serve -debug-cache
	$(MAKE) test-browser KVLAB_SCREENSHOT_DIR=$(CURDIR)/docs/img

.PHONY: soak
soak: ## two minutes of hostile HTTP load on `phase08_prefix serve --prefix-caching`: outcomes, TTFT, RSS, goroutines, audit
	$(GO) run ./tests/soak -duration 2m $(ARGS)

.PHONY: test-openai-client
test-openai-client: ## the official OpenAI Node client (npm ci) against `phase08_prefix serve --prefix-caching`
	bash tests/openai-client/run.sh

.PHONY: test-llama-suite
test-llama-suite: ## llama.cpp's own server tests (LLAMA_CPP_SRC=<llama.cpp checkout>, FILES=unit/test_x.py ...) against `phase08_prefix serve` through a flag-mapping shim; LLAMA_CPP_DIR=<llama.cpp build> adds llama-server on the same model as control; out/llama-suite (Debian's python3-pytest etc.; not in CI)
	@[ -n "$(LLAMA_CPP_SRC)" ] || { echo "test-llama-suite: set LLAMA_CPP_SRC to a llama.cpp checkout"; exit 2; }
	LLAMA_CPP_SRC="$(LLAMA_CPP_SRC)" LLAMA_CPP_DIR="$(LLAMA_CPP_DIR)" bash tests/llama-suite/run.sh $(FILES)

.PHONY: test-tokenizers
test-tokenizers: ## common/tokenizer against transformers.js and HF tokenizers (npm ci) on the real Gemma-3, Qwen3 and Llama-3 files
	bash tests/tokenizers/run.sh

.PHONY: vet
vet: ## go vet the whole module
	$(GO) vet ./...

.PHONY: phase07
phase07: ## baseline engine on the prefix_caching workload, built-in model
	$(GO) run ./phase07_chunked bench --workload prefix_caching $(ARGS)

.PHONY: phase07-chunked
phase07-chunked: ## whole-prompt against chunked prefill at step budgets 256, 512 and 2048, with and without phase08_prefix's cache: TTFT of long prompts and of the short requests behind them, ITL p99 and max (wall clock, medians of 3 runs; a few minutes)
	$(GO) run ./phase08_prefix chunking $(ARGS)

.PHONY: bench-kernels
bench-kernels: ## CPU kernel benchmarks (matmul GFLOP/s, attention)
	$(GOTEST) -run '^$$' -bench . -benchtime 2s ./kernels/cpu/

.PHONY: golden
golden: ## regenerate the PyTorch golden logits (needs Python 3 with torch, e.g. Debian's python3-torch)
	d=$$(mktemp -d) && $(GOTEST) ./common/model -count=1 -run TestGoldenLogits -args -golden-models "$$d" && \
	  $(PYTHON) scripts/torch_reference.py --cases "$$d/cases.json" --out-dir common/model/testdata/golden

WORKLOAD  ?= prefix_caching
# The built-in model's architecture for phase08 and phase08-http: llama, qwen3 or gemma3.
MODEL     ?= llama
VARIANTS  := phase08_prefix phase08_hashcow phase08_compressed
COUNT     ?= 6
SCALE_COUNT ?= 5
SCALE_TIME  ?= 300ms
# benchstat is pinned by the tool directive in go.mod.
BENCHSTAT ?= $(GO) tool benchstat

.PHONY: phase08
phase08: ## baseline + the three prefix caches on one workload (WORKLOAD=prefix_caching|multi_turn|no_shared_prefix|chunked_prefill; MODEL=llama|qwen3|gemma3); plots in out/phase08-MODEL-WORKLOAD*.svg
	@echo "== go run ./phase08 compiles it first: about a minute on 2 cores the first time, cached after that"
	$(GO) run ./phase08 -arch $(MODEL) -workload $(WORKLOAD) $(ARGS)

# The three experiments of docs/phase08_experiments.md: each isolates one
# effect on the virtual clock (deterministic numbers), prints its table and
# writes its plot under out/.
.PHONY: phase08-align phase08-pressure phase08-order
phase08-align: ## experiment: one 1,000-token shared prefix at block sizes 1, 16 and 64: prefill against the block-aligned and the token-level optimum (out/phase08-MODEL-align.svg)
	$(GO) run ./phase08 align -clock step:50ms $(ARGS)

phase08-pressure: ## experiment: six system prompts, a pool too small for them all: hit rate and evictions per design and eviction policy (out/phase08-MODEL-pressure.svg)
	$(GO) run ./phase08 pressure -clock step:50ms $(ARGS)

phase08-order: ## experiment: first come first served against longest prefix first, with and without a starvation guard: hit rate and TTFT p99 (out/phase08-MODEL-order.svg)
	$(GO) run ./phase08 order -clock step:50ms $(ARGS)

# docs/phase09_tiers.md: cache tiers under the pool, on the virtual clock.
.PHONY: phase09
phase09: ## experiment: 64 conversations outgrow a pool of about 8: no tier, a RAM tier, RAM over disk, disk alone, against an unbounded pool (radix tree; ARGS=-design all); LLAMA_CPP_DIR=<llama.cpp build> adds llama-server with and without --cache-ram (out/phase09-MODEL-tiers.svg)
	$(GO) run ./phase09_tiers -clock step:50ms $(if $(LLAMA_CPP_DIR),-llama-cpp "$(LLAMA_CPP_DIR)") $(ARGS)

.PHONY: bench
bench: ## shared cache + engine benchmarks of the three variants, compared with benchstat, then bench-scale at 10k and 100k blocks
	@mkdir -p out/bench
	@for v in $(VARIANTS); do \
	  echo "== $$v: BenchmarkCache and BenchmarkEngine, $(COUNT) runs each (a few minutes)"; \
	  $(GOTEST) -run '^$$' -bench '^Benchmark(Cache|Engine)$$' -benchmem -count $(COUNT) ./$$v/ > out/bench/$$v.txt || exit 1; \
	done
	$(BENCHSTAT) -ignore pkg prefix=out/bench/phase08_prefix.txt hashcow=out/bench/phase08_hashcow.txt compressed=out/bench/phase08_compressed.txt
	@$(MAKE) --no-print-directory bench-scale SCALE_FLAGS=-short

comma := ,
empty :=
space := $(empty) $(empty)
SERVERS := $(subst $(space),$(comma),$(addprefix $(BIN)/,phase07_chunked $(VARIANTS)))

.PHONY: phase08-http
phase08-http: build ## make phase08 over HTTP: each design as its own server, measured at the client
	$(BIN)/phase08 -arch $(MODEL) -workload $(WORKLOAD) -servers $(SERVERS) $(ARGS)

.PHONY: bench-cpu bench-decode
bench-cpu: ## CPU engine decode and prefill tok/s on synthetic models A and B, f32 and bf16 (ARGS=-runs 9 -threads 1 ...); LLAMA_CPP_DIR=<llama.cpp build> adds llama-bench's on the same models, exported to GGUF; KVLAB_KERNEL_SET=avx2 runs the AVX2 kernels on an AVX-512 CPU
	$(GO) run ./cmd/benchcpu $(ARGS)

bench-decode: ## CPU decode tok/s on llama2.c's stories15M shape (hidden 288, 6 layers), f32 and bf16, 511 tokens, 2 threads (ARGS=-runs 9 ...); LLAMA2C_DIR=<dir with a built llama2.c run> adds run.c's on the same weights
	$(GO) run ./cmd/benchdecode $(ARGS)

.PHONY: bench-real
bench-real: ## serve on synthetic Llama-3.2-1B, Qwen3-0.6B and Gemma-3-1B checkpoints (GBs; out/bench-real): TTFT, decode, a serving run, start-up; LLAMA_CPP_DIR=<llama.cpp build> runs llama-server beside it (ARGS=-small ...)
	$(GO) run ./cmd/benchreal $(ARGS)

.PHONY: phase08-router
phase08-router: build ## the router's four policies, each over three fresh replicas, on the routing workload: TTFT, cached tokens, imbalance; LLAMA_CPP_DIR=<llama.cpp build> adds the prefix policy with and without id_slot over three llama-server -np 2 (LLAMA_ARGS=...)
	$(BIN)/phase08_router bench $(ARGS)
	@if [ -n "$(LLAMA_CPP_DIR)" ]; then \
	  echo "== the routing workload over three llama-server replicas of 2 slots (4 system prompts, 48 conversations, 16/s)"; \
	  $(BIN)/phase08_router bench -llama-cpp "$(LLAMA_CPP_DIR)" $(LLAMA_ARGS); \
	fi

.PHONY: docs-numbers
docs-numbers: ## regenerate the docs' deterministic numbers between their <!-- numbers:NAME --> markers (virtual clock; a few minutes)
	$(GO) run ./internal/docnumbers/cmd/docnumbers $(ARGS)

.PHONY: phase08-leak
phase08-leak: ## the TTFT side channel of a shared prefix cache, closed by cache salts; what salting costs; a per-tenant cache share against a noisy neighbour (about a minute)
	$(GO) run ./phase08_leak $(ARGS)

.PHONY: bench-scale
bench-scale: ## prefix caches filled to 10k, 100k and 1M blocks: Match, Evictable, Evict(64), Insert, index bytes and GC (SCALE_FLAGS=-short for 10k/100k; several minutes)
	@mkdir -p out/bench
	@for v in $(VARIANTS); do \
	  echo "== $$v: BenchmarkScale, $(SCALE_COUNT) runs"; \
	  $(GOTEST) -run '^$$' -bench '^BenchmarkScale$$' -count $(SCALE_COUNT) -benchtime $(SCALE_TIME) $(SCALE_FLAGS) ./$$v/... > out/bench/scale-$$v.txt || exit 1; \
	done
	@for v in $(VARIANTS); do echo "== $$v"; $(BENCHSTAT) -ignore pkg -col /blocks out/bench/scale-$$v.txt || exit 1; done

.PHONY: exercise exercises-check
exercise: ## the exercises (docs/exercises.md): list them; EX=N undoes one fix in a scratch copy and runs its test; EX=N SHOW=fix shows the fix
	@bash scripts/exercises.sh $(if $(EX),$(if $(filter fix,$(SHOW)),show,run) $(EX),list)

exercises-check: ## every exercise's test passes, and fails with the exercise's patch applied (in a scratch copy)
	bash scripts/exercises.sh check
