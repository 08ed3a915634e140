// Package tracing is relay's OpenTelemetry tracing: one trace per
// notification copy, from the API's request through every attempt of the
// workers, retries hours later included, to each send downstream.
//
// The API continues the W3C traceparent of a request and publishes each
// channel copy with its trace context in the AMQP headers (traceparent,
// tracestate; see Inject). The retry pipeline carries those headers on
// through the error stage, the wait and the requeue stage, so every
// attempt, the Middleware's consumer span, continues the same trace; the
// channel's send is a client span under it.
//
// Tracing is off unless the process environment asks for it: Start returns
// a provider that exports with OTLP over HTTP when
// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is
// set, and none otherwise, so an untraced relay starts no goroutine and
// records nothing. The OTEL_* variables are read by the OpenTelemetry SDK
// itself, from the process environment.
package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/relay-demo/relay/internal/config"
)

// ShutdownTimeout bounds how long Shutdown waits for the last spans to be
// exported.
const ShutdownTimeout = 5 * time.Second

// Tracing is one process's tracer provider: the one its context carries
// (WithProvider), one of its own that exports with OTLP, or none.
type Tracing struct {
	provider trace.TracerProvider // nil: tracing is off
	shutdown func(context.Context) error
}

type providerKey struct{}

// WithProvider makes every service started with ctx trace to tp, which
// its caller shuts down: how a test records the spans of the real
// services it runs in-process.
func WithProvider(ctx context.Context, tp trace.TracerProvider) context.Context {
	return context.WithValue(ctx, providerKey{}, tp)
}

// Start returns the tracing of the service named service (relay-api,
// relay-worker-email, ...): the provider ctx carries if any, else one
// exporting with OTLP over HTTP if the process environment sets an OTLP
// endpoint, else none. OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
// override the name; OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none
// turn tracing off. Its error names the variable at fault.
func Start(ctx context.Context, service string, log *slog.Logger) (*Tracing, error) {
	return start(ctx, service, os.Getenv, log)
}

func start(ctx context.Context, service string, getenv func(string) string, log *slog.Logger) (*Tracing, error) {
	if tp, ok := ctx.Value(providerKey{}).(trace.TracerProvider); ok {
		return &Tracing{provider: tp}, nil
	}
	endpoint, err := exporting(getenv)
	if err != nil {
		return nil, err
	}
	if endpoint == "" {
		return &Tracing{}, nil
	}
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithAttributes(semconv.ServiceName(service)),
		// Last, so the standard variables win over relay's name.
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, fmt.Errorf("configuration: OTEL_RESOURCE_ATTRIBUTES or OTEL_SERVICE_NAME: %w", err)
	}
	// The exporter reads the endpoint, headers, timeout, compression and
	// TLS settings from the environment itself; it dials nothing yet.
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: the OTLP exporter: %w", err)
	}
	// The sampler (OTEL_TRACES_SAMPLER) and the batching (OTEL_BSP_*) are
	// the SDK's defaults and variables: parent-based, always on.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	log.Info("tracing", "exporter", "otlp", "endpoint", endpoint, "service_name", serviceName(res, service))
	return &Tracing{provider: tp, shutdown: tp.Shutdown}, nil
}

// exporting returns the OTLP endpoint traces go to (without credentials,
// for the log), or "" when tracing is off.
func exporting(getenv func(string) string) (string, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return "", nil
	}
	switch v := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); v {
	case "", "otlp":
	case "none":
		return "", nil
	default:
		return "", config.Invalid("OTEL_TRACES_EXPORTER", v, "otlp or none")
	}
	key, endpoint := "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
	if endpoint == "" {
		key, endpoint = "OTEL_EXPORTER_OTLP_ENDPOINT", strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
	}
	if endpoint == "" {
		return "", nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", config.Invalid(key, endpoint, "an http:// or https:// URL such as http://localhost:4318 (OTLP over HTTP)")
	}
	key, protocol := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	if protocol == "" {
		key, protocol = "OTEL_EXPORTER_OTLP_PROTOCOL", strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	switch protocol {
	case "", "http/protobuf", "http/json":
	default:
		return "", config.Invalid(key, protocol, "http/protobuf or http/json: relay exports traces with OTLP over HTTP (port 4318), not gRPC")
	}
	return u.Redacted(), nil
}

// serviceName is the service name res ended with.
func serviceName(res *resource.Resource, fallback string) string {
	if v, ok := res.Set().Value(semconv.ServiceNameKey); ok {
		return v.AsString()
	}
	return fallback
}

// Enabled reports whether anything is traced.
func (t *Tracing) Enabled() bool { return t != nil && t.provider != nil }

// Provider is the tracer provider spans go to, or nil when tracing is off:
// then install no instrumentation at all, so nothing is extracted,
// recorded or propagated.
func (t *Tracing) Provider() trace.TracerProvider {
	if t == nil {
		return nil
	}
	return t.provider
}

// Shutdown exports the spans still buffered, within ShutdownTimeout, and
// stops the provider Start made; a provider from the context is its
// caller's to shut down.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.shutdown == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	if err := t.shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: flush the last spans: %w", err)
	}
	return nil
}
