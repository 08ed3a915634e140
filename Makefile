# relay: make help lists the targets.
GO      ?= go
PKGS    := ./...
TIMEOUT ?= 15m

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-14s %s\n", $$1, $$2}'

.PHONY: build
build: ## build the relay binary into bin/
	$(GO) build -o bin/relay ./cmd/relay

.PHONY: test
test: ## unit and integration tests, with the race detector (broker: AMQP_URL, else localhost, else testcontainers)
	$(GO) test -race -count=1 -timeout $(TIMEOUT) -tags integration $(PKGS)
	cd services/tools/peers && $(GO) test -race -count=1 -timeout $(TIMEOUT) -tags integration ./...
	$(GO) -C services/tests test -race -count=1 -timeout $(TIMEOUT) -tags integration ./...

.PHONY: test-timing
test-timing: ## timing tests, one package at a time: how exactly the delay backends end a wait (binary levels at 10,000 pending), how late a scheduled send arrives (200, p99 within 100 ms)
	$(GO) test -count=1 -p 1 -tags 'integration timing' -run 'Accuracy' -timeout 10m -v ./retry/ ./services/all/

# BROKER=4.3 runs test-faults on a node of that version deploy/broker.sh
# starts (instance FAULTS_INSTANCE, so beside make broker-up's) and stops
# again, and test-cluster on three nodes from that version's root.
BROKER          ?=
FAULTS_INSTANCE ?= 2

.PHONY: test-faults
test-faults: ## fault tests: broker restarts, kill -9, connection cuts, poison messages (restarts the local broker with rabbitmqctl; BROKER=4.3: a 4.3 node of its own instead, needs root)
ifeq ($(BROKER),)
	$(GO) -C services/tests test -race -count=1 -tags faults -timeout 15m -v ./faults/
else
	RELAY_BROKER_INSTANCE=$(FAULTS_INSTANCE) deploy/broker.sh run $(BROKER) \
		$(GO) -C services/tests test -race -count=1 -tags faults -timeout 15m -v ./faults/
endif

.PHONY: test-cluster
test-cluster: ## cluster test: three RabbitMQ nodes of its own (never the default broker), nodes killed and restarted under load (needs root; BROKER=4.3: 4.3 nodes from deploy/broker.sh's root)
	RELAY_BROKER=$(BROKER) $(GO) -C services/tests test -race -count=1 -tags cluster -timeout 15m -v ./cluster/

VERSION ?= 4.3
COMPAT_VERSIONS ?= 4.0 4.3

.PHONY: broker-up
broker-up: ## start a RabbitMQ VERSION (4.0 or 4.3) node beside the default broker, from Debian's packages in a cached root; prints its URL (needs root)
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

.PHONY: demo
demo: build ## run every service against the local broker, send a burst and follow it (dashboard on :8080)
	@deploy/demo.sh

.PHONY: up
up: ## the demo in containers: broker with the plugin, services, flaky downstreams, dashboard on :8080 (needs Docker)
	docker compose up --build

.PHONY: down
down: ## stop the demo and delete its containers and broker data
	docker compose --profile observability down --volumes --remove-orphans

.PHONY: test-compose
test-compose: ## the compose demo for real: Docker engine and compose v2 (installed and started if missing), base images (built from Debian packages where none can be pulled), up, checks from outside, down (needs root)
	@deploy/compose/test.sh

.PHONY: logs
logs: ## follow the demo's logs
	docker compose logs -f

.PHONY: workshop-docs
workshop-docs: ## rerun every command in docs/workshop against the broker and write its output into the chapters
	$(GO) run ./cmd/relay workshop docs --out docs/workshop

.PHONY: lint
lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet -tags integration $(PKGS)
	$(GO) vet -tags 'integration timing' ./retry/ ./services/all/
	$(GO) -C services/tests vet -tags integration ./...
	$(GO) -C services/tests vet -tags faults ./faults/
	$(GO) -C services/tests vet -tags cluster ./cluster/
	$(GO) -C services/tests vet -tags compose ./compose/
	cd services/tools/peers && $(GO) vet -tags integration ./...

# BROKER=4.3 runs a bench on a RabbitMQ node of that version instead of the
# local broker: started (deploy/broker.sh, instance BENCH_BROKER_INSTANCE,
# a node of the bench's own), measured, stopped; the figures go to that
# version's own sections of docs/benchmarks.md, the rest of the page kept.
BENCH_BROKER_INSTANCE ?= 6
on_broker = $(if $(BROKER),RELAY_BROKER_INSTANCE=$(BENCH_BROKER_INSTANCE) $(CURDIR)/deploy/broker.sh run $(BROKER))
section   = $(if $(BROKER),--section $(BROKER))

.PHONY: bench
bench: ## measure relay against raw amqp091-go on the local broker and regenerate docs/benchmarks.md (about 9 minutes; keeps the bench-peers section and other brokers'); BROKER=4.3: on a 4.3 node, its own section
	$(on_broker) $(GO) run ./cmd/relay bench --format markdown $(section) --out docs/benchmarks.md

.PHONY: bench-peers
bench-peers: ## the same retry workload on relay, raw amqp091-go loops of each kind, asynq (Redis, and its own redis-server at appendfsync always and everysec), River (PostgreSQL) and watermill-amqp; writes its section of docs/benchmarks.md (about 5 minutes); BROKER=4.3: on a 4.3 node, relay's native backend too
	cd services/tools/peers && $(on_broker) $(GO) run . $(section) --out ../../../docs/benchmarks.md

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
docs: ## regenerate the generated docs (docs/topology.md, docs/openapi.json, the tables of docs/configuration.md)
	$(GO) test ./services/tools/topology -run TestDocIsCurrent -update
	$(GO) test ./services/api -run TestOpenAPICopy -update
	$(GO) test ./cmd/relay -run TestConfigurationDoc -update
