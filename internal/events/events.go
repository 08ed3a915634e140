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

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/retry"
)

// TypeAttempt is the Type of every notification.Event: one decision about
// one attempt.
const TypeAttempt = "attempt"

// channels maps each prefixed work queue of a topology to its routing key.
type channels map[string]string

func channelsOf(t retry.Topology) channels {
	c := channels{}
	for _, r := range t.WorkRoutes() {
		// A lane's events name its route's channel.
		route, _ := t.RouteOf(r.Queue)
		c[r.Queue] = route.Key
	}
	return c
}

// event converts one pipeline decision.
func (c channels) event(service string, ev retry.Event) notification.Event {
	out := notification.Event{
		Type:       TypeAttempt,
		Outcome:    ev.Outcome,
		ID:         ev.MessageID,
		Channel:    c[ev.Queue],
		Recipient:  recipient(ev.Copy),
		Tenant:     ev.Tenant,
		Queue:      ev.Queue,
		Attempt:    ev.Attempt,
		Round:      ev.Round,
		DurationMS: ev.Duration.Milliseconds(),
		DelayMS:    ev.Delay.Milliseconds(),
		Deferred:   ev.Deferred,
		Error:      ev.Err,
		Reason:     ev.Reason,
		At:         ev.At,
		Service:    service,
		Provider:   ev.Via,
		Target:     ev.Target,
	}
	if age, ok := age(ev); ok {
		out.AgeMS = age.Milliseconds()
	}
	if !ev.Received.IsZero() && !ev.Published.IsZero() {
		w := ev.Waited.Milliseconds()
		out.WaitedMS = &w
	}
	return out
}

// recipient is the recipient an event carries: none when it is longer
// than store.MaxRecipient, which only a header no relay API wrote is
// (the history would refuse the whole event).
func recipient(copy string) string {
	if len(copy) > store.MaxRecipient {
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
