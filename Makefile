# relay: make help lists the targets.
GO      ?= go
PKGS    := ./...
TIMEOUT ?= 15m

.DEFAULT_GOAL := help

# The lab (lab/: benchmarks, the workshop, the fault, cluster and compose
# suites) adds its targets, and its part of test, test-unit and lint; a
# copy of relay without lab/ keeps every other target as it is.
-include lab/lab.mk

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-14s %s\n", $$1, $$2}'

.PHONY: build
build: ## build the relay binary into bin/
	$(GO) build -o bin/relay ./cmd/relay

.PHONY: install
install: ## install relay (and the lab's relay-lab) into $(go env GOPATH)/bin, the directory to have on PATH
	$(GO) install ./cmd/relay
	$(lab-install)

.PHONY: test
test: ## unit and integration tests, the lab's too, with the race detector (broker: AMQP_URL, else localhost, else testcontainers)
	$(GO) test -race -count=1 -timeout $(TIMEOUT) -tags integration $(PKGS)
	$(lab-test)

.PHONY: setup
setup: ## install and start what make test needs, on Debian (needs root; what runs already is left alone): RabbitMQ with its management plugin, PostgreSQL, Redis, chromium, curl, nodejs, zsh, fish
	@.ci/setup

.PHONY: test-timing
test-timing: ## timing tests, one package at a time: log how late the delay backends end a wait (binary levels at 10,000 pending) and how late scheduled sends arrive (200, p50/p99/most); assert only that none is early or lost
	$(GO) test -count=1 -p 1 -tags 'integration timing' -run 'Accuracy' -timeout 10m -v ./retry/ ./demo/all/

VERSION ?= 4.3
COMPAT_VERSIONS ?= 4.0 4.3

.PHONY: broker-up
broker-up: ## start a RabbitMQ VERSION (3.10, 4.0 or 4.3) node beside the default broker, from Debian's packages in a cached root; prints its URL (needs root)
	@deploy/broker.sh up $(VERSION) && deploy/broker.sh url $(VERSION)

.PHONY: broker-down
broker-down: ## stop the RabbitMQ VERSION node broker-up started
	@deploy/broker.sh down $(VERSION)

.PHONY: test-compat
test-compat: ## the integration suites on each of COMPAT_VERSIONS (default 4.0 4.3), each on a node of its own, started and stopped here (needs root)
	@deploy/compat.sh $(COMPAT_VERSIONS)

FUZZTIME ?= 60s

.PHONY: fuzz
fuzz: ## run every fuzz target for FUZZTIME each
	@for t in FuzzRetryCount FuzzHeaders FuzzClampDelay; do $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) ./retry/ || exit 1; done
	$(GO) test -run '^$$' -fuzz '^FuzzParseRetryAfter$$' -fuzztime $(FUZZTIME) ./webhooks/
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./internal/notification/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeRequest$$' -fuzztime $(FUZZTIME) ./services/api/

.PHONY: test-unit
test-unit: ## unit tests only: no broker needed
	$(GO) test -race -count=1 $(PKGS)
	$(lab-test-unit)

.PHONY: demo
demo: build ## run every service against the local broker, send a burst and follow it (dashboard on :8080)
	@deploy/demo.sh

.PHONY: up
up: ## the demo in containers: broker with the plugin, services, flaky downstreams, dashboard on :8080 (needs Docker)
	docker compose up --build

.PHONY: down
down: ## stop the demo and delete its containers and broker data
	docker compose --profile observability down --volumes --remove-orphans

.PHONY: logs
logs: ## follow the demo's logs
	docker compose logs -f

.PHONY: lint
lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet -tags integration $(PKGS)
	$(GO) vet -tags 'integration timing' ./retry/ ./demo/all/
	$(lab-vet)

.PHONY: bench-retry
bench-retry: ## go test -bench: retry round trips through the stages next to a raw DLX loop
	$(GO) test -tags integration -run '^$$' -bench . -benchtime 2000x ./retry/

.PHONY: screenshots
screenshots: ## the dashboard's browser test (needs chromium and the broker), its screenshots saved into docs/images for docs/dashboard.md
	DASHBOARD_SCREENSHOTS=$(CURDIR)/docs/images $(GO) test -count=1 -tags integration -run '^TestPicturesInBrowser$$' -v ./internal/dashboard/

.PHONY: diagram
diagram: ## print the default topology as a Mermaid diagram (no broker needed)
	@DELAY_BACKEND=plugin $(GO) run ./cmd/relay topology --no-declare --format mermaid

.PHONY: docs
docs: ## regenerate the generated docs (docs/topology.md, docs/openapi.json, the tables of docs/configuration.md and of the delay backends in docs/retries.md)
	$(GO) test ./cmd/relay/topology -run TestDocIsCurrent -update
	$(GO) test ./services/api -run TestOpenAPICopy -update
	$(GO) test ./cmd/relay -run 'TestConfigurationDoc|TestBackendsDoc' -update
