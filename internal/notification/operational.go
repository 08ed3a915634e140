package notification

import "time"

// The types of operational events: occurrences an operator acts on, as
// opposed to the attempts of one notification (Event).
const (
	// OpCopyParked: a copy ran out of retries, or failed for good, and
	// was parked in the dead-letter queue.
	OpCopyParked = "copy.parked"
	// OpEndpointDisabled: a webhook worker disabled an endpoint that kept
	// failing for longer than WEBHOOK_DISABLE_AFTER.
	OpEndpointDisabled = "endpoint.disabled"
	// OpEndpointEnabled: an endpoint that was disabled was enabled again
	// through the API.
	OpEndpointEnabled = "endpoint.enabled"
	// OpProviderCircuitOpened: a worker opened the circuit of an email or
	// SMS provider after failures in a row.
	OpProviderCircuitOpened = "provider.circuit_opened"
)

// OpTypes lists the operational event types.
var OpTypes = []string{OpCopyParked, OpEndpointDisabled, OpEndpointEnabled, OpProviderCircuitOpened}

// IsOpType reports whether t is an operational event type.
func IsOpType(t string) bool {
	for _, o := range OpTypes {
		if o == t {
			return true
		}
	}
	return false
}

// OperatorIDPrefix starts the id of every notification that carries an
// operational event to the operator webhook. A copy.parked event about
// such a notification is published, but never forwarded to the operator
// webhook again: a failing operator endpoint does not feed itself.
const OperatorIDPrefix = "op_"

// HeaderOperator marks a copy of a notification that carries an
// operational event to the operator webhook: the webhook worker signs it
// with OPERATOR_WEBHOOK_SECRET. Only relay's own processes publish it; the
// API never lets a client set a header.
const HeaderOperator = "x-relay-operator"

// Operational is one operational event: what relay publishes to the
// events exchange (as JSON, with these names, routed by "operator.<type>")
// and posts, where configured, to the operator webhook as its body. Its
// shape follows Standard Webhooks' recommendation: type, timestamp, data.
type Operational struct {
	// Type is one of OpTypes.
	Type string `json:"type"`
	// ID is the event's own id, "evt_" and 26 characters; the operator
	// webhook's webhook-id is derived from it, so a receiver deduplicates
	// on it.
	ID string `json:"id"`
	// Timestamp is when it happened.
	Timestamp time.Time `json:"timestamp"`
	// Service names the process that saw it happen, such as "retrier".
	Service string `json:"service"`
	// Data describes it; which fields are set depends on Type.
	Data OpData `json:"data"`
}

// OpData is what an operational event is about. Every field is empty
// unless its type sets it.
type OpData struct {
	// NotificationID is the parked copy's notification (copy.parked).
	NotificationID string `json:"notification_id,omitempty"`
	// Channel is the parked copy's channel (copy.parked), or the channel
	// of the provider whose circuit opened (provider.circuit_opened).
	Channel string `json:"channel,omitempty"`
	// Recipient is the parked copy's recipient, for a channel that sends
	// a copy per recipient (copy.parked).
	Recipient string `json:"recipient,omitempty"`
	// Tenant is the tenant the parked copy's notification belongs to, as
	// its HeaderTenant says (copy.parked), or the endpoint's tenant
	// (endpoint.disabled, endpoint.enabled); empty for the default tenant.
	Tenant string `json:"tenant,omitempty"`
	// Queue is the work queue the copy was parked from (copy.parked).
	Queue string `json:"queue,omitempty"`
	// Attempt is the copy's last attempt of its round (copy.parked).
	Attempt int `json:"attempt,omitempty"`
	// Round is how often the copy had been replayed (copy.parked).
	Round int `json:"round,omitempty"`
	// EndpointID is the endpoint (endpoint.disabled, endpoint.enabled).
	EndpointID string `json:"endpoint_id,omitempty"`
	// URL is the endpoint's URL (endpoint.disabled, endpoint.enabled).
	URL string `json:"url,omitempty"`
	// Provider is the provider whose circuit opened
	// (provider.circuit_opened).
	Provider string `json:"provider,omitempty"`
	// Reason says why: the park's reason (such as "max-retries"), or why
	// the endpoint was disabled or enabled.
	Reason string `json:"reason,omitempty"`
	// LastError is the failure that ended it: the copy's last error, the
	// endpoint's or the provider's last failure.
	LastError string `json:"last_error,omitempty"`
}
