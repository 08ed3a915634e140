// Command relay-peers runs the peers benchmark (package peers): the same
// retry workload on relay, raw amqp091-go loops, asynq, River and
// watermill-amqp, one child process per system, each this binary again
// (`make bench-peers`).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/relay-demo/relay/lab/peers"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := peers.Run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}
