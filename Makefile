GO ?= go
PKGS ?= ./...

.PHONY: help test test-short services lint bench demo build

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

services: ## start the local services the tests need, if they are not running
	@scripts/services.sh

test: services ## run every test against the real local services, with the race detector
	@scripts/chromium.sh >/dev/null || true
	CI=$${CI:-true} $(GO) test -race -count=1 -timeout 30m $(PKGS)

test-short: ## run the tests that need no service
	$(GO) test -short -count=1 $(PKGS)

lint: ## vet the code
	$(GO) vet $(PKGS)

bench: ## run the benchmark suite behind BENCHMARKS.md (QUICK=1 for a tenth of it)
	@scripts/bench.sh

build: ## build the outbox binary into ./bin
	$(GO) build -o bin/outbox ./cmd/outbox

demo: ## run the demo
	$(GO) run ./cmd/outbox demo
