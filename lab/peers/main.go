// Command peers runs the same retry workload on relay, a raw amqp091-go
// DLX loop, asynq, River and watermill-amqp, one child process per
// system, and writes the comparison into docs/benchmarks.md: `make
// bench-peers`. It is a module of its own, so that asynq, River and
// watermill never enter relay's go.mod.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}
