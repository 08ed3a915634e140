package store

import (
	"cmp"
	"slices"
	"time"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

// copyKey names one copy: its notification, channel and recipient ("" for
// a copy of a whole channel).
type copyKey struct{ id, channel, recipient string }

func copyOf(e notification.Event) copyKey { return copyKey{e.ID, e.Channel, e.Recipient} }

// compareCopies orders copies by notification, channel and recipient: the
// order of the tables' primary keys.
func compareCopies(a, b copyKey) int {
	return cmp.Or(cmp.Compare(a.id, b.id), cmp.Compare(a.channel, b.channel), cmp.Compare(a.recipient, b.recipient))
}

// eventKey is what makes two events the same event: replaying one changes
// nothing.
type eventKey struct {
	copy           copyKey
	round, attempt int
	outcome        retry.Outcome
}

func keyOf(e notification.Event) eventKey {
	return eventKey{copyOf(e), e.Round, e.Attempt, e.Outcome}
}

// compareEvents orders the events of one copy: by round, attempt and the
// rank of the outcome, then by every other field so that the order, and
// everything derived from it, never depends on arrival.
func compareEvents(a, b notification.Event) int {
	return cmp.Or(
		cmp.Compare(a.Round, b.Round),
		cmp.Compare(a.Attempt, b.Attempt),
		cmp.Compare(a.Rank(), b.Rank()),
		a.At.Compare(b.At),
		cmp.Compare(a.Outcome, b.Outcome),
		cmp.Compare(a.Error, b.Error),
		cmp.Compare(a.Reason, b.Reason),
		cmp.Compare(a.DelayMS, b.DelayMS),
		cmp.Compare(a.DurationMS, b.DurationMS),
		cmp.Compare(a.Service, b.Service),
		cmp.Compare(b2i(a.Deferred), b2i(b.Deferred)),
	)
}

// duplicateWins reports whether b replaces a, two events with the same
// key: the smaller in compareEvents order is kept, in the database as
// here, so which copy of an event arrived first does not matter.
func duplicateWins(a, b notification.Event) bool { return compareEvents(b, a) < 0 }

// project derives the state of a copy from its events, one per key. Its
// status comes from the greatest event (its CopyStatus): the highest
// (round, attempt) and, within an attempt, the highest-ranked outcome.
func project(events []notification.Event) notification.Copy {
	evs := slices.Clone(events)
	slices.SortFunc(evs, compareEvents)
	c := notification.Copy{Status: notification.StatusQueued}
	if len(evs) == 0 {
		return c
	}
	top := evs[len(evs)-1]
	c.Round = top.Round
	c.Status = top.CopyStatus()
	switch c.Status {
	case notification.StatusParked:
		c.Reason = top.Reason
	case notification.StatusScheduled:
		// Due and on its way to its worker: it was due then.
		at := top.At
		c.NextAttemptAt = &at
	case notification.StatusCancelled:
		// A copy that went out before the cancellation reached its
		// worker stays delivered: that is what happened to it.
		for _, e := range evs {
			if e.Round == top.Round && e.Outcome == retry.Delivered {
				c.Status = notification.StatusDelivered
			}
		}
	case "":
		// An outcome relay does not know, which Record refuses.
		c.Status = notification.StatusRetrying
	}
	for _, e := range evs {
		if e.At.After(c.UpdatedAt) {
			c.UpdatedAt = e.At
		}
		if e.Error != "" {
			c.LastError = e.Error
		}
	}
	// Group by (round, attempt); the events are sorted, so groups are runs.
	for i := 0; i < len(evs); {
		j := i + 1
		for j < len(evs) && evs[j].Round == evs[i].Round && evs[j].Attempt == evs[i].Attempt {
			j++
		}
		if a, ok := attemptOf(evs[i:j]); ok {
			c.Attempts = append(c.Attempts, a)
		}
		i = j
	}
	for k := range c.Attempts {
		a := &c.Attempts[k]
		if a.Outcome != retry.Replayed {
			c.AttemptCount++
		}
		if k == 0 {
			continue
		}
		prev := c.Attempts[k-1]
		if prev.Round != a.Round || prev.N != a.N-1 || prev.Outcome != retry.Failed || a.N < 2 {
			continue
		}
		start := a.At
		if a.DurationMS != nil {
			start = start.Add(-time.Duration(*a.DurationMS) * time.Millisecond)
		}
		w := start.Sub(prev.At).Milliseconds()
		a.WaitedMS = &w
	}
	if c.Status == notification.StatusRetrying {
		// The next attempt is due the latest failure's delay after it.
		for k := len(c.Attempts) - 1; k >= 0; k-- {
			a := c.Attempts[k]
			if a.Round != c.Round {
				break
			}
			if a.Outcome == retry.Failed {
				next := a.At
				if a.DelayMS != nil {
					next = next.Add(time.Duration(*a.DelayMS) * time.Millisecond)
				}
				c.NextAttemptAt = &next
				break
			}
		}
	}
	return c
}

// attemptOf derives the timeline row of one (round, attempt) from its
// events, sorted. An attempt that only has a "requeued" event has not run
// yet and has no row.
func attemptOf(evs []notification.Event) (notification.Attempt, bool) {
	byOutcome := map[retry.Outcome]*notification.Event{}
	for i := range evs {
		byOutcome[evs[i].Outcome] = &evs[i]
	}
	first := evs[0]
	a := notification.Attempt{Round: first.Round, N: first.Attempt}
	if r := byOutcome[retry.Replayed]; r != nil {
		a.N, a.At, a.Outcome, a.Service = 0, r.At, retry.Replayed, r.Service
		return a, true
	}
	// When the attempt ended: the earliest of its decisions, which is the
	// worker's own when that arrived. "requeued" is about the attempt
	// before it starts, so it does not count.
	var at *notification.Event
	for i := range evs {
		if evs[i].Outcome != retry.Requeued && (at == nil || evs[i].At.Before(at.At)) {
			at = &evs[i]
		}
	}
	if at == nil {
		return notification.Attempt{}, false
	}
	a.At, a.Service = at.At, at.Service
	top := evs[len(evs)-1]
	switch top.Outcome {
	case retry.Delivered, retry.Parked, retry.Cancelled:
		a.Outcome = top.Outcome
	default:
		a.Outcome = retry.Failed
	}
	if d := byOutcome[retry.Delivered]; d != nil && a.Outcome == retry.Cancelled {
		a.Outcome = retry.Delivered
	}
	if p := byOutcome[retry.Parked]; p != nil && a.Outcome == retry.Parked {
		a.Reason = p.Reason
	}
	if c := byOutcome[retry.Cancelled]; c != nil && a.Outcome == retry.Cancelled {
		a.Reason = c.Reason
	}
	for _, o := range []retry.Outcome{retry.Failed, retry.Parked, retry.Retrying, retry.Waiting, retry.Delivered} {
		if e := byOutcome[o]; e != nil && e.Error != "" {
			a.Error = e.Error
			break
		}
	}
	if a.Outcome == retry.Failed {
		// The retrier's delay is the one it scheduled (jittered, or as the
		// downstream asked); the worker's is the policy's, a fallback.
		if e := byOutcome[retry.Retrying]; e != nil {
			d := e.DelayMS
			a.DelayMS, a.Deferred = &d, e.Deferred
		} else if e := byOutcome[retry.Failed]; e != nil {
			d := e.DelayMS
			a.DelayMS = &d
		}
	}
	// The worker's own outcome says where the attempt went.
	for _, o := range []retry.Outcome{retry.Delivered, retry.Failed, retry.Parked} {
		if e := byOutcome[o]; e != nil && e.Provider != "" {
			a.Provider = e.Provider
			break
		}
	}
	for _, o := range []retry.Outcome{retry.Delivered, retry.Failed, retry.Parked} {
		if e := byOutcome[o]; e != nil && e.DurationMS > 0 {
			d := e.DurationMS
			a.DurationMS = &d
			break
		}
	}
	return a, true
}

// b2i orders false before true.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
