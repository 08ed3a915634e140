package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store/storetest"
	"github.com/relay-demo/relay/retry"
)

// TestAttemptProvider: each attempt of a copy keeps the provider its
// worker said it went through.
func TestAttemptProvider(t *testing.T) {
	for _, backend := range storetest.Backends() {
		t.Run(backend, func(t *testing.T) {
			s := storetest.Open(t, backend)
			ctx := context.Background()
			t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
			id := "ntf_provider"
			if err := s.Accept(ctx, []notification.Accepted{{ID: id, CreatedAt: t0, Channels: []string{"email"},
				Payload: []byte(`{"email":{"to":["a@example.com"]}}`)}}); err != nil {
				t.Fatal(err)
			}
			evs := []notification.Event{
				{ID: id, Channel: "email", Attempt: 1, Outcome: retry.Failed, At: t0.Add(time.Second), Error: "primary: 421 down", Service: "worker-email", Provider: "primary"},
				{ID: id, Channel: "email", Attempt: 1, Outcome: retry.Retrying, At: t0.Add(time.Second), DelayMS: 200, Service: "retrier"},
				{ID: id, Channel: "email", Attempt: 2, Outcome: retry.Delivered, At: t0.Add(2 * time.Second), Service: "worker-email", Provider: "secondary"},
			}
			if err := s.Record(ctx, evs); err != nil {
				t.Fatal(err)
			}
			n, err := s.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range n.Copies[0].Attempts {
				got = append(got, a.Provider)
			}
			if diff := cmp.Diff([]string{"primary", "secondary"}, got); diff != "" {
				t.Errorf("providers of the attempts (-want +got):\n%s", diff)
			}
		})
	}
}
