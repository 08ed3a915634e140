package events

import (
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/services/internal/history"
)

// TestDecode turns what the API and the pipeline publish into history
// records: a copy per recipient, and the recipient of each event, come
// through; junk and events outside any work queue do not.
func TestDecode(t *testing.T) {
	body := func(v any) amqp.Delivery {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return amqp.Delivery{Body: b}
	}
	split := Accepted{Type: TypeAccepted, ID: "ntf_split", CreatedAt: t0, Channels: []string{"email", "webhook"},
		Copies:     []Copy{{Channel: "email", Recipient: "ok1@example.com"}, {Channel: "email", Recipient: "reject@example.com"}, {Channel: "webhook"}},
		Recipients: []string{"ok1@example.com", "reject@example.com", "https://hooks.example.com/x"}, Payload: json.RawMessage(`{"a":1}`)}
	whole := Accepted{Type: TypeAccepted, ID: "ntf_whole", CreatedAt: t0, Channels: []string{"sms"}}
	ds := []amqp.Delivery{
		body(split),
		{Body: []byte("junk")},
		body(whole),
		body(Event{Type: TypeAttempt, Outcome: "parked", ID: "ntf_split", Channel: "email", Recipient: "reject@example.com",
			Attempt: 1, Error: "550 no such user", Reason: "permanent", At: t0, Service: "worker-email", DurationMS: 40}),
		body(Event{Type: TypeAttempt, Outcome: "retrying", ID: "ntf_whole", Channel: "sms", Attempt: 1, DelayMS: 500, At: t0, Service: "retrier"}),
		body(Event{Type: TypeAttempt, Outcome: "parked", ID: "ghost", At: t0}),
	}
	accepted, evs := decode(ds, slog.New(slog.DiscardHandler))
	wantAccepted := []history.Accepted{
		{ID: "ntf_split", CreatedAt: t0, Channels: []string{"email", "webhook"},
			Copies:     []history.CopyRef{{Channel: "email", Recipient: "ok1@example.com"}, {Channel: "email", Recipient: "reject@example.com"}, {Channel: "webhook"}},
			Recipients: split.Recipients, Payload: split.Payload},
		{ID: "ntf_whole", CreatedAt: t0, Channels: []string{"sms"}},
	}
	if diff := cmp.Diff(wantAccepted, accepted); diff != "" {
		t.Errorf("accepted (-want +got):\n%s", diff)
	}
	wantEvents := []history.Event{
		{ID: "ntf_split", Channel: "email", Recipient: "reject@example.com", Attempt: 1, Outcome: "parked", At: t0,
			Error: "550 no such user", Reason: "permanent", DurationMS: 40, Service: "worker-email"},
		{ID: "ntf_whole", Channel: "sms", Attempt: 1, Outcome: "retrying", At: t0, DelayMS: 500, Service: "retrier"},
	}
	if diff := cmp.Diff(wantEvents, evs); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
