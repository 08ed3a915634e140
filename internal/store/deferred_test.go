package store_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/retry"
)

// TestAttemptDeferred: an attempt whose wait the retry stage called a
// deferral (a rate limit's slot, a Retry-After) keeps that mark, whether
// its events were recorded or loaded; a retry's wait does not have it.
func TestAttemptDeferred(t *testing.T) {
	events := func(id string) []notification.Event {
		at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
		return []notification.Event{
			{ID: id, Channel: "email", Attempt: 1, Outcome: retry.Failed, At: at(1), Error: "email provider backup: rate limit 4/s (burst 2)", Service: "worker-email"},
			{ID: id, Channel: "email", Attempt: 1, Outcome: retry.Retrying, At: at(1), DelayMS: 229, Deferred: true, Service: "retrier"},
			{ID: id, Channel: "email", Attempt: 2, Outcome: retry.Failed, At: at(2), Error: "flaky: 451 try later", Service: "worker-email"},
			{ID: id, Channel: "email", Attempt: 2, Outcome: retry.Retrying, At: at(2), DelayMS: 1000, Service: "retrier"},
			{ID: id, Channel: "email", Attempt: 3, Outcome: retry.Delivered, At: at(4), Service: "worker-email"},
		}
	}
	check := func(t *testing.T, n *notification.View) {
		t.Helper()
		var got []bool
		for _, a := range n.Copies[0].Attempts {
			got = append(got, a.Deferred)
		}
		if diff := cmp.Diff([]bool{true, false, false}, got); diff != "" {
			t.Errorf("Deferred of the attempts (-want +got):\n%s", diff)
		}
	}
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		t.Run("recorded", func(t *testing.T) {
			id := "ntf_deferred_recorded"
			accept(t, s, id, "email")
			record(t, s, events(id)...)
			check(t, get(t, s, id))
		})
		t.Run("loaded", func(t *testing.T) {
			id := "ntf_deferred_loaded"
			a := notification.Accepted{ID: id, CreatedAt: t0, Channels: []string{"email"}, Payload: []byte(`{}`)}
			if err := s.Load(ctxOf(t), seq([]loaded{{a, events(id)}})); err != nil {
				t.Fatal(err)
			}
			check(t, get(t, s, id))
		})
	})
}
