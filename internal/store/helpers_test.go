package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/internal/store/storetest"
	"github.com/relay-demo/relay/retry"
)

// t0 is when the tests' notifications are accepted.
var t0 = time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)

// forEachBackend runs fn as a subtest against a fresh store on every
// backend.
func forEachBackend(t *testing.T, fn func(t *testing.T, s *store.Store)) {
	t.Helper()
	for _, backend := range storetest.Backends() {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			fn(t, storetest.Open(t, backend))
		})
	}
}

func ctxOf(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func accept(t *testing.T, s *store.Store, id string, channels ...string) {
	t.Helper()
	if err := s.Accept(ctxOf(t), []notification.Accepted{{ID: id, CreatedAt: t0, Channels: channels, Payload: []byte(`{}`)}}); err != nil {
		t.Fatalf("accept %s: %v", id, err)
	}
}

func record(t *testing.T, s *store.Store, events ...notification.Event) {
	t.Helper()
	if err := s.Record(ctxOf(t), events); err != nil {
		t.Fatalf("record: %v", err)
	}
}

func get(t *testing.T, s *store.Store, id string) *notification.View {
	t.Helper()
	n, err := s.Get(ctxOf(t), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return n
}

// ev is an event of attempt of the email copy of "ntf_1", after t0.
func ev(attempt int, outcome retry.Outcome, after time.Duration, opts ...func(*notification.Event)) notification.Event {
	e := notification.Event{ID: "ntf_1", Channel: "email", Attempt: attempt, Outcome: outcome, At: t0.Add(after), Service: "test"}
	for _, o := range opts {
		o(&e)
	}
	return e
}

func withErr(s string) func(*notification.Event) { return func(e *notification.Event) { e.Error = s } }
func withDelay(ms int64) func(*notification.Event) {
	return func(e *notification.Event) { e.DelayMS = ms }
}
func withDur(ms int64) func(*notification.Event) {
	return func(e *notification.Event) { e.DurationMS = ms }
}
func withRound(r int) func(*notification.Event) { return func(e *notification.Event) { e.Round = r } }
func withReason(r string) func(*notification.Event) {
	return func(e *notification.Event) { e.Reason = r }
}

func i64(n int64) *int64 { return &n }

func at(d time.Duration) *time.Time {
	t := t0.Add(d)
	return &t
}

// cmpOpts compare what the store returns: empty and nil slices alike.
var cmpOpts = []cmp.Option{cmpopts.EquateEmpty()}
