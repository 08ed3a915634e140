package events

import (
	"crypto/rand"
	"encoding/base32"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

// OpRoutingPrefix starts the routing key of every operational event:
// "operator.<type>", such as "operator.copy.parked". A queue bound to
// "operator.#" takes them all and no attempt.
const OpRoutingPrefix = "operator."

// OpRoutingKey is the key an operational event of type typ is published
// with.
func OpRoutingKey(typ string) string { return OpRoutingPrefix + typ }

// OpIDPrefix starts every operational event's id.
const OpIDPrefix = "evt_"

var opIDEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewOpID returns a new operational event id: OpIDPrefix and 26 lowercase
// base32 characters, 128 random bits.
func NewOpID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return OpIDPrefix + opIDEncoding.EncodeToString(b[:])
}

// parked is the copy.parked event of a pipeline decision to park.
func (c channels) parked(ev retry.Event) notification.Operational {
	return notification.Operational{
		Type:      notification.OpCopyParked,
		Timestamp: ev.At,
		Data: notification.OpData{
			NotificationID: ev.MessageID,
			Channel:        c[ev.Queue],
			Recipient:      recipient(ev.Copy),
			Tenant:         ev.Tenant,
			Queue:          ev.Queue,
			Attempt:        ev.Attempt,
			Round:          ev.Round,
			Reason:         ev.Reason,
			LastError:      ev.Err,
		},
	}
}
