package tracing

import (
	"context"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

const (
	incomingTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	incomingSpan   = "00f067aa0ba902b7"
	incomingParent = "00-" + incomingTrace + "-" + incomingSpan + "-01"
)

func TestCarrierGet(t *testing.T) {
	h := amqp.Table{"as-string": "a", "as-bytes": []byte("b"), "as-int": int32(7)}
	tests := []struct {
		name, key, want string
	}{
		{"a string", "as-string", "a"},
		{"bytes, as some clients write", "as-bytes", "b"},
		{"another type", "as-int", ""},
		{"missing", "absent", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Carrier(h).Get(tt.key); got != tt.want {
				t.Errorf("Get(%q) = %q, want %q", tt.key, got, tt.want)
			}
		})
	}
	keys := Carrier(h).Keys()
	slices.Sort(keys)
	if diff := cmp.Diff([]string{"as-bytes", "as-int", "as-string"}, keys); diff != "" {
		t.Errorf("Keys (-want +got):\n%s", diff)
	}
}

func TestInjectExtract(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("test").Start(context.Background(), "publish")
	defer span.End()

	tests := []struct {
		name    string
		ctx     context.Context
		headers amqp.Table
		want    trace.SpanContext // what Extract finds again
		keep    amqp.Table        // headers that must be there still
	}{
		{"into no headers", ctx, nil, span.SpanContext(), nil},
		{"beside other headers", ctx, amqp.Table{"x-retry-count": int32(2)}, span.SpanContext(), amqp.Table{"x-retry-count": int32(2)}},
		{"no span: nothing written", context.Background(), nil, trace.SpanContext{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := Inject(tt.ctx, tt.headers)
			if h == nil {
				t.Fatal("Inject returned no table")
			}
			for k, v := range tt.keep {
				if !cmp.Equal(h[k], v) {
					t.Errorf("header %s = %v, want %v kept", k, h[k], v)
				}
			}
			if _, ok := h[HeaderTraceparent]; ok != tt.want.IsValid() {
				t.Errorf("traceparent written: %v, want %v (headers %v)", ok, tt.want.IsValid(), h)
			}
			got := trace.SpanContextFromContext(Extract(context.Background(), h))
			if !got.Equal(tt.want.WithRemote(tt.want.IsValid())) {
				t.Errorf("Extract = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestExtractBytes reads a traceparent another client wrote as bytes.
func TestExtractBytes(t *testing.T) {
	sc := trace.SpanContextFromContext(Extract(context.Background(), amqp.Table{HeaderTraceparent: []byte(incomingParent)}))
	if sc.TraceID().String() != incomingTrace || sc.SpanID().String() != incomingSpan || !sc.IsRemote() || !sc.IsSampled() {
		t.Errorf("Extract = %v, want trace %s span %s, remote and sampled", sc, incomingTrace, incomingSpan)
	}
}
