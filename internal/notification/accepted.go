package notification

import (
	"encoding/json"
	"time"
)

// Accepted is the record of a notification the API accepted: the API
// publishes it to the events exchange beside the notification's copies,
// confirmed with them, and the history stores it as the notification
// itself. On the wire it is JSON, with "type": "accepted" added (see
// events.AcceptedPublishing).
type Accepted struct {
	// ID is the notification id, such as "ntf_…".
	ID string `json:"id"`
	// Tenant is the tenant whose token posted it; empty for the default
	// tenant.
	Tenant string `json:"tenant,omitempty"`
	// CreatedAt is when the API accepted it.
	CreatedAt time.Time `json:"created_at"`
	// DueAt is, for a scheduled notification, when it is due; zero for
	// one sent at once. Its copies are StatusScheduled until then.
	DueAt time.Time `json:"due_at,omitzero"`
	// Channels are the channels it goes to: "email", "webhook", "sms".
	Channels []string `json:"channels"`
	// Copies are its copies, one per channel, or for a channel that
	// delivers to each recipient on its own (email), one per recipient.
	// Empty means one copy per channel, with no recipient.
	Copies []CopyRef `json:"copies,omitempty"`
	// Recipients are what the history's search matches besides the id:
	// email addresses, phone numbers, webhook URLs or endpoint ids.
	Recipients []string `json:"recipients,omitempty"`
	// Payload is the notification as accepted, JSON.
	Payload json.RawMessage `json:"payload,omitempty"`
}
