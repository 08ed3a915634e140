package notification

import (
	"encoding/json"
	"time"

	"github.com/relay-demo/relay/retry"
)

// View is a notification as relay reports it: what the API accepted and
// what became of each of its copies. The history store reads it, the API
// answers GET /v1/notifications/{id} with it, the dashboard shows it and
// the command-line tools decode it (apiclient): one type, so that the
// four cannot drift apart.
type View struct {
	// ID is the notification id, such as "ntf_…".
	ID string `json:"id"`
	// Tenant is the tenant it belongs to; empty (and left out) for the
	// default tenant.
	Tenant string `json:"tenant,omitempty"`
	// CreatedAt is when the API accepted it; until the history has the
	// API's record of it, the time of its earliest event.
	CreatedAt time.Time `json:"created_at"`
	// DueAt is when a scheduled notification is due; nil for one sent at
	// once.
	DueAt *time.Time `json:"due_at,omitempty"`
	// Accepted is false while the history knows the notification only
	// from its events, not yet from the API's record of it.
	Accepted bool `json:"accepted"`
	// Channels are the channels it was accepted for.
	Channels []string `json:"channels"`
	// Recipients are its recipients as accepted: email addresses, phone
	// numbers, webhook URLs or endpoint ids.
	Recipients []string `json:"recipients"`
	// Payload is the notification as accepted, JSON; nil until accepted.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Copies are its copies, by channel and recipient.
	Copies []Copy `json:"copies"`
}

// Copy is one channel copy of a notification: its status and its
// attempts. A channel that delivers to each recipient on its own (email)
// has a copy per recipient, named by Recipient; a copy of a whole channel
// has none.
type Copy struct {
	// Channel is the copy's channel: "email", "webhook", "sms".
	Channel string `json:"channel"`
	// Recipient is the copy's recipient, for a channel that delivers to
	// each on its own; empty otherwise.
	Recipient string `json:"recipient,omitempty"`
	// Status is where the copy stands, derived from its attempts.
	Status Status `json:"status"`
	// Reason is why it was parked, when Status is StatusParked.
	Reason string `json:"reason,omitempty"`
	// NextAttemptAt is, when Status is StatusRetrying, when the next
	// attempt is due: the time of the last failure plus its delay; when
	// Status is StatusScheduled, when the notification is due.
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	// Round is the copy's current round: how many times it was replayed.
	Round int `json:"round"`
	// AttemptCount counts its attempts over every round (replays aside).
	AttemptCount int `json:"attempt_count"`
	// LastError is the most recent failure's text.
	LastError string `json:"last_error,omitempty"`
	// UpdatedAt is the time of the latest decision about the copy.
	UpdatedAt time.Time `json:"updated_at"`
	// Attempts are its attempts by (round, attempt).
	Attempts []Attempt `json:"attempts"`
}

// Attempt is one attempt of a copy, or (N 0) the replay that started a
// round.
type Attempt struct {
	// N is the attempt's number in its round, from 1; 0 for a replay.
	N int `json:"n"`
	// Round is the round it belongs to: how often the copy had been
	// replayed before it.
	Round int `json:"round"`
	// At is when it ended: delivered, failed or parked.
	At time.Time `json:"at"`
	// Outcome is retry.Delivered, retry.Failed, retry.Parked,
	// retry.Cancelled, or retry.Replayed for the replay that starts a
	// round.
	Outcome retry.Outcome `json:"outcome"`
	// Error is the failure's text, where known.
	Error string `json:"error,omitempty"`
	// Reason is why the copy was parked (or cancelled).
	Reason string `json:"reason,omitempty"`
	// DelayMS is, for a failed attempt, the wait scheduled before the
	// next one.
	DelayMS *int64 `json:"delay_ms,omitempty"`
	// Deferred is, for a failed attempt, whether the wait after it is a
	// deferral rather than a retry: the copy was held back by a rate
	// limit, an open circuit or a downstream's Retry-After, and the wait
	// spends none of its retries. The surfaces show it as "deferred".
	Deferred bool `json:"deferred,omitempty"`
	// WaitedMS is the time between the previous attempt's failure and
	// this attempt's start; nil for the first attempt of a round.
	WaitedMS *int64 `json:"waited_ms,omitempty"`
	// DurationMS is how long the attempt took, when known.
	DurationMS *int64 `json:"duration_ms,omitempty"`
	// Provider is the provider it went through, for a channel with
	// several (a mail server's configured name); empty otherwise.
	Provider string `json:"provider,omitempty"`
	// Service names the process that reported it. The history keeps it;
	// the answers do not show it.
	Service string `json:"-"`
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

// Filled returns v with an empty list wherever it has none, as the
// answers show it: "channels": [], never null.
func (v View) Filled() View {
	v.Channels, v.Recipients = nonNil(v.Channels), nonNil(v.Recipients)
	copies := make([]Copy, len(v.Copies))
	for i, c := range v.Copies {
		if c.Attempts == nil {
			c.Attempts = []Attempt{}
		}
		copies[i] = c
	}
	v.Copies = copies
	return v
}

// Redacted returns v, filled, as someone without a token may see it: no
// payload, no error text, and each recipient through hide.
func (v View) Redacted(hide func(recipient string) string) View {
	v = v.Filled()
	v.Payload = nil
	recipients := make([]string, len(v.Recipients))
	for i, r := range v.Recipients {
		recipients[i] = hide(r)
	}
	v.Recipients = recipients
	for i := range v.Copies {
		c := &v.Copies[i]
		c.Recipient, c.LastError = hide(c.Recipient), ""
		attempts := make([]Attempt, len(c.Attempts))
		for k, a := range c.Attempts {
			a.Error = ""
			attempts[k] = a
		}
		c.Attempts = attempts
	}
	return v
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// CopyRef names one copy of a notification: its channel and, for a
// channel that delivers to each recipient on its own, the recipient. The
// API answers with the copies it published and cancelled, and publishes
// them with its accepted record.
type CopyRef struct {
	Channel string `json:"channel"`
	// Recipient is empty for a copy that goes to all of a part's
	// recipients at once.
	Recipient string `json:"recipient,omitempty"`
}

// CopyStatus is a copy and its status, as a list or a cancellation shows
// it.
type CopyStatus struct {
	Channel string `json:"channel"`
	// Recipient is the copy's recipient, for a channel that delivers to
	// each on its own; empty otherwise.
	Recipient string `json:"recipient,omitempty"`
	Status    Status `json:"status"`
}

// Summary is one notification of a list, with one status per channel: for
// a channel with a copy per recipient, the most pressing of their
// statuses. GET /v1/notifications answers it with each copy's status
// added.
type Summary struct {
	ID         string            `json:"id"`
	Tenant     string            `json:"tenant,omitempty"`
	CreatedAt  time.Time         `json:"created_at"`
	DueAt      *time.Time        `json:"due_at,omitempty"`
	Channels   []string          `json:"channels"`
	Recipients []string          `json:"recipients"`
	Status     map[string]Status `json:"status"`
}
