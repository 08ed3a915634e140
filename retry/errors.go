package retry

import (
	"errors"
	"time"
)

// permanentError marks a failure that no retry can fix.
type permanentError struct{ err error }

func (e permanentError) Error() string   { return e.err.Error() }
func (e permanentError) Unwrap() error   { return e.err }
func (e permanentError) Permanent() bool { return true }

// Permanent wraps err so the consumer parks the message at once instead of
// retrying it: a malformed payload, an address the mail server refuses for
// good, a webhook endpoint that answers 410 Gone. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err, or any error it wraps, says no retry can
// help: one made by Permanent, or any error with a method
//
//	Permanent() bool
//
// that returns true. A library can mark its errors so without importing
// this package (relay's email and webhooks packages do).
func IsPermanent(err error) bool {
	var p interface{ Permanent() bool }
	return errors.As(err, &p) && p.Permanent()
}

// afterError carries a downstream's request to wait before the next attempt.
type afterError struct {
	err   error
	after time.Duration
}

func (e afterError) Error() string             { return e.err.Error() }
func (e afterError) Unwrap() error             { return e.err }
func (e afterError) RetryAfter() time.Duration { return e.after }

// After wraps a transient err with the shortest wait the downstream asked
// for (an HTTP Retry-After, say). The retry pipeline then schedules the next
// attempt no sooner than that, even if the policy's own delay is shorter.
// After(nil, d) is nil; a d of zero or less leaves err as it is.
func After(err error, d time.Duration) error {
	if err == nil || d <= 0 {
		return err
	}
	return afterError{err: err, after: d}
}

// RetryAfter returns the wait that err, or an error it wraps, asks for
// before the next attempt: one made by After, or any error with a method
//
//	RetryAfter() time.Duration
//
// that returns more than zero.
func RetryAfter(err error) (time.Duration, bool) {
	var a interface{ RetryAfter() time.Duration }
	if err == nil || !errors.As(err, &a) {
		return 0, false
	}
	d := a.RetryAfter()
	return d, d > 0
}

// cancelledError marks a message its handler found cancelled.
type cancelledError struct{ err error }

func (e cancelledError) Error() string { return e.err.Error() }
func (e cancelledError) Unwrap() error { return e.err }

// Cancel marks err as "this message is no longer wanted": a scheduled send
// taken back before it went out. The consumer acks the message and
// reports it Cancelled; it is neither retried nor parked.
func Cancel(err error) error {
	if err == nil {
		return nil
	}
	return cancelledError{err}
}

// IsCancelled reports whether err, or any error it wraps, was marked with
// Cancel.
func IsCancelled(err error) bool {
	var c cancelledError
	return errors.As(err, &c)
}
