package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/retry"
)

// MaxSchedule is how far ahead a notification may be scheduled.
const MaxSchedule = 30 * 24 * time.Hour

// when is what a request asks of its timing: send_at or delay, as sent.
type when struct {
	SendAt *string
	Delay  *string
}

// scheduled is when a scheduled notification goes out, as the 202 says.
type scheduled struct {
	// due is when the copies reach their queues.
	due time.Time
	// rounded says why due is later than the time asked for, for a
	// backend that rounds a wait; relay's four wait to the millisecond,
	// so it is empty with them.
	rounded string
}

// schedule checks a request's send_at or delay against now and the
// topology's delay backend: the zero scheduled for a notification sent at
// once; a 422 naming the field for a time that is not in the future, more
// than MaxSchedule ahead, or one the backend cannot wait for.
func schedule(t retry.Topology, w when, now time.Time) (scheduled, *Problem) {
	var (
		field string
		wait  time.Duration
	)
	bad := func(msg string) (scheduled, *Problem) {
		return scheduled{}, invalidFields(notification.Invalid{{Field: field, Message: msg}})
	}
	switch {
	case w.SendAt == nil && w.Delay == nil:
		return scheduled{}, nil
	case w.SendAt != nil && w.Delay != nil:
		field = "delay"
		return bad("give send_at or delay, not both")
	case w.SendAt != nil:
		field = "send_at"
		at, err := time.Parse(time.RFC3339Nano, *w.SendAt)
		if err != nil {
			return bad(fmt.Sprintf("%q is not an RFC 3339 time such as 2026-12-01T09:30:00Z", *w.SendAt))
		}
		if !at.After(now) {
			return bad(fmt.Sprintf("%s is not in the future (now is %s)", at.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339)))
		}
		wait = at.Sub(now)
	default:
		field = "delay"
		d, err := time.ParseDuration(*w.Delay)
		if err != nil {
			return bad(fmt.Sprintf("%q is not a duration such as 90s, 15m or 2h", *w.Delay))
		}
		if d <= 0 {
			return bad(fmt.Sprintf("%s is not a positive duration", d))
		}
		wait = d
	}
	if wait > MaxSchedule {
		return bad(fmt.Sprintf("%s ahead is more than the %s a notification may be scheduled", wait.Round(time.Second), MaxSchedule))
	}
	routes := t.WorkRoutes()
	if len(routes) == 0 {
		return bad("the API knows no work queue to schedule for")
	}
	d, err := t.Delay(routes[0].Queue, wait)
	switch {
	case errors.Is(err, retry.ErrCannotDelay):
		return bad("scheduled sends need a delay backend that delays a first delivery: " + err.Error())
	case errors.Is(err, retry.ErrDelayTooLong):
		return bad(err.Error())
	case err != nil:
		return bad(err.Error())
	}
	s := scheduled{due: now.Add(wait).Truncate(time.Millisecond)}
	if d.Wait > wait {
		s.due = now.Add(d.Wait).Truncate(time.Millisecond)
		s.rounded = fmt.Sprintf("the %s delay backend waits %s for %s", t.Backend, d.Wait, wait.Round(time.Millisecond))
	}
	return s, nil
}

// outgoingCopy is one copy of n as the API publishes it: to the ingress
// exchange, or for a scheduled notification into the delay backend, to
// reach the channel's work queue at n.DueAt. Either way it goes to its
// lane of the channel's work queue (see laneOf).
func outgoingCopy(deps Deps, ingress, channel string, n *notification.Notification, msg amqp.Publishing) (retry.Outgoing, error) {
	lane := laneOf(deps, channel, n, msg)
	if n.DueAt.IsZero() {
		return retry.Outgoing{Exchange: ingress, Key: lane.Key, Msg: msg}, nil
	}
	route, err := copyRoute(deps, channel, lane, n)
	if err != nil {
		return retry.Outgoing{}, err
	}
	return route.Outgoing(msg), nil
}

// laneOf is the lane of the channel's work queue a copy of n goes to: with
// WORK_LANES above 1, the one its receiver picks (channel.LaneKey), so
// that a receiver's copies keep to one lane; else the channel's queue.
func laneOf(deps Deps, name string, n *notification.Notification, msg amqp.Publishing) retry.Route {
	if deps.Topology.LanesOf(name) <= 1 {
		return deps.Topology.Lane(name, "")
	}
	recipient, _ := msg.Headers[notification.HeaderRecipient].(string)
	return deps.Topology.Lane(name, deps.Channels.LaneKey(n, name, recipient))
}

// copyRoute is the way through the delay backend that brings a copy of
// scheduled notification n to its lane of the channel's work queue at
// n.DueAt.
func copyRoute(deps Deps, channel string, lane retry.Route, n *notification.Notification) (retry.Delayed, error) {
	queue := lane.Queue
	if queue == "" {
		return retry.Delayed{}, fmt.Errorf("%w: no work queue is bound for channel %q", retry.ErrUnroutable, channel)
	}
	// Whole milliseconds, rounded up: the backends wait to the
	// millisecond, and a copy must never reach its queue before it is due.
	wait := max(n.DueAt.Sub(deps.Now()), 0)
	if r := wait % time.Millisecond; r > 0 {
		wait += time.Millisecond - r
	}
	route, err := deps.Topology.Delay(queue, wait)
	if err != nil {
		return retry.Delayed{}, fmt.Errorf("%w: schedule %s for %s: %w", errInternal, n.ID, channel, err)
	}
	return route, nil
}

// cancellationView is the answer of DELETE /v1/notifications/{id}.
type cancellationView struct {
	ID string `json:"id"`
	// Cancelled are the copies that will never be delivered: cancelled
	// by this request or an earlier one.
	Cancelled []notification.CopyRef `json:"cancelled"`
	// NotCancelled are the copies that had gone out, or were on their way
	// already, with their status.
	NotCancelled []notification.CopyStatus `json:"not_cancelled"`
}

// CancelStore is what DELETE /v1/notifications/{id} needs of the history
// store; *store.Store is one.
type CancelStore interface {
	Cancel(ctx context.Context, id, service string, now time.Time) (store.Cancellation, error)
}

// handleCancelNotification takes back what has not gone out of a
// notification: its copies still scheduled or waiting for a retry become
// cancelled, in the history store the workers check before they send one.
// 200 lists the cancelled copies (the same on a repeat), 404 an unknown id,
// 409 a notification with nothing left to cancel.
func handleCancelNotification(deps Deps) http.HandlerFunc {
	return deps.serve(func(w http.ResponseWriter, r *http.Request) error {
		st := deps.History
		if st == nil {
			return newProblem(ProblemHistoryUnavailable, http.StatusServiceUnavailable, "History unavailable",
				"this API runs without a history store, where cancellations are kept")
		}
		id := chi.URLParam(r, "id")
		var c store.Cancellation
		n, err := st.Get(r.Context(), id)
		switch {
		case err == nil && !sees(r.Context(), n.Tenant):
			err = store.ErrNotFound // another tenant's: as if there were none
		case err == nil:
			c, err = st.Cancel(r.Context(), id, AppID, deps.Now())
		}
		switch {
		case errors.Is(err, store.ErrNotFound):
			return newProblem(ProblemNotFound, http.StatusNotFound, "Not found",
				fmt.Sprintf("no notification %q in the history", id))
		case err != nil:
			return historyFailed(deps, err)
		}
		v := cancellationView{ID: id, Cancelled: []notification.CopyRef{}, NotCancelled: []notification.CopyStatus{}}
		for _, ref := range append(c.Already, c.Cancelled...) {
			v.Cancelled = append(v.Cancelled, notification.CopyRef{Channel: ref.Channel, Recipient: ref.Recipient})
		}
		for _, u := range c.Untouched {
			v.NotCancelled = append(v.NotCancelled, notification.CopyStatus{Channel: u.Channel, Recipient: u.Recipient, Status: u.Status})
		}
		if len(v.Cancelled) == 0 {
			p := newProblem(ProblemNothingToCancel, http.StatusConflict, "Nothing to cancel",
				fmt.Sprintf("every copy of %s has gone out or is on its way to a worker; see not_cancelled", id))
			p.Members = struct {
				NotCancelled []notification.CopyStatus `json:"not_cancelled,omitempty"`
			}{v.NotCancelled}
			return p
		}
		if len(c.Cancelled) > 0 {
			deps.Log.Info("notification cancelled", "id", id, "cancelled", len(c.Cancelled), "not_cancelled", len(c.Untouched))
		}
		writeJSON(w, http.StatusOK, v)
		return nil
	})
}
