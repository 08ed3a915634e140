# The lab's make targets, included by the root Makefile: run from the
# repository root. lab/ is a Go module of its own (github.com/relay-demo/relay/lab)
# that measures relay, teaches its retry designs and runs it from outside.

# The lab's part of make test, make test-unit and make lint.
lab-test      = $(GO) -C lab test -race -count=1 -timeout $(TIMEOUT) -tags integration ./...
lab-test-unit = $(GO) -C lab test -race -count=1 ./...
lab-install   = $(GO) -C lab install ./cmd/relay-lab
define lab-vet
$(GO) -C lab vet -tags integration ./...
$(GO) -C lab vet -tags faults ./faults/
$(GO) -C lab vet -tags cluster ./cluster/
$(GO) -C lab vet -tags compose ./compose/
endef

.PHONY: lab
lab: ## build the lab's binaries into bin/: relay-lab (bench, workshop) and relay-peers (the peers benchmark)
	$(GO) -C lab build -o ../bin/relay-lab ./cmd/relay-lab
	$(GO) -C lab build -o ../bin/relay-peers ./cmd/relay-peers

# BROKER=4.3 runs test-faults on a node of that version deploy/broker.sh
# starts (instance FAULTS_INSTANCE, so beside make broker-up's) and stops
# again, and test-cluster on three nodes from that version's root.
# FAULTS_RUN narrows test-faults to the tests it matches (go test -run),
# FAULTS_SKIP leaves out those it matches (go test -skip).
BROKER          ?=
FAULTS_INSTANCE ?= 2
FAULTS_RUN      ?= .
FAULTS_SKIP     ?=

.PHONY: test-faults
test-faults: ## fault tests: broker restarts (the retry count across one, on every delay backend the broker runs), kill -9, connection cuts, poison messages (restarts the local broker with rabbitmqctl; BROKER=4.3: a 4.3 node of its own instead, needs root; FAULTS_RUN=regexp narrows them)
ifeq ($(BROKER),)
	$(GO) -C lab test -race -count=1 -tags faults -timeout 15m -v -run '$(FAULTS_RUN)' -skip '$(FAULTS_SKIP)' ./faults/
else
	RELAY_BROKER_INSTANCE=$(FAULTS_INSTANCE) deploy/broker.sh run $(BROKER) \
		$(GO) -C lab test -race -count=1 -tags faults -timeout 15m -v -run '$(FAULTS_RUN)' -skip '$(FAULTS_SKIP)' ./faults/
endif

.PHONY: test-cluster
test-cluster: ## cluster test: three RabbitMQ nodes of its own (never the default broker), nodes killed and restarted under load (needs root; BROKER=4.3: 4.3 nodes from deploy/broker.sh's root)
	RELAY_BROKER=$(BROKER) $(GO) -C lab test -race -count=1 -tags cluster -timeout 15m -v ./cluster/

.PHONY: test-compose
test-compose: ## the compose demo for real: Docker engine and compose v2 (installed and started if missing), base images (built from Debian packages where none can be pulled), up, checks from outside, down (needs root)
	@lab/compose/test.sh

.PHONY: workshop-docs
workshop-docs: ## rerun every command in docs/workshop against the broker and write its output into the chapters
	$(GO) -C lab run ./cmd/relay-lab workshop docs --out ../docs/workshop

# BROKER=4.3 runs a bench on a RabbitMQ node of that version instead of the
# local broker: started (deploy/broker.sh, instance BENCH_BROKER_INSTANCE,
# a node of the bench's own), measured, stopped; the figures go to that
# version's own sections of docs/benchmarks.md, the rest of the page kept.
BENCH_BROKER_INSTANCE ?= 6
on_broker = $(if $(BROKER),RELAY_BROKER_INSTANCE=$(BENCH_BROKER_INSTANCE) $(CURDIR)/deploy/broker.sh run $(BROKER))
section   = $(if $(BROKER),--section $(BROKER))

.PHONY: bench
bench: ## measure relay against raw amqp091-go on the local broker and regenerate docs/benchmarks.md (about 9 minutes; keeps the bench-peers section and other brokers'); BROKER=4.3: on a 4.3 node, its own section
	$(GO) -C lab build -o ../bin/relay-lab ./cmd/relay-lab
	$(on_broker) bin/relay-lab bench --format markdown $(section) --out docs/benchmarks.md

.PHONY: bench-peers
bench-peers: ## the same retry workload on relay, raw amqp091-go loops of each kind, asynq (Redis, and its own redis-server at appendfsync always and everysec), River (PostgreSQL) and watermill-amqp; writes its section of docs/benchmarks.md (about 5 minutes); BROKER=4.3: on a 4.3 node, relay's native backend too
	$(GO) -C lab build -o ../bin/relay-peers ./cmd/relay-peers
	$(on_broker) bin/relay-peers $(section) --out docs/benchmarks.md

