package runner

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/relay-demo/relay/internal/config"
	"github.com/relay-demo/relay/internal/events"
	"github.com/relay-demo/relay/retry"
)

// Telemetry is a process's Prometheus registry and its pipeline metrics.
// Each service makes its own, unless it runs inside `relay all`, where
// every service shares the one in its context and the API serves it.
type Telemetry struct {
	Registry *prometheus.Registry
	shared   bool
	once     sync.Once
	metrics  *events.Metrics
}

// NewTelemetry makes a registry with the Go runtime and process collectors.
func NewTelemetry() *Telemetry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &Telemetry{Registry: reg}
}

type telemetryKey struct{}

// WithTelemetry makes every service started with ctx share t.
func WithTelemetry(ctx context.Context, t *Telemetry) context.Context {
	t.shared = true
	return context.WithValue(ctx, telemetryKey{}, t)
}

// TelemetryFrom returns the telemetry ctx carries, or a new one.
func TelemetryFrom(ctx context.Context) *Telemetry {
	if t, ok := ctx.Value(telemetryKey{}).(*Telemetry); ok {
		return t
	}
	return NewTelemetry()
}

// Metrics returns the pipeline metrics, registered once per registry.
func (t *Telemetry) Metrics(topo retry.Topology) *events.Metrics {
	t.once.Do(func() { t.metrics = events.NewMetrics(t.Registry, topo) })
	return t.metrics
}

// ServeMetrics serves /metrics, and /healthz for container health checks
// (relay health), on addr until ctx is done. An empty addr,
// or shared telemetry (whose API serves it), serves nothing.
func (t *Telemetry) ServeMetrics(ctx context.Context, addr string) error {
	if addr == "" || t.shared {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return config.Invalid("METRICS_ADDR", addr, "a free host:port to serve /metrics on ("+err.Error()+")")
	}
	t.serveMetrics(ctx, ln)
	return nil
}

// serveMetrics serves ServeMetrics' routes on ln until ctx is done.
func (t *Telemetry) serveMetrics(ctx context.Context, ln net.Listener) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(t.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() { _ = srv.Serve(ln) }()
}
