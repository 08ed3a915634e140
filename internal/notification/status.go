package notification

// Status is the state of one channel copy of a notification, as the
// history derives it from the copy's attempts (see View).
type Status string

// The statuses of a channel copy.
const (
	// StatusScheduled is a copy of a scheduled notification that is not
	// due yet: it waits in the broker until View.DueAt, and
	// Copy.NextAttemptAt says when that is.
	StatusScheduled Status = "scheduled"
	// StatusQueued is a copy accepted or replayed that nothing has
	// happened to since (in its round).
	StatusQueued Status = "queued"
	// StatusRetrying is a copy whose last attempt failed and that waits
	// for the next.
	StatusRetrying Status = "retrying"
	// StatusDelivered is a copy delivered.
	StatusDelivered Status = "delivered"
	// StatusParked is a copy parked in the dead-letter queue.
	StatusParked Status = "parked"
	// StatusCancelled is a copy taken back before it went out: it is
	// never delivered.
	StatusCancelled Status = "cancelled"
	// StatusSending is never a copy's stored status: a cancellation
	// gives it to a copy it could not cancel because a worker holds it
	// and is sending it.
	StatusSending Status = "sending"
)

// Statuses names the statuses a copy is stored with, the values a list's
// status filter takes: every Status but StatusSending.
var Statuses = []string{string(StatusScheduled), string(StatusQueued), string(StatusRetrying), string(StatusDelivered), string(StatusParked), string(StatusCancelled)}
