package channel_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/notification"
)

// attempt starts the span a worker's attempt has (tracing.Middleware's),
// in a provider that records every span.
func attempt(t *testing.T) (context.Context, trace.Span, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("test").Start(context.Background(), "process probe-queue", trace.WithSpanKind(trace.SpanKindConsumer))
	return ctx, span, rec
}

// sendSpans returns the spans named "send ...", each with its attributes.
func sendSpans(rec *tracetest.SpanRecorder) ([]sdktrace.ReadOnlySpan, []map[string]string) {
	var spans []sdktrace.ReadOnlySpan
	var attrs []map[string]string
	for _, s := range rec.Ended() {
		if !strings.HasPrefix(s.Name(), "send ") {
			continue
		}
		a := map[string]string{}
		for _, kv := range s.Attributes() {
			a[string(kv.Key)] = kv.Value.Emit()
		}
		spans, attrs = append(spans, s), append(attrs, a)
	}
	return spans, attrs
}

func TestSendSpan(t *testing.T) {
	tests := []struct {
		name        string
		failures    int
		part        string
		wantOutcome string
		wantStatus  codes.Code
	}{
		{"delivered", 0, `{"code":"1234"}`, "delivered", codes.Unset},
		{"a transient failure", 1, `{"code":"1234"}`, "failed", codes.Error},
		{"a part its channel refuses", 0, `{"code":"12"}`, "permanent", codes.Error},
		{"a part that does not decode", 0, `{"code":1234}`, "permanent", codes.Error},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProbe(tt.failures)
			send, closeSend, err := p.Open(func(string) string { return "" }, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer closeSend()
			ctx, parent, rec := attempt(t)
			n := &notification.Notification{V: 1, ID: "ntf_1", Parts: map[string]json.RawMessage{"probe": json.RawMessage(tt.part)}}
			_ = send(ctx, n)
			parent.End()

			spans, attrs := sendSpans(rec)
			if len(spans) != 1 {
				t.Fatalf("%d send spans, want 1", len(spans))
			}
			s := spans[0]
			if s.Name() != "send probe" || s.SpanKind() != trace.SpanKindClient {
				t.Errorf("span %q of kind %v, want \"send probe\", client", s.Name(), s.SpanKind())
			}
			if s.Parent().SpanID() != parent.SpanContext().SpanID() || s.SpanContext().TraceID() != parent.SpanContext().TraceID() {
				t.Errorf("parent %v, want the attempt's span %v", s.Parent(), parent.SpanContext())
			}
			want := map[string]string{"relay.channel": "probe", "relay.notification.id": "ntf_1", "relay.outcome": tt.wantOutcome}
			for k := range attrs[0] {
				if k == "error.type" {
					want[k] = attrs[0][k]
				}
			}
			if diff := cmp.Diff(want, attrs[0]); diff != "" {
				t.Errorf("attributes (-want +got):\n%s", diff)
			}
			if s.Status().Code != tt.wantStatus {
				t.Errorf("status %v, want %v", s.Status(), tt.wantStatus)
			}
		})
	}
}

// ctxProbe is a channel whose send keeps the context it was given.
func ctxProbe(t *testing.T) (channel.Sender, *context.Context) {
	t.Helper()
	var got context.Context
	c := channel.Define(channel.Spec[ProbePart]{
		Name:   "ctxprobe",
		Check:  func(*ProbePart, func(field, format string, args ...any)) {},
		Schema: `{"type": "object"}`,
		Open: func(func(string) string, channel.Store) (channel.Send[ProbePart], func() error, error) {
			return func(ctx context.Context, id string, p *ProbePart) error {
				got = ctx
				return nil
			}, func() error { return nil }, nil
		},
	})
	send, _, err := c.Open(func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	return send, &got
}

// TestSendContext: the channel's own send runs under the send span, where
// its HTTP or SMTP client would find it; without an attempt's span,
// tracing is off and no span is started.
func TestSendContext(t *testing.T) {
	n := &notification.Notification{V: 1, ID: "ntf_1", Parts: map[string]json.RawMessage{"ctxprobe": json.RawMessage(`{"code":"1234"}`)}}

	send, got := ctxProbe(t)
	if err := send(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	if sc := trace.SpanContextFromContext(*got); sc.IsValid() {
		t.Errorf("untraced, the send ran under a span: %v", sc)
	}

	ctx, parent, rec := attempt(t)
	if err := send(ctx, n); err != nil {
		t.Fatal(err)
	}
	parent.End()
	spans, _ := sendSpans(rec)
	if len(spans) != 1 {
		t.Fatalf("%d send spans, want 1", len(spans))
	}
	if sc := trace.SpanContextFromContext(*got); !sc.Equal(spans[0].SpanContext()) {
		t.Errorf("the send ran under %v, want its span %v", sc, spans[0].SpanContext())
	}
}

// TestWebhookSendSpan sends a real webhook: its span names the host and
// port it went to, and nothing of the URL's path or query.
func TestWebhookSendSpan(t *testing.T) {
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer hook.Close()
	u, _ := url.Parse(hook.URL)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	env := map[string]string{
		"WEBHOOK_SECRET": "whsec_" + base64.StdEncoding.EncodeToString(key), "WEBHOOK_ALLOW_CIDRS": "127.0.0.0/8,::1/128",
		"DATA_DIR": t.TempDir(),
	}
	send, closeSend, err := channel.Webhook.Open(func(k string) string { return env[k] }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeSend()
	ctx, parent, rec := attempt(t)
	part, _ := json.Marshal(channel.WebhookPart{URL: hook.URL + "/hooks/secret-path?token=s3cret", Payload: json.RawMessage(`{"n":1}`)})
	n := &notification.Notification{V: 1, ID: "ntf_1", Channel: "webhook", Parts: map[string]json.RawMessage{"webhook": part}}
	if err := send(ctx, n); err != nil {
		t.Fatal(err)
	}
	parent.End()
	spans, attrs := sendSpans(rec)
	if len(spans) != 1 {
		t.Fatalf("%d send spans, want 1", len(spans))
	}
	want := map[string]string{"relay.channel": "webhook", "relay.notification.id": "ntf_1", "relay.outcome": "delivered",
		"server.address": u.Hostname(), "server.port": u.Port()}
	if diff := cmp.Diff(want, attrs[0]); diff != "" {
		t.Errorf("attributes (-want +got):\n%s", diff)
	}
	for k, v := range attrs[0] {
		if strings.Contains(v, "s3cret") || strings.Contains(v, "secret-path") {
			t.Errorf("attribute %s = %q carries the URL's path or query", k, v)
		}
	}
}

// TestSendPanicSpan: a send that panics leaves the panic to the pipeline
// and ends its span as failed, not delivered.
func TestSendPanicSpan(t *testing.T) {
	c := channel.Define(channel.Spec[ProbePart]{
		Name:   "panicprobe",
		Check:  func(*ProbePart, func(field, format string, args ...any)) {},
		Schema: `{"type": "object"}`,
		Open: func(func(string) string, channel.Store) (channel.Send[ProbePart], func() error, error) {
			return func(context.Context, string, *ProbePart) error { panic("boom") }, func() error { return nil }, nil
		},
	})
	send, _, err := c.Open(func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, parent, rec := attempt(t)
	n := &notification.Notification{V: 1, ID: "ntf_1", Parts: map[string]json.RawMessage{"panicprobe": json.RawMessage(`{}`)}}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not go on")
			}
		}()
		_ = send(ctx, n)
	}()
	parent.End()
	spans, attrs := sendSpans(rec)
	if len(spans) != 1 || attrs[0]["relay.outcome"] != "failed" || spans[0].Status().Code != codes.Error {
		t.Fatalf("send spans %v %v, want one, failed", spans, attrs)
	}
}
