package tracing

import (
	"context"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.opentelemetry.io/otel/propagation"
)

// Headers an AMQP message carries its trace context in: W3C Trace
// Context's, under the same names as over HTTP. They are not relay's
// pipeline headers (x-...), so the retry stages forward them unchanged and
// a producer may set them.
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

// propagator reads and writes the W3C traceparent and tracestate headers.
// relay passes it explicitly rather than through otel's global propagator.
var propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Carrier lets a propagator read and write an AMQP message's headers.
// Set needs a non-nil table; Inject makes one.
type Carrier amqp.Table

// Get returns the value of key, written as a string or, by some clients,
// as bytes; "" for anything else.
func (c Carrier) Get(key string) string {
	switch v := c[key].(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	return ""
}

// Set writes key as a string, the AMQP type every client reads.
func (c Carrier) Set(key, value string) { c[key] = value }

// Keys lists the headers.
func (c Carrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// Inject writes the trace context of ctx into h, making h if it is nil,
// and returns it. Without a span in ctx, h is left as it is.
func Inject(ctx context.Context, h amqp.Table) amqp.Table {
	if h == nil {
		h = amqp.Table{}
	}
	propagator.Inject(ctx, Carrier(h))
	return h
}

// Extract returns ctx with the remote span context h carries, if any: the
// parent of the spans started from it.
func Extract(ctx context.Context, h amqp.Table) context.Context {
	return propagator.Extract(ctx, Carrier(h))
}

// ExtractHTTP is Extract for an HTTP request's headers.
func ExtractHTTP(ctx context.Context, h propagation.HeaderCarrier) context.Context {
	return propagator.Extract(ctx, h)
}
