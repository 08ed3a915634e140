package worker

import (
	"context"
	"fmt"
	"io"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/services/config"
	"github.com/relay-demo/relay/services/events"
)

// Run is `relay worker <channel>`: it consumes the channel's queue until
// ctx is done, finishing the sends in flight before it returns, and
// reconnects whenever the broker connection is lost.
func Run(ctx context.Context, channel string, getenv func(string) string, stdout io.Writer) error {
	ch, err := Lookup(channel)
	if err != nil {
		return err
	}
	var cfg Config
	if err := config.Parse(getenv, &cfg); err != nil {
		return err
	}
	if err := cfg.validate(); err != nil {
		return err
	}
	sender, closeSender, err := ch.Open(getenv)
	if err != nil {
		return err
	}
	defer closeSender()
	log := config.Logger(stdout, "worker-"+channel)
	log.Info("starting", config.Masked(cfg)...)
	topo, err := cfg.Pipeline(log)
	if err != nil {
		return err
	}
	queue := ""
	for _, r := range topo.WorkRoutes() {
		if r.Key == channel {
			queue = r.Queue
		}
	}
	if queue == "" {
		return fmt.Errorf("channel %q has no work queue in the topology", channel)
	}
	tel := config.TelemetryFrom(ctx)
	if err := tel.ServeMetrics(ctx, cfg.MetricsAddr); err != nil {
		return err
	}
	mgmt, err := cfg.Management()
	if err != nil {
		return err
	}
	emitter := events.NewEmitter(topo, "worker-"+channel, log)
	consumer := &retry.Consumer{
		Management: mgmt,
		Observe:    events.Fanout(emitter.Observe, tel.Metrics(topo).Observe),
		Topology:   topo, Queue: queue, Handler: Handler(channel, sender),
		Concurrency: cfg.Concurrency, Prefetch: cfg.Prefetch, Logger: log,
		ShutdownTimeout: cfg.ShutdownTimeout,
	}
	err = retry.SuperviseAny(ctx, cfg.URLs(), "relay worker "+channel, log, func(ctx context.Context, conn *amqp.Connection) error {
		if err := topo.Declare(ctx, conn); err != nil {
			return err
		}
		log.Info("consuming", "queue", queue, "concurrency", cfg.Concurrency)
		return config.WithEvents(ctx, conn, emitter, consumer.Run)
	})
	log.Info("stopped")
	return err
}
