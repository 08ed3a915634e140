package history

import (
	"errors"
	"fmt"

	"github.com/relay-demo/relay/retry"
)

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
