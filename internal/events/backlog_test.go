package events

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/relay-demo/relay/retry"
)

const (
	epA = "ep_aaaaaaaaaaaaaaaaaaaaaaaaaa"
	epB = "ep_bbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// taken is a worker's delivery of a copy for target, received at
// t0+at after it had waited ready in queue for waited; the copy was
// published 100 s before that wait began (it waited for retries).
func taken(queue, target string, at, waited time.Duration) retry.Event {
	received := t0.Add(at)
	return retry.Event{Outcome: retry.Delivered, MessageID: "m", Queue: queue, Target: target, Attempt: 1,
		Received: received, At: received.Add(50 * time.Millisecond), Duration: 50 * time.Millisecond,
		Published: received.Add(-waited - 100*time.Second), Waited: waited}
}

func TestBacklogMetrics(t *testing.T) {
	webhook, email := "t1.webhook-queue", "t1.email-queue"
	tests := []struct {
		name   string
		events []retry.Event
		at     time.Duration // when the metrics are read, after t0
		want   map[string]float64
	}{
		{
			name:   "nothing taken, nothing reported",
			events: []retry.Event{{Outcome: retry.Retrying, MessageID: "m", Queue: webhook, At: t0, Published: t0}},
			want:   map[string]float64{},
		},
		{
			// A queue's figure is the copy's wait in it; an endpoint's,
			// the copy's age, its waits for retries included.
			name: "the latest take counts, per queue and per endpoint",
			events: []retry.Event{
				taken(webhook, epA, 0, 40*time.Second),
				taken(webhook, epB, time.Second, 12*time.Second),
				taken(email, "", 2*time.Second, 3*time.Second),
			},
			at: 3 * time.Second,
			want: map[string]float64{
				"relay_queue_backlog_seconds{queue=t1.webhook-queue}":                    12,
				"relay_queue_backlog_seconds{queue=t1.email-queue}":                      3,
				"relay_endpoint_backlog_seconds{endpoint=ep_aaaaaaaaaaaaaaaaaaaaaaaaaa}": 140,
				"relay_endpoint_backlog_seconds{endpoint=ep_bbbbbbbbbbbbbbbbbbbbbbbbbb}": 112,
			},
		},
		{
			name: "an event that arrives late does not replace a later take",
			events: []retry.Event{
				taken(webhook, epA, 5*time.Second, 2*time.Second),
				taken(webhook, epA, time.Second, 30*time.Second),
			},
			at: 6 * time.Second,
			want: map[string]float64{
				"relay_queue_backlog_seconds{queue=t1.webhook-queue}":                    2,
				"relay_endpoint_backlog_seconds{endpoint=ep_aaaaaaaaaaaaaaaaaaaaaaaaaa}": 102,
			},
		},
		{
			name: "idle: the queue reads 0 and the endpoint is dropped",
			events: []retry.Event{
				taken(webhook, epA, 0, 40*time.Second),
				taken(webhook, epB, 20*time.Second, 5*time.Second),
			},
			at: BacklogIdle + 10*time.Second,
			want: map[string]float64{
				"relay_queue_backlog_seconds{queue=t1.webhook-queue}":                    5,
				"relay_endpoint_backlog_seconds{endpoint=ep_bbbbbbbbbbbbbbbbbbbbbbbbbb}": 105,
			},
		},
		{
			name:   "all idle",
			events: []retry.Event{taken(webhook, epA, 0, 40*time.Second)},
			at:     BacklogIdle + time.Second,
			want:   map[string]float64{"relay_queue_backlog_seconds{queue=t1.webhook-queue}": 0},
		},
		{
			name: "bare URLs and malformed ids are no endpoints",
			events: []retry.Event{
				taken(webhook, "https://example.com/hook", 0, 7*time.Second),
				taken(webhook, "ep_not-an-id", 0, 7*time.Second),
			},
			want: map[string]float64{"relay_queue_backlog_seconds{queue=t1.webhook-queue}": 7},
		},
		{
			name: "a message with no time to count from is not counted",
			events: []retry.Event{{Outcome: retry.Delivered, MessageID: "m", Queue: webhook, Target: epA,
				Received: t0, At: t0}},
			want: map[string]float64{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := NewMetrics(reg, testTopo)
			m.now = func() time.Time { return t0.Add(tt.at) }
			for _, ev := range tt.events {
				m.Observe(ev)
			}
			got := map[string]float64{}
			for k, v := range samples(t, reg) {
				if strings.HasPrefix(k, "relay_queue_backlog_") || strings.HasPrefix(k, "relay_endpoint_backlog_") {
					got[k] = v
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("backlog metrics (-want +got):\n%s", diff)
			}
		})
	}
}
