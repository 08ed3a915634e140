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
		forged("", Event{Type: TypeAttempt, Outcome: "delivered", ID: "ntf_split", Channel: "email", Recipient: "reject@example.com",
			Attempt: 2, At: t0, Service: "worker-email"}),
		forged("orders-app", Event{Type: TypeAttempt, Outcome: "delivered", ID: "ntf_split", Channel: "email", Recipient: "reject@example.com",
			Attempt: 2, At: t0, Service: "worker-email"}),
		forged("orders-app", Accepted{Type: TypeAccepted, ID: "ntf_never_sent", CreatedAt: t0, Channels: []string{"sms"}}),
		forged("", Accepted{Type: TypeAccepted, ID: "ntf_never_sent", CreatedAt: t0, Channels: []string{"sms"}}),
	}
	accepted, evs := decode(ds, "relay", slog.New(slog.DiscardHandler))
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
