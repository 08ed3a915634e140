package history

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

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
	Copies []CopyRef
	// Recipients are what List searches besides the id: email addresses,
	// phone numbers, webhook URLs or endpoint ids.
	Recipients []string
	// Payload is the notification as accepted, JSON.
	Payload json.RawMessage
}

// CopyRef names one copy of a notification: its channel and, for a
// channel that delivers to each recipient on its own, the recipient.
type CopyRef struct {
	Channel string
	// Recipient is empty for a copy that goes to all of a part's
	// recipients at once.
	Recipient string
}

// Event is one decision about one attempt of one channel copy.
type Event struct {
	// ID is the notification id.
	ID string
	// Channel is the copy's channel.
	Channel string
	// Recipient is the copy's recipient, for a channel that delivers to
	// each on its own; empty otherwise.
	Recipient string
	// Round is 0 until the copy is first replayed; each replay starts
	// the next round, and its retry.Replayed event carries that round.
	Round int
	// Attempt is the attempt the decision is about, 1 for the first of
	// the round: for retry.Retrying and retry.Waiting the failed one, for
	// retry.Requeued the one about to run. The store ignores it for
	// retry.Replayed.
	Attempt int
	// Outcome is what was decided. retry.Cancelled is recorded by the API
	// when a client cancels the notification, and by the worker that then
	// finds the copy cancelled and acks it unsent.
	Outcome retry.Outcome
	// At is when the decision was made.
	At time.Time
	// Error is the failure's text, where known.
	Error string
	// Reason is why the copy was parked.
	Reason string
	// DelayMS is, for retry.Retrying and retry.Failed, the wait
	// scheduled before the next attempt.
	DelayMS int64
	// DurationMS is, for retry.Delivered and retry.Failed, how long the
	// attempt itself took; 0 when unknown.
	DurationMS int64
	// Service names the process that made the decision.
	Service string
	// Provider is the provider the attempt went through, for a channel
	// with several (the email channel's mail servers); empty otherwise.
	Provider string
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
