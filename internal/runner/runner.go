// Package runner is what every relay process does around its own work:
// it logs its configuration (passwords masked), builds the pipeline's
// topology from the environment with every channel's queue, serves
// /metrics, publishes the pipeline's events on a connection of its own,
// traces every attempt when OTLP export is configured, and runs a
// retry.Pipeline until it is told to stop.
package runner

import (
	"context"
	"io"
	"log/slog"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/config"
	"github.com/relay-demo/relay/internal/events"
	"github.com/relay-demo/relay/internal/tracing"
	"github.com/relay-demo/relay/retry"
)

// Process is one relay service as it starts.
type Process struct {
	// Name names the service in its logs and events, such as
	// "worker-email".
	Name      string
	Log       *slog.Logger
	Telemetry *Telemetry
	// Events publishes the process's pipeline events.
	Events *events.Emitter
	// Tracing is where the spans of its attempts go, if anywhere (see
	// tracing.Start); Run shuts it down.
	Tracing *tracing.Tracing

	broker config.Broker
	topo   retry.Topology
	mgmt   *retry.Management
}

// Start logs that the service starts, with its configuration cfg (every
// secret masked), builds its topology from broker (the work queue of every
// channel of channels, the backend as configured) and starts its tracing, as relay-name,
// from the OTEL_* variables. It contacts no broker; its error names the
// variable at fault.
func Start(ctx context.Context, name string, stdout io.Writer, cfg any, broker config.Broker, channels channel.Set) (*Process, error) {
	log := config.Logger(stdout, name)
	log.Info("starting", config.Masked(cfg)...)
	topo, err := broker.Topology(channels.Routes())
	if err != nil {
		return nil, err
	}
	mgmt, err := broker.Management()
	if err != nil {
		return nil, err
	}
	if err := broker.ManagementMissing(); err != nil {
		log.Warn("relay does without the management API: no watch for dead letters a quorum queue holds, no moving aside of messages too large for an AMQP frame",
			"error", err.Error())
	}
	tr, err := tracing.Start(ctx, "relay-"+name, log)
	if err != nil {
		return nil, err
	}
	return &Process{
		Name: name, Log: log, Telemetry: TelemetryFrom(ctx), Events: events.NewEmitter(topo, name, log), Tracing: tr,
		broker: broker, topo: topo, mgmt: mgmt,
	}, nil
}

// Topology is the process's topology, with DELAY_BACKEND=auto not yet
// resolved (see Resolve).
func (p *Process) Topology() retry.Topology { return p.topo }

// Resolve returns the topology with DELAY_BACKEND=auto resolved against
// the broker, waiting for one to answer until ctx is done.
func (p *Process) Resolve(ctx context.Context) (retry.Topology, error) {
	return retry.Resolve(ctx, p.topo, p.broker.URLs(), p.Log)
}

// Observe is the hook a pipeline reports its decisions to: the events
// exchange and the metrics.
func (p *Process) Observe(ev retry.Event) {
	p.Events.Observe(ev)
	p.Telemetry.Metrics(p.topo).Observe(ev)
}

// Pipeline returns the process's retry pipeline: the process's topology,
// the broker's management API, its logger and Observe, with rc's sizes.
// It declares every channel's queue and consumes those handlers names by
// channel. With tracing on, every attempt is a span (tracing.Middleware),
// around any middleware the caller adds.
func (p *Process) Pipeline(rc retry.Config, handlers map[string]retry.Handler) *retry.Pipeline {
	rc.Topology = p.topo
	// No management API (MANAGEMENT_URL=off, or not derivable) is none:
	// the pipeline derives no other.
	rc.Management, rc.NoManagement, rc.Logger, rc.Observe = p.mgmt, p.mgmt == nil, p.Log, p.Observe
	if rc.Name == "" {
		rc.Name = "relay " + p.Name
	}
	pl := retry.New(rc)
	if p.Tracing.Enabled() {
		pl.Use(tracing.Middleware(p.Tracing.Provider()))
	}
	for _, r := range p.topo.Routes {
		if h, ok := handlers[r.Key]; ok {
			pl.Handle(r.Queue, r.Key, h)
		}
	}
	return pl
}

// Run serves /metrics on the broker settings' METRICS_ADDR, publishes the
// events, and runs pl until ctx is done and pl has stopped. The events
// go on being published until pl has stopped, so the last decisions are
// not lost; so are the last spans, exported before Run returns.
func (p *Process) Run(ctx context.Context, pl *retry.Pipeline) error {
	defer func() {
		if err := p.Tracing.Shutdown(ctx); err != nil {
			p.Log.Warn("spans not exported", "error", err.Error())
		}
	}()
	if err := p.Telemetry.ServeMetrics(ctx, p.broker.MetricsAddr); err != nil {
		return err
	}
	ectx, stopEvents := context.WithCancel(context.WithoutCancel(ctx))
	emitted := make(chan struct{})
	go func() {
		defer close(emitted)
		Emit(ectx, p.broker.URLs(), "relay "+p.Name+" events", p.Events, p.Log)
	}()
	err := pl.Run(ctx, p.broker.URLs()...)
	stopEvents()
	<-emitted
	p.Log.Info("stopped")
	return err
}

// Emit publishes em's events on a connection of its own, reconnecting as
// needed, until ctx is done and what was buffered then is published (up
// to events.Emitter.Run's drain limit).
func Emit(ctx context.Context, urls []string, name string, em *events.Emitter, log *slog.Logger) {
	_ = retry.SuperviseAny(ctx, urls, name, log, func(ctx context.Context, conn *amqp.Connection) error {
		return em.Run(ctx, conn)
	})
}

// WithEvents runs fn on conn while em publishes its events on the same
// connection, and returns once both have stopped.
func WithEvents(ctx context.Context, conn *amqp.Connection, em *events.Emitter, fn func(context.Context, *amqp.Connection) error) error {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = em.Run(ctx, conn)
	}()
	err := fn(ctx, conn)
	cancel()
	<-done
	return err
}
