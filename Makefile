GO ?= go
PKGS ?= ./...
# The modules of the workspace (go.work), tested and linted one by one:
# the outbox module at the root, the command, the binary-log feed, and
# the destinations whose clients are modules of their own. internal/tooltest is a module outside
# the workspace (GOWORK=off), so that its tools' versions never change what
# the others build with.
MODULES ?= . driver/outboxsql internal/dburl cmd/outbox driver/outboxbinlog publisher/outboxsqs publisher/outboxsns publisher/outboxkinesis publisher/outboxpubsub claimcheck/outboxs3 claimcheck/outboxgcs publisher/outboxamqp publisher/outboxkafka publisher/outboxmqtt publisher/outboxnats publisher/outboxredis publisher/outboxurl inbox/redisinbox examples internal/testkit

.PHONY: help test test-short services lint bench demo demo-soak build chaos

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

services: ## start the local services the tests need, if they are not running
	@scripts/services.sh

test: services ## run every test against the real local services, with the race detector and the failpoints (-tags outbox_failpoints); the relay processes they start run one outbox binary built first
	@scripts/chromium.sh >/dev/null || true
	@scripts/nats-cluster.sh >/dev/null || true # a current nats-server for the JetStream cluster tests
	@scripts/languages.sh || true # php and the JDBC drivers for the producers in examples/
	set -e; bin=$$(mktemp -d); trap 'rm -rf "$$bin"' EXIT; \
	$(GO) build -o "$$bin/outbox" ./cmd/outbox; \
	for m in $(MODULES); do (cd $$m && CI=$${CI:-true} OUTBOX_TEST_BINARY="$$bin/outbox" $(GO) test -race -count=1 -timeout 30m -tags outbox_failpoints $(PKGS)); done
	$(GO) test -count=1 ./internal/failpoint/ # without the tag: failpoints compiled out
	cd internal/tooltest && CI=$${CI:-true} GOWORK=off $(GO) test -count=1 -timeout 10m ./... # migration tools, a module of its own

test-short: ## run the tests that need no service
	set -e; for m in $(MODULES); do (cd $$m && $(GO) test -short -count=1 $(PKGS)); done

lint: ## gofmt, go vet and staticcheck, with and without the failpoints build tag
	@test -z "$$(gofmt -l .)" || { echo "not gofmt-formatted:" $$(gofmt -l .); exit 1; }
	set -e; for m in $(MODULES); do (cd $$m && $(GO) vet $(PKGS) && $(GO) vet -tags outbox_failpoints $(PKGS) && $(GO) tool staticcheck $(PKGS) && $(GO) tool staticcheck -tags outbox_failpoints $(PKGS)); done
	GOWORK=off $(GO) build ./... # the outbox module builds with the versions its own go.mod names
	cd internal/tooltest && GOWORK=off $(GO) vet ./...

bench: ## run the benchmark suite behind BENCHMARKS.md (QUICK=1 for a tenth of it)
	@scripts/bench.sh

build: ## build the outbox binary into ./bin
	$(GO) build -o bin/outbox ./cmd/outbox

chaos: services ## run the fault-injection scenarios at a large scale (OUTBOX_CHAOS_SCALE, OUTBOX_CHAOS_SEED; docs/chaos.md)
	CI=true OUTBOX_CHAOS_SCALE=$${OUTBOX_CHAOS_SCALE:-10} $(GO) test -race -count=1 -timeout 60m -tags outbox_failpoints -run Chaos -v ./internal/testkit/chaos/scenario

demo: ## run the demo
	$(GO) run ./cmd/outbox demo

demo-soak: ## run the demo 30 times with both cores kept busy; every run must end verified OK (RUNS=N)
	scripts/demo-soak.sh $${RUNS:-30}
