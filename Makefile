# Run `make` (or `make help`) for the list of targets.
GO      ?= go
GOTEST  ?= $(GO) test
BIN     := bin
PYTHON  ?= python3

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_.-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## build every runnable into bin/
	$(GO) build -o $(BIN)/ ./phase07_chunked

.PHONY: test
test: ## run every test (CPU only; no GPU, no downloads)
	$(GOTEST) -count=1 ./...

.PHONY: vet
vet: ## go vet the whole module
	$(GO) vet ./...

.PHONY: phase07
phase07: ## baseline engine on the prefix_caching workload, built-in model
	$(GO) run ./phase07_chunked bench --workload prefix_caching $(ARGS)

.PHONY: bench-kernels
bench-kernels: ## CPU kernel benchmarks (matmul GFLOP/s, attention)
	$(GOTEST) -run '^$$' -bench . -benchtime 2s ./kernels/cpu/

.PHONY: golden
golden: ## regenerate the PyTorch golden logits (needs Python 3 with torch, e.g. Debian's python3-torch)
	d=$$(mktemp -d) && $(GOTEST) ./common/model -count=1 -run TestGoldenLogits -args -golden-models "$$d" && \
	  $(PYTHON) scripts/torch_reference.py --cases "$$d/cases.json" --out-dir common/model/testdata/golden
