package worker

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/config"
	"github.com/relay-demo/relay/internal/events"
	"github.com/relay-demo/relay/internal/runner"
	"github.com/relay-demo/relay/retry"
)

// Run is `relay worker <channel>`, for one of relay's own channels
// (channel.Builtin): it consumes the channel's queue until ctx is done,
// finishing the sends in flight before it returns, and reconnects whenever
// the broker connection is lost.
func Run(ctx context.Context, name string, getenv func(string) string, stdout io.Writer) error {
	return RunWith(ctx, channel.Builtin(), name, getenv, stdout)
}

// RunWith is Run for the named channel of channels, whose work queues
// its topology declares: a program that embeds relay with channels of its
// own, or a test.
func RunWith(ctx context.Context, channels channel.Set, name string, getenv func(string) string, stdout io.Writer) error {
	ch, err := channels.Lookup(name)
	if err != nil {
		return err
	}
	cfg, err := LoadConfig(getenv)
	if err != nil {
		return err
	}
	// The process's one history store, opened on first use: the worker
	// starts, and sends notifications not scheduled, while it is down.
	store, closeStore := runner.Store(ctx, cfg.Store)
	defer closeStore()
	send, closeSend, err := ch.Open(getenv, store.Open)
	if err != nil {
		return err
	}
	defer closeSend()
	send = channel.PaceTenants(ch, cfg.TenantRate, store.Open, send, time.Now)
	proc, err := runner.Start(ctx, "worker-"+name, stdout, cfg, cfg.Broker, channels)
	if err != nil {
		return err
	}
	if notice := channel.LimitNotice(name, getenv); notice != "" {
		proc.Log.Warn("rate limits shared through a store other replicas may not share", "channel", name, "detail", notice)
	}
	// Every channel's providers in the process, once per registry: in
	// `relay all` the workers share one.
	var already prometheus.AlreadyRegisteredError
	if err := proc.Telemetry.Registry.Register(channel.ProviderMetrics{}); err != nil && !errors.As(err, &already) {
		return err
	}
	holds := func(ctx context.Context) (Cancellations, error) { return store.Open(ctx) }
	p := proc.Pipeline(retry.Config{Options: retry.Options{Concurrency: cfg.Concurrency, Prefetch: cfg.Prefetch, ShutdownTimeout: cfg.ShutdownTimeout}},
		map[string]retry.Handler{name: reporting(proc.Events.Operate, checkCancelled(name, holds, Handler(name, send)))})
	p.StagesElsewhere() // relay retrier runs them
	if name != channel.Webhook.Name() {
		return proc.Run(ctx, p)
	}
	// The webhook worker, which signs the operator webhook, also turns
	// the operational events into its notifications.
	var op channel.OperatorConfig
	if err := config.Parse(getenv, &op); err != nil {
		return err
	}
	if !op.On() {
		return proc.Run(ctx, p)
	}
	fwd := &events.Forwarder{Topology: proc.Topology(), Channel: name, URL: op.URL, Service: proc.Name, Log: proc.Log}
	fctx, stop := context.WithCancel(ctx)
	forwarded := make(chan struct{})
	go func() {
		defer close(forwarded)
		_ = retry.SuperviseAny(fctx, cfg.URLs(), "relay "+proc.Name+" operator webhooks", proc.Log, fwd.Run)
	}()
	err = proc.Run(ctx, p)
	stop()
	<-forwarded
	return err
}
