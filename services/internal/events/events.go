// Package events turns the retry pipeline's decisions into telemetry: JSON
// events published to a topic exchange for live views such as the
// dashboard, and Prometheus metrics.
//
// Every relay process that observes the pipeline (workers, the retrier)
// hands its retry.Event values to an Emitter and a Metrics through Fanout.
// The notification history is built from these events, so they are
// published persistent and confirmed, and published again when a
// connection is lost before the confirm; the pipeline itself never waits
// for them (see Emitter).
package events

import (
	"time"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/services/internal/history"
)

// TypeAttempt is the Type of every Event: one decision about one attempt.
const TypeAttempt = "attempt"

// Event is one pipeline decision as it travels on the events exchange.
type Event struct {
	// Type is always TypeAttempt.
	Type string `json:"type"`
	// Outcome is what was decided.
	Outcome retry.Outcome `json:"outcome"`
	// ID is the notification id (the AMQP message-id).
	ID string `json:"id"`
	// Channel is the routing key of the work queue, such as "email"; empty
	// when the queue is not one of the topology's work queues.
	Channel string `json:"channel"`
	// Recipient is the copy's recipient (notification.HeaderRecipient),
	// for a channel that delivers to each recipient on its own; empty
	// otherwise.
	Recipient string `json:"recipient,omitempty"`
	// Queue is the work queue, prefixed as on the broker.
	Queue string `json:"queue"`
	// Attempt is the attempt the decision is about (1 for the first of its
	// round).
	Attempt int `json:"attempt"`
	// Round is how often the copy was replayed from the dead-letter
	// queue; each replay starts a new round of attempts.
	Round int `json:"round,omitempty"`
	// DurationMS is how long the attempt took, for a worker's outcome.
	DurationMS int64 `json:"duration_ms,omitempty"`
	// DelayMS is the wait scheduled before the next attempt.
	DelayMS int64 `json:"delay_ms"`
	// Error is the failure's text, where known.
	Error string `json:"error,omitempty"`
	// Reason is why a message was parked.
	Reason string `json:"reason,omitempty"`
	// At is when the decision was made.
	At time.Time `json:"at"`
	// AgeMS is the message's age at the decision: At minus the time its
	// producer published it; zero when that time is unknown.
	AgeMS int64 `json:"age_ms"`
	// Service names the process that made the decision.
	Service string `json:"service"`
	// Provider is the provider the attempt went through, for a channel
	// with several (mail servers, SMS gateways); empty otherwise.
	Provider string `json:"provider,omitempty"`
}

// channels maps each prefixed work queue of a topology to its routing key.
type channels map[string]string

func channelsOf(t retry.Topology) channels {
	c := channels{}
	for _, r := range t.WorkRoutes() {
		c[r.Queue] = r.Key
	}
	return c
}

// event converts one pipeline decision.
func (c channels) event(service string, ev retry.Event) Event {
	out := Event{
		Type:       TypeAttempt,
		Outcome:    ev.Outcome,
		ID:         ev.MessageID,
		Channel:    c[ev.Queue],
		Recipient:  recipient(ev.Copy),
		Queue:      ev.Queue,
		Attempt:    ev.Attempt,
		Round:      ev.Round,
		DurationMS: ev.Duration.Milliseconds(),
		DelayMS:    ev.Delay.Milliseconds(),
		Error:      ev.Err,
		Reason:     ev.Reason,
		At:         ev.At,
		Service:    service,
		Provider:   ev.Via,
	}
	if age, ok := age(ev); ok {
		out.AgeMS = age.Milliseconds()
	}
	return out
}

// recipient is the recipient an event carries: none when it is longer
// than history.MaxRecipient, which only a header no relay API wrote is
// (the history would refuse the whole event).
func recipient(copy string) string {
	if len(copy) > history.MaxRecipient {
		return ""
	}
	return copy
}

// age is At minus Published, when both are known and in that order.
func age(ev retry.Event) (time.Duration, bool) {
	if ev.Published.IsZero() || ev.At.IsZero() || ev.At.Before(ev.Published) {
		return 0, false
	}
	return ev.At.Sub(ev.Published), true
}

// Fanout returns an observer that tells every non-nil observer of obs, in
// order. It suits the Observe fields of retry.Stages and retry.Consumer.
func Fanout(obs ...func(retry.Event)) func(retry.Event) {
	var live []func(retry.Event)
	for _, o := range obs {
		if o != nil {
			live = append(live, o)
		}
	}
	return func(ev retry.Event) {
		for _, o := range live {
			o(ev)
		}
	}
}
