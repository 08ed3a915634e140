// Package retrier is the process that runs the retry pipeline's error and
// requeue stages (`relay retrier`).
package retrier

import (
	"context"
	"fmt"
	"io"

	amqp "github.com/rabbitmq/amqp091-go"
	"golang.org/x/sync/errgroup"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/services/config"
	"github.com/relay-demo/relay/services/events"
)

// Run declares the topology and runs both stages until ctx is done,
// reconnecting whenever the broker connection is lost.
func Run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	var cfg Config
	if err := config.Parse(getenv, &cfg); err != nil {
		return err
	}
	if err := cfg.validate(); err != nil {
		return err
	}
	log := config.Logger(stdout, "retrier")
	log.Info("starting", config.Masked(cfg)...)
	topo, err := cfg.Pipeline(log)
	if err != nil {
		return err
	}
	tel := config.TelemetryFrom(ctx)
	if err := tel.ServeMetrics(ctx, cfg.MetricsAddr); err != nil {
		return err
	}
	mgmt, err := cfg.Management()
	if err != nil {
		return err
	}
	emitter := events.NewEmitter(topo, "retrier", log)
	stages := &retry.Stages{
		Topology: topo, Management: mgmt,
		Prefetch: cfg.Prefetch, Concurrency: cfg.Concurrency, Logger: log, ShutdownTimeout: cfg.ShutdownTimeout,
		Observe: events.Fanout(emitter.Observe, tel.Metrics(topo).Observe),
	}
	// Each stage has a connection of its own: a message too large for the
	// frame, which closes the connection it is delivered on, then points
	// at one queue.
	g, gctx := errgroup.WithContext(ctx)
	for _, st := range []struct {
		name, queue string
		run         func(context.Context, *amqp.Connection) error
	}{
		{"error", topo.Name(retry.ErrorQueue), stages.RunErrorStage},
		{"requeue", topo.Name(retry.RequeueQueue), stages.RunRequeueStage},
	} {
		g.Go(func() error {
			return retry.SuperviseAny(gctx, cfg.URLs(), "relay retrier "+st.name+" stage", log, func(ctx context.Context, conn *amqp.Connection) error {
				if err := topo.Declare(ctx, conn); err != nil {
					return err
				}
				log.Info("consuming", "stage", st.name, "queue", st.queue)
				return config.WithEvents(ctx, conn, emitter, st.run)
			})
		})
	}
	err = g.Wait()
	log.Info("stopped")
	return err
}

func itoa(n int) string { return fmt.Sprint(n) }
