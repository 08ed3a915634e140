package events

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/notification"
)

// TestDecode turns what the API and the pipeline publish into history
// records: a copy per recipient, and the recipient of each event, come
// through; junk, events outside any work queue, and anything relay's own
// user did not publish (a forged attempt or accepted record) do not.
func TestDecode(t *testing.T) {
	body := func(v any) amqp.Delivery {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return amqp.Delivery{Body: b, UserId: "relay"}
	}
	// forged is what a producer allowed to publish to the events exchange
	// can make: the same body, but its own user-id (the broker checks it)
	// or none.
	forged := func(user string, v any) amqp.Delivery {
		d := body(v)
		d.UserId = user
		return d
	}
	// record is an accepted record as the API publishes it, from user.
	record := func(user string, a notification.Accepted) amqp.Delivery {
		p, err := AcceptedPublishing(a, "api")
		if err != nil {
			t.Fatal(err)
		}
		return amqp.Delivery{Body: p.Body, UserId: user}
	}
	split := notification.Accepted{ID: "ntf_split", CreatedAt: t0, Channels: []string{"email", "webhook"},
		Copies:     []notification.CopyRef{{Channel: "email", Recipient: "ok1@example.com"}, {Channel: "email", Recipient: "reject@example.com"}, {Channel: "webhook"}},
		Recipients: []string{"ok1@example.com", "reject@example.com", "https://hooks.example.com/x"}, Payload: json.RawMessage(`{"a":1}`)}
	whole := notification.Accepted{ID: "ntf_whole", CreatedAt: t0, Channels: []string{"sms"}}
	ds := []amqp.Delivery{
		record("relay", split),
		{Body: []byte("junk")},
		record("relay", whole),
		body(notification.Event{Type: TypeAttempt, Outcome: "parked", ID: "ntf_split", Channel: "email", Recipient: "reject@example.com",
			Attempt: 1, Error: "550 no such user", Reason: "permanent", At: t0, Service: "worker-email", DurationMS: 40}),
		body(notification.Event{Type: TypeAttempt, Outcome: "retrying", ID: "ntf_whole", Channel: "sms", Attempt: 1, DelayMS: 500, At: t0, Service: "retrier"}),
		body(notification.Event{Type: TypeAttempt, Outcome: "parked", ID: "ghost", At: t0}),
		forged("", notification.Event{Type: TypeAttempt, Outcome: "delivered", ID: "ntf_split", Channel: "email", Recipient: "reject@example.com",
			Attempt: 2, At: t0, Service: "worker-email"}),
		forged("orders-app", notification.Event{Type: TypeAttempt, Outcome: "delivered", ID: "ntf_split", Channel: "email", Recipient: "reject@example.com",
			Attempt: 2, At: t0, Service: "worker-email"}),
		record("orders-app", notification.Accepted{ID: "ntf_never_sent", CreatedAt: t0, Channels: []string{"sms"}}),
		record("", notification.Accepted{ID: "ntf_never_sent", CreatedAt: t0, Channels: []string{"sms"}}),
	}
	accepted, evs := decode(ds, "relay", slog.New(slog.DiscardHandler))
	wantAccepted := []notification.Accepted{
		{ID: "ntf_split", CreatedAt: t0, Channels: []string{"email", "webhook"},
			Copies:     []notification.CopyRef{{Channel: "email", Recipient: "ok1@example.com"}, {Channel: "email", Recipient: "reject@example.com"}, {Channel: "webhook"}},
			Recipients: split.Recipients, Payload: split.Payload},
		{ID: "ntf_whole", CreatedAt: t0, Channels: []string{"sms"}},
	}
	if diff := cmp.Diff(wantAccepted, accepted); diff != "" {
		t.Errorf("accepted (-want +got):\n%s", diff)
	}
	// The store is handed each event as published; it keeps what it needs.
	wantEvents := []notification.Event{
		{Type: TypeAttempt, ID: "ntf_split", Channel: "email", Recipient: "reject@example.com", Attempt: 1, Outcome: "parked", At: t0,
			Error: "550 no such user", Reason: "permanent", DurationMS: 40, Service: "worker-email"},
		{Type: TypeAttempt, ID: "ntf_whole", Channel: "sms", Attempt: 1, Outcome: "retrying", At: t0, DelayMS: 500, Service: "retrier"},
	}
	if diff := cmp.Diff(wantEvents, evs); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// brokenSink refuses every write while broken is set.
type brokenSink struct {
	broken atomic.Bool
	writes atomic.Int32
}

func (s *brokenSink) Accept(context.Context, []notification.Accepted) error {
	s.writes.Add(1)
	if s.broken.Load() {
		return errors.New("insert events: disk I/O error (6410)")
	}
	return nil
}

func (s *brokenSink) Record(context.Context, []notification.Event) error { return nil }

// TestFeedStuck checks that a store that keeps failing is reported by
// Stuck once StuckAfter has passed, not before, and no longer once it
// takes the batch.
func TestFeedStuck(t *testing.T) {
	tests := []struct {
		name       string
		stuckAfter time.Duration
		wantStuck  bool
	}{
		{name: "failing for longer than StuckAfter", stuckAfter: 50 * time.Millisecond, wantStuck: true},
		{name: "failing for less than StuckAfter", stuckAfter: time.Hour, wantStuck: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := &brokenSink{}
			sink.broken.Store(true)
			f := &Feed{Sink: sink, StuckAfter: tt.stuckAfter}
			if err := f.Stuck(); err != nil {
				t.Fatalf("Stuck before any write = %v, want nil", err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan bool, 1)
			go func() { done <- f.store(ctx, nil, "", slog.New(slog.DiscardHandler)) }()

			// Three failed writes take 300ms of backoff (100ms, 200ms).
			eventually(t, 10*time.Second, func() bool { return sink.writes.Load() >= 3 }, "the feed did not try the batch again")
			err := f.Stuck()
			if got := errors.Is(err, ErrStuck); got != tt.wantStuck {
				t.Fatalf("Stuck after %d failed writes = %v, want ErrStuck: %v", sink.writes.Load(), err, tt.wantStuck)
			}
			if tt.wantStuck && !strings.Contains(err.Error(), "disk I/O error") {
				t.Errorf("Stuck = %q, which does not say the store's error", err)
			}

			sink.broken.Store(false)
			select {
			case ok := <-done:
				if !ok {
					t.Fatal("store = false, want true once the sink takes the batch")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the feed did not store the batch once the sink took it")
			}
			if err := f.Stuck(); err != nil {
				t.Errorf("Stuck after the batch was stored = %v, want nil", err)
			}
		})
	}
}

// eventually polls cond until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAcceptedPublishing pins the accepted record on the wire: "type"
// first, due_at only for a scheduled notification, copies only when a
// channel has one per recipient; persistent, with the id the history's
// deduplication reads.
func TestAcceptedPublishing(t *testing.T) {
	due := t0.Add(time.Hour)
	tests := []struct {
		name string
		a    notification.Accepted
		want string
	}{
		{"sent at once", notification.Accepted{ID: "ntf_1", CreatedAt: t0, Channels: []string{"sms"}},
			`{"type":"accepted","id":"ntf_1","created_at":"` + t0.Format(time.RFC3339Nano) + `","channels":["sms"]}`},
		{"scheduled, a copy per recipient", notification.Accepted{ID: "ntf_2", CreatedAt: t0, DueAt: due, Channels: []string{"email"},
			Copies: []notification.CopyRef{{Channel: "email", Recipient: "ada@example.com"}}, Recipients: []string{"ada@example.com"},
			Payload: json.RawMessage(`{"a":1}`)},
			`{"type":"accepted","id":"ntf_2","created_at":"` + t0.Format(time.RFC3339Nano) + `","due_at":"` + due.Format(time.RFC3339Nano) +
				`","channels":["email"],"copies":[{"channel":"email","recipient":"ada@example.com"}],"recipients":["ada@example.com"],"payload":{"a":1}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := AcceptedPublishing(tt.a, "api")
			if err != nil {
				t.Fatal(err)
			}
			if string(p.Body) != tt.want {
				t.Errorf("body\n got %s\nwant %s", p.Body, tt.want)
			}
			if p.DeliveryMode != amqp.Persistent || p.Type != TypeAccepted || p.MessageId != tt.a.ID+".accepted" || p.AppId != "api" {
				t.Errorf("publishing = %+v", p)
			}
			var back notification.Accepted
			if err := json.Unmarshal(p.Body, &back); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.a, back); diff != "" {
				t.Errorf("decoded (-want +got):\n%s", diff)
			}
		})
	}
}
