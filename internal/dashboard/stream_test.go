package dashboard

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store/storetest"
	"github.com/relay-demo/relay/retry"
)

// TestStreamedStatusIsTheHistorys: every event the stream sends carries
// the status it leads its copy to and its rank, and once the history has
// recorded the events so far, the greatest of them by round, attempt and
// rank (the one the page keeps) carries the status the history shows: the
// page draws the history's status, not one of its own.
func TestStreamedStatusIsTheHistorys(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	step := func(outcome retry.Outcome, round, attempt int) notification.Event {
		return notification.Event{Type: "attempt", Outcome: outcome, ID: "ntf_stream", Channel: "webhook", Queue: "webhook-queue",
			Round: round, Attempt: attempt, At: at.Add(time.Duration(10*round+attempt) * time.Second), Service: "worker"}
	}
	type frame struct {
		Outcome retry.Outcome       `json:"outcome"`
		Status  notification.Status `json:"status"`
		Rank    int                 `json:"rank"`
	}
	tests := []struct {
		name string
		ev   notification.Event
		want frame
	}{
		{"due and requeued before any attempt", step(retry.Requeued, 0, 1), frame{retry.Requeued, notification.StatusScheduled, 2}},
		{"the first attempt fails", step(retry.Failed, 0, 1), frame{retry.Failed, notification.StatusRetrying, 1}},
		{"its retry is scheduled", step(retry.Retrying, 0, 1), frame{retry.Retrying, notification.StatusRetrying, 2}},
		{"requeued for the second", step(retry.Requeued, 0, 2), frame{retry.Requeued, notification.StatusRetrying, 2}},
		{"the second is parked", step(retry.Parked, 0, 2), frame{retry.Parked, notification.StatusParked, 3}},
		{"replayed", step(retry.Replayed, 1, 0), frame{retry.Replayed, notification.StatusQueued, 0}},
		{"delivered in the new round", step(retry.Delivered, 1, 1), frame{retry.Delivered, notification.StatusDelivered, 3}},
	}
	store := storetest.Open(t, storetest.SQLite)
	if err := store.Accept(t.Context(), []notification.Accepted{{ID: "ntf_stream", CreatedAt: at, Channels: []string{"webhook"}}}); err != nil {
		t.Fatal(err)
	}
	// The greatest event streamed so far, as the page orders them.
	var top struct {
		round, attempt, rank int
		status               notification.Status
	}
	top.rank = -1
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := newUpdate(tt.ev)
			if err != nil {
				t.Fatal(err)
			}
			for name, b := range map[string][]byte{"full": u.Full, "redacted": u.Redacted} {
				var got frame
				if err := json.Unmarshal([]byte(strings.TrimSuffix(strings.TrimPrefix(string(b), "event: attempt\ndata: "), "\n\n")), &got); err != nil {
					t.Fatalf("%s frame %q: %v", name, b, err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("%s frame (-want +got):\n%s", name, diff)
				}
			}
			later := tt.ev.Round - top.round
			if later == 0 {
				later = tt.ev.Attempt - top.attempt
			}
			if later == 0 {
				later = tt.want.Rank - top.rank
			}
			if later >= 0 {
				top.round, top.attempt, top.rank, top.status = tt.ev.Round, tt.ev.Attempt, tt.want.Rank, tt.want.Status
			}
			if err := store.Record(t.Context(), []notification.Event{tt.ev}); err != nil {
				t.Fatal(err)
			}
			v, err := store.Get(t.Context(), "ntf_stream")
			if err != nil {
				t.Fatal(err)
			}
			if len(v.Copies) != 1 || v.Copies[0].Status != top.status {
				t.Errorf("the history shows %+v, the greatest event streamed said %s", v.Copies, top.status)
			}
		})
	}
}
