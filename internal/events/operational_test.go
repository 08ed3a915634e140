package events

import (
	"testing"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

func TestForwardable(t *testing.T) {
	tests := []struct {
		name string
		op   notification.Operational
		want bool
	}{
		{"a copy parked", notification.Operational{Type: notification.OpCopyParked, Data: notification.OpData{NotificationID: "ntf_x"}}, true},
		{"an operator webhook parked", notification.Operational{Type: notification.OpCopyParked, Data: notification.OpData{NotificationID: "op_x"}}, false},
		{"an endpoint disabled", notification.Operational{Type: notification.OpEndpointDisabled, Data: notification.OpData{EndpointID: "ep_x"}}, true},
		{"a circuit opened", notification.Operational{Type: notification.OpProviderCircuitOpened, Data: notification.OpData{Provider: "smtp1"}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Forwardable(tt.op); got != tt.want {
				t.Errorf("Forwardable = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestOperatorNotification(t *testing.T) {
	f := &Forwarder{Channel: "webhook", URL: "https://ops.example.com/hook"}
	op := notification.Operational{Type: notification.OpCopyParked, ID: "evt_abc"}
	n, err := f.notification(op, []byte(`{"type":"copy.parked"}`))
	if err != nil {
		t.Fatal(err)
	}
	if n.ID != "op_abc" || n.Channel != "webhook" {
		t.Errorf("id %q, channel %q; want op_abc, webhook", n.ID, n.Channel)
	}
	if got, want := string(n.Parts["webhook"]), `{"url":"https://ops.example.com/hook","payload":{"type":"copy.parked"}}`; got != want {
		t.Errorf("part %s, want %s", got, want)
	}
}

// TestParkedCarriesTheTenant: a copy.parked event names the tenant of a
// named tenant's copy, and none for the default tenant's.
func TestParkedCarriesTheTenant(t *testing.T) {
	for _, tenant := range []string{"acme", ""} {
		op := channelsOf(testTopo).parked(retry.Event{Outcome: retry.Parked, MessageID: "ntf_x", Tenant: tenant,
			Queue: "t1.email-queue", Attempt: 3, Reason: retry.ReasonMaxRetries})
		if op.Data.Tenant != tenant {
			t.Errorf("copy.parked of %q's copy names tenant %q", tenant, op.Data.Tenant)
		}
	}
}
