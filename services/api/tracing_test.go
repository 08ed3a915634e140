package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/relay-demo/relay/internal/tracing"
)

const (
	callerTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan   = "00f067aa0ba902b7"
	callerParent = "00-" + callerTrace + "-" + callerSpan + "-01"
)

// tracedServer is testServer with every span recorded.
func tracedServer(t *testing.T, change func(*Deps, *fakePublisher)) (http.Handler, *fakePublisher, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	h, fake, _ := testServer(t, func(d *Deps, f *fakePublisher) {
		d.TracerProvider = tp
		if change != nil {
			change(d, f)
		}
	})
	return h, fake, rec
}

func spanAttrs(s sdktrace.ReadOnlySpan) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes() {
		out[string(kv.Key)] = kv.Value.Emit()
	}
	return out
}

func byKind(spans []sdktrace.ReadOnlySpan, kind trace.SpanKind) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.SpanKind() == kind {
			out = append(out, s)
		}
	}
	return out
}

// TestTraceNotification follows a notification's trace through the API:
// the request's span continues the caller's traceparent, each channel
// copy's publish is its child, and each message carries the context of
// its publish.
func TestTraceNotification(t *testing.T) {
	tests := []struct {
		name        string
		traceparent string
		wantTrace   string // "" for a new trace
	}{
		{"the caller's trace goes on", callerParent, callerTrace},
		{"no traceparent: a trace of its own", "", ""},
		{"a garbled traceparent: a trace of its own", "00-garbage-01", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, fake, rec := tracedServer(t, nil)
			w := call(h, http.MethodPost, "/v1/notifications", bothParts, map[string]string{"traceparent": tt.traceparent})
			if w.Code != http.StatusAccepted {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}

			servers := byKind(rec.Ended(), trace.SpanKindServer)
			if len(servers) != 1 {
				t.Fatalf("%d server spans, want 1", len(servers))
			}
			srv := servers[0]
			if srv.Name() != "POST /v1/notifications" {
				t.Errorf("server span %q, want \"POST /v1/notifications\"", srv.Name())
			}
			if a := spanAttrs(srv); a["http.route"] != "/v1/notifications" || a["http.response.status_code"] != "202" || a["http.request.method"] != "POST" {
				t.Errorf("server span attributes %v", a)
			}
			traceID := srv.SpanContext().TraceID().String()
			switch {
			case tt.wantTrace != "" && (traceID != tt.wantTrace || srv.Parent().SpanID().String() != callerSpan || !srv.Parent().IsRemote()):
				t.Errorf("server span in trace %s under %v, want trace %s under the caller's span %s", traceID, srv.Parent(), tt.wantTrace, callerSpan)
			case tt.wantTrace == "" && srv.Parent().IsValid():
				t.Errorf("server span under %v, want a root", srv.Parent())
			}

			producers := byKind(rec.Ended(), trace.SpanKindProducer)
			msgs := fake.messages()
			if len(producers) != len(msgs) || len(msgs) == 0 {
				t.Fatalf("%d producer spans for %d copies, want one each", len(producers), len(msgs))
			}
			for _, p := range producers {
				if p.Parent().SpanID() != srv.SpanContext().SpanID() || p.SpanContext().TraceID() != srv.SpanContext().TraceID() {
					t.Errorf("producer %q under %v, want the server span", p.Name(), p.Parent())
				}
				if a := spanAttrs(p); p.Name() != "publish t.notification-exchange" || a["messaging.message.id"] != fixed || a["messaging.system"] != "rabbitmq" {
					t.Errorf("producer span %q %v", p.Name(), a)
				}
			}
			for _, m := range msgs {
				sc := trace.SpanContextFromContext(tracing.Extract(context.Background(), m.Msg.Headers))
				found := false
				for _, p := range producers {
					if spanAttrs(p)["messaging.rabbitmq.destination.routing_key"] == m.Key {
						found = sc.SpanID() == p.SpanContext().SpanID() && sc.TraceID() == p.SpanContext().TraceID()
					}
				}
				if !found {
					t.Errorf("the %s copy carries %v (headers %v), want its publish's span", m.Key, sc, m.Msg.Headers)
				}
			}
		})
	}
}

// TestTracePublishFailure: a copy the broker refused ends its span with
// the error, and the request's span with the 503.
func TestTracePublishFailure(t *testing.T) {
	h, _, rec := tracedServer(t, func(d *Deps, f *fakePublisher) { f.errFor = map[string]error{"webhook": errors.New("nacked")} })
	w := call(h, http.MethodPost, "/v1/notifications", bothParts, nil)
	if w.Code != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503", w.Code)
	}
	failed := 0
	for _, p := range byKind(rec.Ended(), trace.SpanKindProducer) {
		if p.Status().Code == codes.Error {
			failed++
			if !strings.Contains(p.Status().Description, "nacked") {
				t.Errorf("status %q, want the publish's error", p.Status().Description)
			}
		}
	}
	if failed != 1 {
		t.Errorf("%d producer spans failed, want the webhook copy's", failed)
	}
	if srv := byKind(rec.Ended(), trace.SpanKindServer); len(srv) != 1 || srv[0].Status().Code != codes.Error {
		t.Errorf("server spans %v, want one, failed", srv)
	}
}

// TestUntraced: the probes and /metrics make no span, and without a
// TracerProvider nothing does and no message carries a traceparent.
func TestUntraced(t *testing.T) {
	h, _, rec := tracedServer(t, nil)
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, path, nil))
	}
	if n := len(rec.Ended()); n != 0 {
		t.Errorf("%d spans for the probes and /metrics, want none", n)
	}

	h, fake, _ := testServer(t, nil)
	if w := call(h, http.MethodPost, "/v1/notifications", bothParts, map[string]string{"traceparent": callerParent}); w.Code != http.StatusAccepted {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	for _, m := range fake.messages() {
		if _, ok := m.Msg.Headers[tracing.HeaderTraceparent]; ok {
			t.Errorf("untraced, the %s copy carries a traceparent", m.Key)
		}
	}
}
