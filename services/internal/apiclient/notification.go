package apiclient

import (
	"encoding/json"
	"time"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/services/internal/notification"
)

// Notification is the API's answer to GET /v1/notifications/{id}.
type Notification struct {
	// ID is the notification's id.
	ID string `json:"id"`
	// CreatedAt is when the API accepted it.
	CreatedAt time.Time `json:"created_at"`
	// Accepted is false while the history knows it only from its attempts.
	Accepted bool `json:"accepted"`
	// Channels are the channels it was accepted for.
	Channels []string `json:"channels"`
	// Recipients are its email addresses, phone numbers and webhook URLs.
	Recipients []string `json:"recipients"`
	// Payload is the notification as accepted.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Copies are its channel copies.
	Copies []Copy `json:"copies"`
}

// Copy is one channel copy of a notification: its status and attempts.
type Copy struct {
	// Channel is "email", "webhook" or "sms".
	Channel string `json:"channel"`
	// Recipient is the copy's recipient, for a channel that delivers to
	// each recipient on its own (email); empty otherwise.
	Recipient string `json:"recipient,omitempty"`
	// Status is the copy's status.
	Status notification.Status `json:"status"`
	// Reason is why it was parked.
	Reason string `json:"reason,omitempty"`
	// NextAttemptAt is, while retrying, when the next attempt is due.
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	// Round is how often it has been replayed.
	Round int `json:"round"`
	// AttemptCount counts its attempts over every round.
	AttemptCount int `json:"attempt_count"`
	// LastError is the most recent failure's text.
	LastError string `json:"last_error,omitempty"`
	// UpdatedAt is the time of the latest decision about it.
	UpdatedAt time.Time `json:"updated_at"`
	// Attempts are its attempts by (round, attempt).
	Attempts []Attempt `json:"attempts"`
}

// Attempt is one attempt of a copy, or (N 0) the replay that started a
// round.
type Attempt struct {
	// N is the attempt's number in its round, from 1; 0 for a replay.
	N int `json:"n"`
	// Round is how often the copy had been replayed before it.
	Round int `json:"round"`
	// At is when it ended.
	At time.Time `json:"at"`
	// Outcome is what became of the attempt: retry.Delivered,
	// retry.Failed, retry.Parked, retry.Cancelled, or retry.Replayed for
	// the replay that starts a round.
	Outcome retry.Outcome `json:"outcome"`
	// Error is the failure's full text.
	Error string `json:"error,omitempty"`
	// Reason is why the copy was parked.
	Reason string `json:"reason,omitempty"`
	// DelayMS is, for a failed attempt, the wait scheduled before the next.
	DelayMS *int64 `json:"delay_ms,omitempty"`
	// WaitedMS is how long the copy waited between the previous attempt's
	// failure and this attempt.
	WaitedMS *int64 `json:"waited_ms,omitempty"`
	// DurationMS is how long the attempt took.
	DurationMS *int64 `json:"duration_ms,omitempty"`
	// Provider is the provider the attempt went through, for a channel
	// with several; empty otherwise.
	Provider string `json:"provider,omitempty"`
}

// Final reports whether the attempt ended its copy's round: delivered,
// parked or cancelled.
func (a Attempt) Final() bool {
	return a.Outcome == retry.Delivered || a.Outcome == retry.Parked || a.Outcome == retry.Cancelled
}

// Decided reports whether the outcome of c.Attempts[i] is known for good.
//
// A failed attempt is first reported by the worker, before the retry
// stage decides between another attempt (and its delay) and parking the
// copy; until then the failure's delay is at best the worker's guess, and
// the attempt may yet turn out parked. The decision shows as an attempt
// after it, or as a decision about the copy later than the failure
// (UpdatedAt after At) that left the attempt failed. Every other outcome
// is final as soon as it shows.
func (c Copy) Decided(i int) bool {
	a := c.Attempts[i]
	if a.Outcome != retry.Failed {
		return true
	}
	return i < len(c.Attempts)-1 || c.UpdatedAt.After(a.At)
}
