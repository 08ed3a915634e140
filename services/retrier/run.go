// Package retrier is the process that runs the retry pipeline's error and
// requeue stages (`relay retrier`).
package retrier

import (
	"context"
	"io"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/runner"
	"github.com/relay-demo/relay/retry"
)

// Run declares the topology of relay's own channels (channel.Builtin) and
// runs the stages until ctx is done, reconnecting whenever the broker
// connection is lost. Each stage has a connection of its own: a message
// too large for the frame, which closes the connection it is delivered
// on, then stalls one stage at most.
func Run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	return RunWith(ctx, channel.Builtin(), getenv, stdout)
}

// RunWith is Run for the channels of channels: a program that embeds
// relay with channels of its own, or a test.
func RunWith(ctx context.Context, channels channel.Set, getenv func(string) string, stdout io.Writer) error {
	cfg, err := LoadConfig(getenv)
	if err != nil {
		return err
	}
	proc, err := runner.Start(ctx, "retrier", stdout, cfg, cfg.Broker, channels)
	if err != nil {
		return err
	}
	p := proc.Pipeline(retry.Config{StageConcurrency: cfg.Concurrency, StagePrefetch: cfg.Prefetch,
		Options: retry.Options{ShutdownTimeout: cfg.ShutdownTimeout}}, nil)
	p.ServeStages()
	return proc.Run(ctx, p)
}
