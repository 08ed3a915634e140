//go:build integration

package events

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// TestBacklogFromTheBroker runs a worker on a real queue that holds
// messages which have waited a known time, published with old timestamps
// (or an old x-ready-at) rather than left to age, and reads the backlog
// the worker reports.
func TestBacklogFromTheBroker(t *testing.T) {
	// slack is what the figure may add to the wait: the timestamp's whole
	// seconds, and the time the test takes to start the worker.
	const slack = 5 * time.Second
	tests := []struct {
		name      string
		queueType retry.QueueType
		published time.Duration // how long before the test the messages were published
		ready     time.Duration // how long before the test their wait ended; 0: none
		want      time.Duration // the least backlog of the queue
	}{
		{name: "classic", queueType: retry.Classic, published: 2 * time.Minute, want: 2 * time.Minute},
		{name: "quorum", queueType: retry.Quorum, published: 2 * time.Minute, want: 2 * time.Minute},
		{name: "quorum, back from a retry's wait", queueType: retry.Quorum, published: time.Hour, ready: 20 * time.Second, want: 20 * time.Second},
	}
	// The endpoint is behind by its copy's age, since it was published.
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn := retrytest.Conn(t)
			topo := retrytest.Declare(t, conn, retry.Topology{Backend: retry.TTL, QueueType: tt.queueType})
			queue := topo.Name("webhook-queue")
			ch, err := conn.Channel()
			if err != nil {
				t.Fatal(err)
			}
			defer ch.Close()
			const n = 3
			now := time.Now()
			for i := range n {
				h := amqp.Table{}
				if tt.ready > 0 {
					h[retry.HeaderReadyAt] = now.Add(-tt.ready).UnixMilli()
				}
				// The default exchange, as the requeue stage publishes:
				// the ingress exchange would drop x-ready-at.
				err := ch.PublishWithContext(context.Background(), "", queue, true /* mandatory */, false, /* immediate */
					amqp.Publishing{MessageId: fmt.Sprintf("m-%d", i), Timestamp: now.Add(-tt.published), Headers: h, Body: []byte("{}")})
				if err != nil {
					t.Fatal(err)
				}
			}

			reg := prometheus.NewRegistry()
			m := NewMetrics(reg, topo)
			done := make(chan struct{}, n)
			c := &retry.Consumer{Topology: topo, Queue: queue,
				Handler: retry.HandlerFunc(func(_ context.Context, m *retry.Message) error {
					m.Target = epA // as the webhook worker names the endpoint
					return nil
				})}
			c.Observe = Fanout(m.Observe, func(ev retry.Event) {
				if ev.Outcome == retry.Delivered {
					done <- struct{}{}
				}
			})
			ctx, cancel := context.WithCancel(context.Background())
			runErr := make(chan error, 1)
			go func() { runErr <- c.Run(ctx, conn) }()
			defer func() {
				cancel()
				<-runErr
			}()
			got := 0
			retrytest.Eventually(t, 30*time.Second, func() bool {
				select {
				case <-done:
					got++
				default:
				}
				return got == n
			}, "the worker did not deliver all %d messages", n)

			s := samples(t, reg)
			for key, want := range map[string]time.Duration{
				"relay_queue_backlog_seconds{queue=" + queue + "}":     tt.want,
				"relay_endpoint_backlog_seconds{endpoint=" + epA + "}": tt.published,
			} {
				v, ok := s[key]
				if !ok {
					t.Fatalf("no %s in %v", key, s)
				}
				if v < want.Seconds() || v >= (want+slack).Seconds() {
					t.Errorf("%s = %.3f, want at least %.0f and less than %.0f", key, v, want.Seconds(), (want + slack).Seconds())
				}
			}

			// The queue is empty now: once the figure no longer stands,
			// it reads 0, and the endpoint is left out.
			m.now = func() time.Time { return time.Now().Add(BacklogIdle + time.Second) }
			s = samples(t, reg)
			if v, ok := s["relay_queue_backlog_seconds{queue="+queue+"}"]; !ok || v != 0 {
				t.Errorf("emptied queue: backlog %v (reported: %t), want 0", v, ok)
			}
			if v, ok := s["relay_endpoint_backlog_seconds{endpoint="+epA+"}"]; ok {
				t.Errorf("idle endpoint still reported, at %v", v)
			}
		})
	}
}
