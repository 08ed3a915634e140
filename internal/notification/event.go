package notification

import (
	"time"

	"github.com/relay-demo/relay/retry"
)

// Event is one decision about one attempt of one channel copy: what the
// workers and the retrier publish to the events exchange (as JSON, with
// these names), the dashboard draws live, and the history store records
// (see internal/events, which builds it from a retry.Event).
type Event struct {
	// Type is always "attempt" (events.TypeAttempt).
	Type string `json:"type"`
	// Outcome is what was decided. retry.Cancelled is recorded by the API
	// when a client cancels the notification, and by the worker that then
	// finds the copy cancelled and acks it unsent.
	Outcome retry.Outcome `json:"outcome"`
	// ID is the notification id (the AMQP message-id).
	ID string `json:"id"`
	// Channel is the routing key of the work queue, such as "email"; empty
	// when the queue is not one of the topology's work queues.
	Channel string `json:"channel"`
	// Recipient is the copy's recipient (retry.HeaderRecipient), for a
	// channel that delivers to each recipient on its own; empty otherwise.
	Recipient string `json:"recipient,omitempty"`
	// Tenant is the tenant the notification belongs to, as its copy's
	// HeaderTenant says; empty (and left out) for the default tenant.
	Tenant string `json:"tenant,omitempty"`
	// Queue is the work queue, prefixed as on the broker.
	Queue string `json:"queue"`
	// Attempt is the attempt the decision is about, 1 for the first of
	// its round: for retry.Retrying and retry.Waiting the failed one, for
	// retry.Requeued the one about to run; the history ignores it for
	// retry.Replayed.
	Attempt int `json:"attempt"`
	// Round is how often the copy was replayed from the dead-letter
	// queue; each replay starts a new round of attempts, and its
	// retry.Replayed event carries that round.
	Round int `json:"round,omitempty"`
	// DurationMS is how long the attempt took, for a worker's outcome.
	DurationMS int64 `json:"duration_ms,omitempty"`
	// DelayMS is, for retry.Retrying and retry.Failed, the wait scheduled
	// before the next attempt.
	DelayMS int64 `json:"delay_ms"`
	// Deferred is, for retry.Retrying, whether the wait is a deferral: a
	// rate limit's slot or a downstream's Retry-After, which spends no
	// retry (retry.Event.Deferred).
	Deferred bool `json:"deferred,omitempty"`
	// Error is the failure's text, where known.
	Error string `json:"error,omitempty"`
	// Reason is why a message was parked.
	Reason string `json:"reason,omitempty"`
	// At is when the decision was made.
	At time.Time `json:"at"`
	// AgeMS is the message's age at the decision: At minus the time its
	// producer published it; zero when that time is unknown.
	AgeMS int64 `json:"age_ms"`
	// WaitedMS is, for a worker's outcome, how long the message had been
	// ready in its work queue when the worker received it
	// (retry.Event.Waited); absent for the other decisions, and when the
	// message carries no time to count from.
	WaitedMS *int64 `json:"waited_ms,omitempty"`
	// Target is, for a worker's outcome, what the copy was for, finer than
	// its channel: the id of the registered webhook endpoint it went to
	// (retry.Event.Target).
	Target string `json:"target,omitempty"`
	// Service names the process that made the decision.
	Service string `json:"service"`
	// Provider is the provider the attempt went through, for a channel
	// with several (mail servers, SMS gateways); empty otherwise.
	Provider string `json:"provider,omitempty"`
}

// Rank orders the outcomes of one attempt: what happened last to an
// attempt outranks what happened on the way. It is -1 for an outcome relay
// does not know. The history orders a copy's events by round, attempt and
// Rank; the dashboard's live events carry it, so the page orders them
// the same way.
func (e Event) Rank() int {
	switch e.Outcome {
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

// CopyStatus is the status of e's copy once e is the greatest of the
// copy's events (by round, attempt and Rank): what the history derives
// from it, and what the dashboard's live events carry for the page to
// draw. It is empty for an outcome relay does not know.
//
// A requeue before any attempt (round 0, attempt 1) is a scheduled copy,
// due and on its way to its worker: it stays scheduled, and cancellable,
// until the worker reports. The history alone knows the one status an
// event cannot say by itself: a copy cancelled after it went out in the
// same round stays delivered.
func (e Event) CopyStatus() Status {
	switch e.Outcome {
	case retry.Replayed:
		return StatusQueued
	case retry.Delivered:
		return StatusDelivered
	case retry.Parked:
		return StatusParked
	case retry.Requeued:
		if e.Round == 0 && e.Attempt == 1 {
			return StatusScheduled
		}
		return StatusRetrying
	case retry.Cancelled:
		return StatusCancelled
	case retry.Failed, retry.Retrying, retry.Waiting:
		return StatusRetrying
	}
	return ""
}
