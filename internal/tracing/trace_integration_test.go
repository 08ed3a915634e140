//go:build integration

package tracing_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/events"
	"github.com/relay-demo/relay/internal/tracing"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
	"github.com/relay-demo/relay/services/api"
	"github.com/relay-demo/relay/services/retrier"
	"github.com/relay-demo/relay/services/worker"
)

// The caller's trace, continued by the API.
const (
	callerTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan   = "00f067aa0ba902b7"
	callerParent = "00-" + callerTrace + "-" + callerSpan + "-01"
)

// TestOneTraceAcrossRetries sends one webhook notification through the
// real API, retrier and webhook worker, with a traceparent, to a receiver
// that fails it twice and then takes it. The request, the publish, the
// three attempts (two of them retries, after waits in the broker) and
// their three sends are one trace: the caller's.
func TestOneTraceAcrossRetries(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))

	var calls atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			http.Error(w, "down for a moment", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()

	const token = "trace-token-0123456789abcdef"
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	prefix := retrytest.Prefix(t)
	env := map[string]string{
		"AMQP_URL": retrytest.URL(t), "TOPOLOGY_PREFIX": prefix, "DELAY_BACKEND": "ttl",
		"RETRY_DELAYS": "200ms,400ms", "HTTP_ADDR": "127.0.0.1:0", "API_TOKENS": token, "DATA_DIR": t.TempDir(),
		"SHUTDOWN_TIMEOUT": "5s", "WEBHOOK_SECRET": "whsec_" + base64.StdEncoding.EncodeToString(key),
		"WEBHOOK_ALLOW_CIDRS": "127.0.0.0/8,::1/128", "WEBHOOK_TIMEOUT": "2s",
	}
	getenv := func(k string) string { return env[k] }
	topo := retry.Topology{Prefix: prefix, Routes: channel.Routes(), Backend: retry.TTL,
		Policy: retry.Policy{Delays: []time.Duration{200 * time.Millisecond, 400 * time.Millisecond}}}
	conn := retrytest.Conn(t)
	t.Cleanup(func() {
		if err := topo.Delete(conn); err != nil {
			t.Error(err)
		}
		if ch, err := conn.Channel(); err == nil {
			_, _ = ch.QueueDelete(topo.Name(events.HistoryQueue), false, false, false)
			_ = ch.ExchangeDelete(events.ExchangeName(topo), false, false)
			ch.Close()
		}
	})

	ctx, cancel := context.WithCancel(tracing.WithProvider(context.Background(), tp))
	var wg sync.WaitGroup
	var logs retrytest.Buffer
	run := func(name string, f func(context.Context, func(string) string, io.Writer) error) {
		wg.Go(func() {
			if err := f(ctx, getenv, &logs); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		})
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		_ = tp.Shutdown(context.Background())
	})
	run("api", api.Run)
	run("retrier", retrier.Run)
	run("worker webhook", func(ctx context.Context, getenv func(string) string, w io.Writer) error {
		return worker.Run(ctx, "webhook", getenv, w)
	})

	listening := regexp.MustCompile(`"msg":"listening",.*?"addr":"([^"]+)"`)
	var base string
	retrytest.Eventually(t, 15*time.Second, func() bool {
		if m := listening.FindStringSubmatch(logs.String()); m != nil {
			base = "http://" + m[1]
		}
		return base != ""
	}, "the API never listened")
	retrytest.Eventually(t, 15*time.Second, func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "/readyz never answered 200")

	target := hook.URL + "/hooks/orders?token=s3cret"
	body := fmt.Sprintf(`{"webhook":{"url":%q,"payload":{"order":42}}}`, target)
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/notifications", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("traceparent", callerParent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /v1/notifications: %d %s", resp.StatusCode, answer)
	}
	var accepted struct{ ID string }
	if err := json.Unmarshal(answer, &accepted); err != nil {
		t.Fatal(err)
	}

	// Every span of the notification's copy, whichever trace it is in:
	// the assertions below say which trace that must be.
	of := func(kind trace.SpanKind, name string) []sdktrace.ReadOnlySpan {
		var out []sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			a := attrs(s)
			if s.SpanKind() == kind && (a["messaging.message.id"] == accepted.ID || a["relay.notification.id"] == accepted.ID || s.Name() == name) {
				out = append(out, s)
			}
		}
		slices.SortFunc(out, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
		return out
	}
	retrytest.Eventually(t, 20*time.Second, func() bool {
		return len(of(trace.SpanKindConsumer, "")) >= 3 && len(of(trace.SpanKindClient, "")) >= 3
	}, "want three attempts and three sends; spans: %v\nlog:\n%s",
		lazy(func() string { return fmt.Sprint(names(rec.Ended())) }), lazy(logs.String))

	servers := of(trace.SpanKindServer, "POST /v1/notifications")
	producers := of(trace.SpanKindProducer, "")
	attempts := of(trace.SpanKindConsumer, "")
	sends := of(trace.SpanKindClient, "")
	if len(servers) == 0 && len(producers) == 0 {
		t.Fatalf("the API made no span, so its messages carry no trace context: is its Deps.TracerProvider set? spans: %v", names(rec.Ended()))
	}
	if len(servers) != 1 || len(producers) != 1 || len(attempts) != 3 || len(sends) != 3 {
		t.Fatalf("%d server, %d producer, %d consumer and %d client spans, want 1, 1, 3 and 3: %v",
			len(servers), len(producers), len(attempts), len(sends), names(rec.Ended()))
	}
	if got := calls.Load(); got != 3 {
		t.Errorf("the receiver was called %d times, want 3", got)
	}

	// One trace, the caller's, from the request to the last send.
	for _, s := range slices.Concat(servers, producers, attempts, sends) {
		if got := s.SpanContext().TraceID().String(); got != callerTrace {
			t.Errorf("span %q (%v) is in trace %s, want the caller's %s", s.Name(), s.SpanKind(), got, callerTrace)
		}
	}
	server, producer := servers[0], producers[0]
	if server.Parent().SpanID().String() != callerSpan || !server.Parent().IsRemote() {
		t.Errorf("the request's span is under %v, want the caller's span %s", server.Parent(), callerSpan)
	}
	if producer.Parent().SpanID() != server.SpanContext().SpanID() {
		t.Errorf("the publish is under %v, want the request's span", producer.Parent())
	}

	// Attempts 1, 2, 3 in order, each under the publish, each a send's
	// parent; the first two failed, the third delivered.
	wantOutcome := []string{"failed", "failed", "delivered"}
	for i, a := range attempts {
		at := attrs(a)
		if at["relay.attempt"] != fmt.Sprint(i+1) || at["relay.outcome"] != wantOutcome[i] {
			t.Errorf("attempt span %d: relay.attempt %s, outcome %s; want %d, %s", i+1, at["relay.attempt"], at["relay.outcome"], i+1, wantOutcome[i])
		}
		if at["messaging.destination.name"] != topo.Name("webhook-queue") {
			t.Errorf("attempt span %d: queue %q, want %q", i+1, at["messaging.destination.name"], topo.Name("webhook-queue"))
		}
		if a.Parent().SpanID() != producer.SpanContext().SpanID() {
			t.Errorf("attempt %d is under %v, want the publish's span", i+1, a.Parent())
		}
		if i > 0 && !a.StartTime().After(attempts[i-1].EndTime()) {
			t.Errorf("attempt %d started before attempt %d ended", i+1, i)
		}
		var mine []sdktrace.ReadOnlySpan
		for _, s := range sends {
			if s.Parent().SpanID() == a.SpanContext().SpanID() {
				mine = append(mine, s)
			}
		}
		if len(mine) != 1 {
			t.Errorf("attempt %d has %d send spans, want 1", i+1, len(mine))
			continue
		}
		st := attrs(mine[0])
		u, _ := url.Parse(hook.URL)
		if st["relay.outcome"] != wantOutcome[i] || st["server.address"] != u.Hostname() || st["server.port"] != u.Port() {
			t.Errorf("attempt %d's send: %v, want outcome %s to %s", i+1, st, wantOutcome[i], u.Host)
		}
		for k, v := range st {
			if strings.Contains(v, "s3cret") || strings.Contains(v, "/hooks/orders") {
				t.Errorf("attempt %d's send: %s = %q carries the URL's path or query", i+1, k, v)
			}
		}
	}
}

func attrs(s sdktrace.ReadOnlySpan) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes() {
		out[string(kv.Key)] = kv.Value.Emit()
	}
	return out
}

// lazy is a text a failure message computes when it is printed.
type lazy func() string

func (l lazy) String() string { return l() }

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, fmt.Sprintf("%s(%s)", s.Name(), s.SpanContext().TraceID()))
	}
	return out
}
