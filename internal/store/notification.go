package store

import (
	"errors"
	"fmt"
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
