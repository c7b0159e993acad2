GO ?= go
PKGS ?= ./...

.PHONY: help test test-short services lint bench demo demo-soak build chaos

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

services: ## start the local services the tests need, if they are not running
	@scripts/services.sh

test: services ## run every test against the real local services, with the race detector and the failpoints (-tags outbox_failpoints)
	@scripts/chromium.sh >/dev/null || true
	@scripts/languages.sh || true # php and the JDBC drivers for the producers in examples/
	CI=$${CI:-true} $(GO) test -race -count=1 -timeout 30m -tags outbox_failpoints $(PKGS)
	$(GO) test -count=1 ./internal/failpoint/ # without the tag: failpoints compiled out
	cd internal/tooltest && CI=$${CI:-true} $(GO) test -count=1 -timeout 10m ./... # migration tools, a module of its own

test-short: ## run the tests that need no service
	$(GO) test -short -count=1 $(PKGS)

lint: ## gofmt, go vet and staticcheck, with and without the failpoints build tag
	@test -z "$$(gofmt -l .)" || { echo "not gofmt-formatted:" $$(gofmt -l .); exit 1; }
	$(GO) vet $(PKGS)
	$(GO) vet -tags outbox_failpoints $(PKGS)
	$(GO) tool staticcheck $(PKGS)
	$(GO) tool staticcheck -tags outbox_failpoints $(PKGS)
	cd internal/tooltest && $(GO) vet ./...

bench: ## run the benchmark suite behind BENCHMARKS.md (QUICK=1 for a tenth of it)
	@scripts/bench.sh

build: ## build the outbox binary into ./bin
	$(GO) build -o bin/outbox ./cmd/outbox

chaos: services ## run the fault-injection scenarios at a large scale (OUTBOX_CHAOS_SCALE, OUTBOX_CHAOS_SEED; docs/chaos.md)
	CI=true OUTBOX_CHAOS_SCALE=$${OUTBOX_CHAOS_SCALE:-10} $(GO) test -race -count=1 -timeout 60m -tags outbox_failpoints -run Chaos -v ./internal/chaos/scenario

demo: ## run the demo
	$(GO) run ./cmd/outbox demo

demo-soak: ## run the demo 30 times with both cores kept busy; every run must end verified OK (RUNS=N)
	scripts/demo-soak.sh $${RUNS:-30}
