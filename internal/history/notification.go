package history

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

// Accepted is a notification the API accepted.
type Accepted struct {
	// ID is the notification id, such as "ntf_…".
	ID string
	// CreatedAt is when the API accepted it.
	CreatedAt time.Time
	// DueAt is, for a scheduled notification, when it is due; zero for
	// one sent at once. Its copies are notification.StatusScheduled
	// until then.
	DueAt time.Time
	// Channels are the channels it goes to: "email", "webhook", "sms".
	Channels []string
	// Copies are its copies, one per channel, or for a channel that
	// delivers to each recipient on its own (email), one per recipient.
	// Empty means one copy per channel, with no recipient.
	Copies []notification.CopyRef
	// Recipients are what List searches besides the id: email addresses,
	// phone numbers, webhook URLs or endpoint ids.
	Recipients []string
	// Payload is the notification as accepted, JSON.
	Payload json.RawMessage
}

// ErrInvalid is wrapped by the errors of Accept and Record for input they
// cannot store, such as an event with no id.
var ErrInvalid = errors.New("invalid input")

// InputError says which item of a batch is invalid. It wraps ErrInvalid.
type InputError struct {
	// Index is the item's position in the batch.
	Index int
	// Problem says what is wrong with it.
	Problem string
}

// Error says which item is invalid and why.
func (e *InputError) Error() string {
	return fmt.Sprintf("item %d: %s", e.Index, e.Problem)
}

// Unwrap returns ErrInvalid.
func (e *InputError) Unwrap() error { return ErrInvalid }

// rank orders the outcomes of one attempt: what happened last to an
// attempt outranks what happened on the way.
func rank(outcome retry.Outcome) int {
	switch outcome {
	case retry.Replayed:
		return 0
	case retry.Failed:
		return 1
	case retry.Retrying, retry.Waiting, retry.Requeued:
		return 2
	case retry.Delivered, retry.Parked, retry.Cancelled:
		return 3
	}
	return -1
}
