package tracing

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/relay-demo/relay/retry"
)

// recorder returns a tracer provider that keeps every span in memory.
func recorder(t *testing.T) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, rec
}

// attrs maps a span's attributes by key, as strings.
func attrs(s sdktrace.ReadOnlySpan) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes() {
		out[string(kv.Key)] = kv.Value.Emit()
	}
	return out
}

func TestMiddleware(t *testing.T) {
	tests := []struct {
		name        string
		headers     amqp.Table
		attempt     int
		redelivered bool
		err         error
		wantAttrs   map[string]string // besides the ones every attempt has
		wantStatus  codes.Code
		wantParent  bool // the span continues the incoming trace
	}{
		{"delivered at the first attempt", amqp.Table{HeaderTraceparent: incomingParent}, 1, false, nil,
			map[string]string{"relay.outcome": "delivered"}, codes.Unset, true},
		{"a failure to retry, at the third attempt", amqp.Table{HeaderTraceparent: incomingParent, "x-retry-count": int32(2)}, 3, false,
			errors.New("webhook: 503"), map[string]string{"relay.outcome": "failed", "error.type": "*errors.errorString"}, codes.Error, true},
		{"a permanent failure", amqp.Table{HeaderTraceparent: incomingParent}, 1, false,
			retry.Permanent(errors.New("410 gone")), map[string]string{"relay.outcome": "permanent", "error.type": "github.com/relay-demo/relay/retry.permanentError"}, codes.Error, true},
		{"a downstream's Retry-After", amqp.Table{HeaderTraceparent: incomingParent}, 2, false,
			retry.After(fmt.Errorf("webhook: %w", errors.New("429")), 30*time.Second),
			map[string]string{"relay.outcome": "failed", "relay.retry_after_ms": "30000", "error.type": "github.com/relay-demo/relay/retry.afterError"}, codes.Error, true},
		{"redelivered by the broker", amqp.Table{HeaderTraceparent: incomingParent}, 1, true, nil,
			map[string]string{"relay.outcome": "delivered", "relay.redelivered": "true"}, codes.Unset, true},
		{"no trace context: a trace of its own", nil, 1, false, nil,
			map[string]string{"relay.outcome": "delivered"}, codes.Unset, false},
		{"a garbled traceparent: a trace of its own", amqp.Table{HeaderTraceparent: "00-nonsense"}, 1, false, nil,
			map[string]string{"relay.outcome": "delivered"}, codes.Unset, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp, rec := recorder(t)
			var inHandler trace.SpanContext
			h := Middleware(tp)(retry.HandlerFunc(func(ctx context.Context, m *retry.Message) error {
				inHandler = trace.SpanContextFromContext(ctx)
				return tt.err
			}))
			m := &retry.Message{ID: "ntf_1", Queue: "t.webhook-queue", Attempt: tt.attempt, Headers: tt.headers, Redelivered: tt.redelivered}
			if err := h.Handle(context.Background(), m); !errors.Is(err, tt.err) {
				t.Fatalf("Handle = %v, want the handler's error %v", err, tt.err)
			}
			spans := rec.Ended()
			if len(spans) != 1 {
				t.Fatalf("%d spans ended, want 1", len(spans))
			}
			s := spans[0]
			if s.Name() != "process t.webhook-queue" || s.SpanKind() != trace.SpanKindConsumer {
				t.Errorf("span %q of kind %v, want \"process t.webhook-queue\", consumer", s.Name(), s.SpanKind())
			}
			if got := s.SpanContext().TraceID().String() == incomingTrace; got != tt.wantParent {
				t.Errorf("in the incoming trace: %v, want %v (trace %s)", got, tt.wantParent, s.SpanContext().TraceID())
			}
			if tt.wantParent && (s.Parent().SpanID().String() != incomingSpan || !s.Parent().IsRemote()) {
				t.Errorf("parent %v, want the remote span %s", s.Parent(), incomingSpan)
			}
			if !tt.wantParent && s.Parent().IsValid() {
				t.Errorf("parent %v, want none", s.Parent())
			}
			if !inHandler.Equal(s.SpanContext()) {
				t.Errorf("the handler ran under %v, want the attempt's span %v", inHandler, s.SpanContext())
			}
			want := map[string]string{
				"messaging.system": "rabbitmq", "messaging.operation.type": "process", "messaging.operation.name": "process",
				"messaging.destination.name": "t.webhook-queue", "messaging.message.id": "ntf_1",
				"relay.attempt": fmt.Sprint(tt.attempt),
			}
			for k, v := range tt.wantAttrs {
				want[k] = v
			}
			if diff := cmp.Diff(want, attrs(s)); diff != "" {
				t.Errorf("attributes (-want +got):\n%s", diff)
			}
			if s.Status().Code != tt.wantStatus {
				t.Errorf("status %v, want %v", s.Status(), tt.wantStatus)
			}
			if tt.err != nil && (s.Status().Description != tt.err.Error() || len(s.Events()) != 1 || s.Events()[0].Name != "exception") {
				t.Errorf("status %q and events %v, want the error's text and one exception event", s.Status().Description, s.Events())
			}
		})
	}
}

// TestMiddlewarePanic: a panicking handler is a failure to retry.Call, and
// its span ends as one.
func TestMiddlewarePanic(t *testing.T) {
	tp, rec := recorder(t)
	h := Middleware(tp)(retry.HandlerFunc(func(ctx context.Context, m *retry.Message) error { panic("boom") }))
	if err := retry.Call(context.Background(), h, &retry.Message{Queue: "q", Attempt: 1}); err == nil {
		t.Fatal("retry.Call = nil, want the panic as an error")
	}
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans ended, want 1", len(spans))
	}
	if s := spans[0]; s.Status().Code != codes.Error || attrs(s)["relay.outcome"] != "failed" {
		t.Errorf("status %v, outcome %q, want an error and failed", s.Status(), attrs(s)["relay.outcome"])
	}
}

// TestEnd checks End on a span of another kind: a send, which reports its
// outcome the same way and keeps its own attributes.
func TestEnd(t *testing.T) {
	tp, rec := recorder(t)
	_, span := tp.Tracer("test").Start(context.Background(), "send webhook", trace.WithAttributes(attribute.String("relay.channel", "webhook")))
	End(span, retry.Permanent(errors.New("410 gone")))
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans ended, want 1", len(spans))
	}
	s := spans[0]
	if got := attrs(s); got["relay.outcome"] != "permanent" || got["relay.channel"] != "webhook" || s.Status().Code != codes.Error {
		t.Errorf("attributes %v, status %v, want permanent, the channel kept, an error", got, s.Status())
	}
}
