//go:build integration

package retrier_test

import (
	"context"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/events"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
	"github.com/relay-demo/relay/services/retrier"
)

// TestRetrierProcess runs the real `relay retrier` in-process against a
// consumer that nacks everything: four deliveries, then parked.
func TestRetrierProcess(t *testing.T) {
	url := retrytest.URL(t)
	prefix := retrytest.Prefix(t)
	env := map[string]string{
		"AMQP_URL": url, "TOPOLOGY_PREFIX": prefix, "RETRY_DELAYS": "200ms,400ms,800ms",
		"DELAY_BACKEND": "ttl", "CONCURRENCY": "2",
	}
	topo := retry.Topology{Prefix: prefix, Backend: retry.TTL, Routes: channel.Routes(), Policy: retry.Policy{Delays: []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond}}}
	conn := retrytest.Conn(t)
	t.Cleanup(func() {
		if err := topo.Delete(conn); err != nil {
			t.Error(err)
		}
		// The events exchange the retrier publishes its decisions on.
		if ch, err := conn.Channel(); err == nil {
			_ = ch.ExchangeDelete(events.ExchangeName(topo), false, false)
			ch.Close()
		}
	})

	ctx, cancel := context.WithCancel(context.Background())
	var logs retrytest.Buffer
	done := make(chan error, 1)
	go func() { done <- retrier.Run(ctx, func(k string) string { return env[k] }, &logs) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("retrier.Run: %v", err)
		}
		if !strings.Contains(logs.String(), `"msg":"stopped"`) {
			t.Errorf("no clean stop in the log:\n%s", logs.String())
		}
	}()

	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	// The service declares the topology; wait for it rather than race it.
	retrytest.Eventually(t, 10*time.Second, func() bool {
		return strings.Contains(logs.String(), `"msg":"consuming"`)
	}, "retrier never started consuming:\n%s", logs.String())
	email := topo.WorkRoutes()[0].Queue
	deliveries, err := ch.Consume(email, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Publish(topo.Ingress(), "email", false, false, amqp.Publishing{MessageId: "e2e-1", Body: []byte("{}"), DeliveryMode: amqp.Persistent}); err != nil {
		t.Fatal(err)
	}
	var times []time.Time
	for len(times) < 4 {
		select {
		case d := <-deliveries:
			times = append(times, time.Now())
			_ = d.Nack(false, false)
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d deliveries; log:\n%s", len(times), logs.String())
		}
	}
	// Never early; how late is logged, not held to a bound, since make
	// test shares the cores with every other package's tests.
	for i, want := range []time.Duration{200, 400, 800} {
		gap := times[i+1].Sub(times[i])
		if gap < (want-10)*time.Millisecond {
			t.Errorf("gap %d = %s, want at least %dms", i+1, gap, want)
		}
		t.Logf("retry %d: scheduled %dms, measured %s", i+1, want, gap.Round(time.Millisecond))
	}
	var parked amqp.Delivery
	retrytest.Eventually(t, 5*time.Second, func() bool {
		d, ok, err := ch.Get(topo.Name(retry.DeadQueue), true)
		if err != nil {
			t.Fatal(err)
		}
		parked = d
		return ok
	}, "nothing parked")
	if parked.Headers[retry.HeaderDeadSource] != email || retry.RetryCount(parked.Headers) != 3 {
		t.Errorf("parked headers = %v", parked.Headers)
	}
}
