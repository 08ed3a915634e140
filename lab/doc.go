// Package lab is the module that measures relay, teaches its retry designs
// and runs it from outside, beside the template it checks:
//
//   - cmd/relay-lab and cmd/relay-peers: the lab's two binaries,
//     `relay-lab bench` and `relay-lab workshop`, and `relay-peers`, the
//     peers benchmark (make lab builds both into bin/);
//   - bench: relay's paths measured against raw amqp091-go on the same
//     broker, in the same run (docs/benchmarks.md);
//   - peers: the same retry workload on relay, asynq, River and
//     watermill-amqp (make bench-peers);
//   - workshop and strategy: every retry design of the RabbitMQ literature
//     built and run side by side (docs/workshop);
//   - faults, cluster, compose: the suites that restart and kill brokers
//     and processes, run a three-node cluster, and run the compose demo
//     for real;
//   - deploy: docker-compose.yml and the Dockerfiles checked without
//     Docker.
//
// It is a module of its own so that what it needs (compose-go, buildkit,
// toxiproxy, asynq, River, watermill) stays out of the go.mod a copy of
// relay inherits, and a copy can delete lab/ whole: the root Makefile
// includes lab/lab.mk only when it is there.
package lab
