package notification

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/retry"
)

// TestEventCopyStatus: the status each outcome leads its copy to, and its
// rank within an attempt, for every outcome the pipeline decides.
func TestEventCopyStatus(t *testing.T) {
	type derived struct {
		Status Status
		Rank   int
	}
	tests := []struct {
		name string
		ev   Event
		want derived
	}{
		{"replayed", Event{Outcome: retry.Replayed, Round: 1}, derived{StatusQueued, 0}},
		{"failed", Event{Outcome: retry.Failed, Attempt: 1}, derived{StatusRetrying, 1}},
		{"retrying", Event{Outcome: retry.Retrying, Attempt: 1}, derived{StatusRetrying, 2}},
		{"waiting", Event{Outcome: retry.Waiting, Attempt: 2}, derived{StatusRetrying, 2}},
		{"requeued for a retry", Event{Outcome: retry.Requeued, Attempt: 2}, derived{StatusRetrying, 2}},
		{"requeued in a later round", Event{Outcome: retry.Requeued, Round: 1, Attempt: 1}, derived{StatusRetrying, 2}},
		{"requeued before any attempt: a scheduled copy now due", Event{Outcome: retry.Requeued, Attempt: 1}, derived{StatusScheduled, 2}},
		{"delivered", Event{Outcome: retry.Delivered, Attempt: 1}, derived{StatusDelivered, 3}},
		{"parked", Event{Outcome: retry.Parked, Attempt: 4, Reason: "rejected"}, derived{StatusParked, 3}},
		{"cancelled", Event{Outcome: retry.Cancelled, Attempt: 1}, derived{StatusCancelled, 3}},
		{"an outcome relay does not know", Event{Outcome: "vanished", Attempt: 1}, derived{"", -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := derived{tt.ev.CopyStatus(), tt.ev.Rank()}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
