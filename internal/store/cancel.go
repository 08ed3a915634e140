package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

// CancelReason is the reason a copy cancelled through the API carries.
const CancelReason = "cancelled by the client"

// Cancellation is what Cancel did to a notification's copies.
type Cancellation struct {
	// Cancelled are the copies it cancelled now.
	Cancelled []notification.CopyRef
	// Already are the copies cancelled before: asking again changes
	// nothing.
	Already []notification.CopyRef
	// Untouched are the copies it could not cancel, with their status:
	// delivered (also one a worker gave back delivered, ReleaseCopy,
	// before the history heard of it) or parked, queued for their first
	// attempt, on their way to a worker already, or
	// notification.StatusSending, held by a worker sending it (HoldCopy).
	Untouched []notification.CopyStatus
}

// Cancel takes back every copy of notification id that has not gone out
// yet: each copy still notification.StatusScheduled or notification.StatusRetrying gets an
// retry.Cancelled event for its next attempt, and becomes
// notification.StatusCancelled. Workers take a copy (HoldCopy) before they send a
// scheduled or retried copy, so none of these is delivered, even one
// whose message is already on its way; a copy a worker holds is not
// cancelled and is answered in Untouched as notification.StatusSending,
// and one a worker gave back delivered as notification.StatusDelivered,
// however far behind the history is. It is idempotent; an unknown id is
// an error wrapping ErrNotFound.
func (s *Store) Cancel(ctx context.Context, id, service string, now time.Time) (Cancellation, error) {
	var out Cancellation
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		out = Cancellation{}
		var accepted bool
		err := tx.QueryRowContext(ctx, s.d.q(`SELECT accepted FROM notifications WHERE id = $1`), id).Scan(&accepted)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("notification %q: %w", id, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("read notification %q: %w", id, err)
		}
		type open struct {
			ref   notification.CopyRef
			round int
			// after is the last attempt the copy's worker gave it back
			// from, failed, in round.
			after int
		}
		var todo []open
		rows, err := tx.QueryContext(ctx, s.d.q(`SELECT channel, recipient, status, round FROM copies WHERE notification_id = $1 ORDER BY channel, recipient`), id)
		if err != nil {
			return fmt.Errorf("read copies of %q: %w", id, err)
		}
		var candidates []open
		err = each(rows, func() error {
			var c notification.CopyStatus
			var round int
			if err := rows.Scan(&c.Channel, &c.Recipient, &c.Status, &round); err != nil {
				return err
			}
			ref := notification.CopyRef{Channel: c.Channel, Recipient: c.Recipient}
			switch c.Status {
			case notification.StatusScheduled, notification.StatusRetrying:
				candidates = append(candidates, open{ref: ref, round: round})
			case notification.StatusCancelled:
				out.Already = append(out.Already, ref)
			default:
				out.Untouched = append(out.Untouched, c)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("read copies of %q: %w", id, err)
		}
		// A copy a worker holds is on its way, and one a worker gave back
		// delivered has gone out, whatever the history says yet: neither is
		// cancelled, and the worker, asking after this, finds no copy it
		// may not send.
		for _, o := range candidates {
			h, err := s.holdForCancel(ctx, tx, id, o.ref, now)
			if err != nil {
				return err
			}
			if h.status != "" {
				out.Untouched = append(out.Untouched, notification.CopyStatus{Channel: o.ref.Channel, Recipient: o.ref.Recipient, Status: h.status})
				continue
			}
			// An attempt that failed before the history heard of it: the
			// cancellation is of the attempt after it.
			switch {
			case h.round > o.round:
				o.round, o.after = h.round, h.attempt
			case h.round == o.round:
				o.after = h.attempt
			}
			todo = append(todo, o)
		}
		if len(todo) == 0 {
			return nil
		}
		at := micro(now)
		rowsOut := make([]any, 0, len(eventTypes)*len(todo))
		affected := map[copyKey]bool{}
		for _, o := range todo {
			// The attempt that would have come next: a "requeued" event
			// names it already, every other the one that ended.
			var last int
			if err := tx.QueryRowContext(ctx, s.d.q(`SELECT COALESCE(MAX(attempt), 0) FROM events
				WHERE notification_id = $1 AND channel = $2 AND recipient = $3 AND round = $4 AND outcome <> $5`),
				id, o.ref.Channel, o.ref.Recipient, o.round, string(retry.Requeued)).Scan(&last); err != nil {
				return fmt.Errorf("read events of %q: %w", id, err)
			}
			last = max(last, o.after)
			rowsOut = append(rowsOut, id, o.ref.Channel, o.ref.Recipient, o.round, last+1, string(retry.Cancelled), s.d.ts(at),
				"", CancelReason, int64(0), int64(0), service, "", s.d.bool(false))
			affected[copyKey{id, o.ref.Channel, o.ref.Recipient}] = true
			out.Cancelled = append(out.Cancelled, o.ref)
		}
		if err := execRows(ctx, tx, s.d,
			`INSERT INTO events (notification_id, channel, recipient, round, attempt, outcome, at, error, reason, delay_ms, duration_ms, service, provider, deferred) `,
			` ON CONFLICT (notification_id, channel, recipient, round, attempt, outcome) DO NOTHING`,
			eventTypes, rowsOut); err != nil {
			return fmt.Errorf("insert cancellations: %w", err)
		}
		all, err := s.loadEvents(ctx, tx, []string{id}, affected)
		if err != nil {
			return err
		}
		return s.saveCopies(ctx, tx, all)
	})
	if err != nil {
		return Cancellation{}, err
	}
	slices.SortFunc(out.Cancelled, func(a, b notification.CopyRef) int {
		return compareCopies(copyKey{id, a.Channel, a.Recipient}, copyKey{id, b.Channel, b.Recipient})
	})
	return out, nil
}

// Cancelled reports whether a copy of notification id was cancelled: what
// a worker asks before it sends a scheduled or retried copy. It reads the
// events, which only ever grow, so the answer cannot go back to false.
func (s *Store) Cancelled(ctx context.Context, id, channel, recipient string) (bool, error) {
	var one int
	err := s.read.QueryRowContext(ctx, s.d.q(`SELECT 1 FROM events
		WHERE notification_id = $1 AND channel = $2 AND recipient = $3 AND outcome = $4 LIMIT 1`),
		id, channel, recipient, string(retry.Cancelled)).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read the cancellation of %q: %w", id, err)
	}
	return true, nil
}

// cancelHold is what holdForCancel found: the copy taken for the
// cancellation (status ""), or the status a copy it could not take is
// answered with. round and attempt name the failed attempt a worker gave
// the copy back from, if it did.
type cancelHold struct {
	status         notification.Status
	round, attempt int
}

// holdForCancel takes copy ref of notification id for a cancellation,
// for good, unless a worker holds it and its hold has not lapsed
// (answered notification.StatusSending), or a worker gave it back
// delivered (notification.StatusDelivered).
func (s *Store) holdForCancel(ctx context.Context, tx *sql.Tx, id string, ref notification.CopyRef, now time.Time) (cancelHold, error) {
	var h cancelHold
	var was string
	err := tx.QueryRowContext(ctx, s.d.q(`SELECT state, round, attempt FROM copy_holds
		WHERE notification_id = $1 AND channel = $2 AND recipient = $3`), id, ref.Channel, ref.Recipient).Scan(&was, &h.round, &h.attempt)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return cancelHold{}, fmt.Errorf("read the hold on the %s copy of %q: %w", ref.Channel, id, err)
	}
	if was != string(retry.Failed) {
		h.round, h.attempt = 0, 0
	}
	// The read above only numbers the cancellation; this one statement
	// decides, against a worker's HoldCopy or ReleaseCopy at the same
	// moment.
	var state string
	err = tx.QueryRowContext(ctx, s.d.q(`INSERT INTO copy_holds (notification_id, channel, recipient, state, until)
		VALUES ($1, $2, $3, 'cancelled', $5)
		ON CONFLICT (notification_id, channel, recipient) DO UPDATE SET state = 'cancelled', until = excluded.until, round = 0, attempt = 0
		WHERE copy_holds.state IN ('cancelled', 'failed') OR (copy_holds.state = 'sending' AND copy_holds.until < $4)
		RETURNING state`), id, ref.Channel, ref.Recipient, now.UnixMicro(), micro(now).UnixMicro()).Scan(&state)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return cancelHold{}, fmt.Errorf("hold %s copy of %q: %w", ref.Channel, id, err)
	default:
		return h, nil
	}
	if err := tx.QueryRowContext(ctx, s.d.q(`SELECT state FROM copy_holds
		WHERE notification_id = $1 AND channel = $2 AND recipient = $3`), id, ref.Channel, ref.Recipient).Scan(&state); err != nil {
		return cancelHold{}, fmt.Errorf("read the hold on the %s copy of %q: %w", ref.Channel, id, err)
	}
	if state == string(retry.Delivered) {
		return cancelHold{status: notification.StatusDelivered}, nil
	}
	return cancelHold{status: notification.StatusSending}, nil
}

// HoldCopy is what a worker asks before it sends a copy of a scheduled
// notification or a retry: it takes the copy for hold (its longest
// attempt; the hold lapses after it, should the worker die), unless the
// copy was cancelled, which it reports. A cancellation while the worker
// holds the copy leaves it alone and says it is on its way. The worker
// calls ReleaseCopy once the attempt ended, delivered or not.
func (s *Store) HoldCopy(ctx context.Context, id, channel, recipient string, hold time.Duration, now time.Time) (cancelled bool, err error) {
	var state string
	err = s.write.QueryRowContext(ctx, s.d.q(`INSERT INTO copy_holds (notification_id, channel, recipient, state, until)
		VALUES ($1, $2, $3, 'sending', $4)
		ON CONFLICT (notification_id, channel, recipient) DO UPDATE SET state = 'sending', until = excluded.until
		WHERE copy_holds.state <> 'cancelled'
		RETURNING state`), id, channel, recipient, now.Add(hold).UnixMicro()).Scan(&state)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("hold the %s copy of %q: %w", channel, id, err)
	}
	return false, nil
}

// AttemptEnd is how the attempt at a copy a worker held ended, as
// ReleaseCopy records it.
type AttemptEnd struct {
	// Round and Attempt name the attempt, as its event does.
	Round, Attempt int
	// Delivered says the copy went out. An attempt that did not deliver
	// leaves the copy to its next attempt, which a cancellation may take.
	Delivered bool
}

// ReleaseCopy gives back a copy a worker took with HoldCopy, once its
// attempt ended, and records on it, in the same statement, how the
// attempt ended. The history hears of the attempt later, through the
// events; until it does, Cancel reads the outcome here: a copy given back
// delivered is answered as delivered, never cancelled, and a cancellation
// after a failed attempt cancels the copy's next attempt.
func (s *Store) ReleaseCopy(ctx context.Context, id, channel, recipient string, end AttemptEnd, now time.Time) error {
	state := retry.Failed
	if end.Delivered {
		state = retry.Delivered
	}
	if _, err := s.write.ExecContext(ctx, s.d.q(`UPDATE copy_holds SET state = $4, until = $5, round = $6, attempt = $7
		WHERE notification_id = $1 AND channel = $2 AND recipient = $3 AND state = 'sending'`),
		id, channel, recipient, string(state), micro(now).UnixMicro(), end.Round, end.Attempt); err != nil {
		return fmt.Errorf("release the %s copy of %q: %w", channel, id, err)
	}
	return nil
}
