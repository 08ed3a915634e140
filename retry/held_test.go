package retry

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestHeldWatch(t *testing.T) {
	held := map[string]int{}
	var fail error
	var logs bytes.Buffer
	w := &heldWatch{
		queues: []string{"jobs", "wait.1s"},
		counts: func(_ context.Context, q string) (QueueCounts, error) {
			// Ready and unacknowledged messages never count as held.
			return QueueCounts{Messages: held[q] + 7, Ready: 5, Unacked: 2, Leader: "rabbit@n2"}, fail
		},
		after: 3 * time.Minute,
		log:   slog.New(slog.NewTextHandler(&logs, nil)),
	}
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) []string { return w.check(context.Background(), t0.Add(d)) }

	if got := at(0); len(got) != 0 {
		t.Fatalf("nothing held: stalled %v", got)
	}
	held["jobs"] = 4
	for _, d := range []time.Duration{30 * time.Second, 2 * time.Minute, 3 * time.Minute} {
		if got := at(d); len(got) != 0 {
			t.Fatalf("held since 30s, at %s: stalled %v, want none before 3m", d, got)
		}
	}
	if got := at(3*time.Minute + 30*time.Second); !slices.Equal(got, []string{"jobs"}) {
		t.Fatalf("held 3m: stalled %v, want [jobs]", got)
	}
	if !strings.Contains(logs.String(), "rabbitmq-queues delete_member jobs rabbit@n2") || !strings.Contains(logs.String(), "held=4") {
		t.Errorf("the error does not name the remedy and the count: %s", logs.String())
	}
	if got := at(4 * time.Minute); len(got) != 0 {
		t.Errorf("logged again a minute later: %v", got)
	}
	if got := at(6*time.Minute + 30*time.Second); !slices.Equal(got, []string{"jobs"}) {
		t.Errorf("still held 3m after the first error: stalled %v, want [jobs] again", got)
	}

	// Fewer held is progress: the clock starts again.
	held["jobs"] = 3
	if got := at(7 * time.Minute); len(got) != 0 {
		t.Errorf("the number went down: stalled %v", got)
	}
	if got := at(9 * time.Minute); len(got) != 0 {
		t.Errorf("2m after the last progress: stalled %v", got)
	}
	// None held ends it; held again starts a new clock.
	held["jobs"] = 0
	at(10 * time.Minute)
	held["jobs"] = 9
	at(11 * time.Minute)
	if got := at(13 * time.Minute); len(got) != 0 {
		t.Errorf("held again 2m: stalled %v", got)
	}

	// An unreadable API is said once per outage.
	logs.Reset()
	fail = errors.New("connection refused")
	at(14 * time.Minute)
	at(15 * time.Minute)
	if n := strings.Count(logs.String(), "cannot read the queues' counts"); n != 1 {
		t.Errorf("an outage logged %d times, want once: %s", n, logs.String())
	}
}

func TestDeadLetteringQueues(t *testing.T) {
	topo := Topology{QueueType: Quorum, Backend: TTL, Policy: Policy{Delays: []time.Duration{time.Second}},
		Routes: []Route{{Queue: "jobs", Key: "job"}}}
	got := topo.deadLettering()
	if !slices.Contains(got, "jobs") || !slices.Contains(got, topo.WaitQueue(time.Second)) {
		t.Errorf("quorum, TTL: %v, want the work queue and the wait queue", got)
	}
	if slices.Contains(got, topo.Name(DeadQueue)) {
		t.Errorf("the dead-letter queue dead-letters nothing: %v", got)
	}
	topo.QueueType = Classic
	if got := topo.deadLettering(); len(got) != 0 {
		t.Errorf("classic queues dead-letter at most once: %v", got)
	}
}
