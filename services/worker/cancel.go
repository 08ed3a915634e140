package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/retry"
)

// Cancellations holds copies of notifications for a worker sending them,
// against a cancellation at the same moment; *store.Store is one.
type Cancellations interface {
	// HoldCopy takes the copy for hold, or reports it cancelled.
	HoldCopy(ctx context.Context, id, channel, recipient string, hold time.Duration, now time.Time) (cancelled bool, err error)
	// ReleaseCopy gives it back once the attempt ended, and records how.
	ReleaseCopy(ctx context.Context, id, channel, recipient string, end store.AttemptEnd, now time.Time) error
}

// copyHold is how long a copy held for an attempt stays held should its
// worker die before it gives it back: longer than any attempt's timeout.
const copyHold = 5 * time.Minute

// checkCancelled holds, before next sends a copy of a scheduled
// notification or a retry, the copy in the Cancellations holds returns: a
// copy cancelled before is acked unsent and reported cancelled
// (retry.Cancel), even when the cancellation came after its message left
// its wait; a cancellation while the copy is held answers that it is on
// its way, never that it was cancelled, so what the client is told is what
// happens. A first attempt at a notification sent at once is not held: the
// API never cancels one. When the store cannot answer, the attempt fails
// and is retried rather than risk sending what a client took back.
//
// Cancellations live in the API's history store (holds opens the
// process's on first use), which every API replica writes and every worker
// reads (as the webhook endpoints do): a cancellation reaches every worker
// replica at once, and it is durable. Nothing needs to reach the broker: a
// cancelled message stays where it waits until it is due, and is dropped
// then.
func checkCancelled(name string, holds func(ctx context.Context) (Cancellations, error), next retry.HandlerFunc) retry.HandlerFunc {
	return func(ctx context.Context, m *retry.Message) (err error) {
		_, scheduled := m.Headers[notification.HeaderDueAt]
		if !scheduled && m.Attempt <= 1 {
			return next(ctx, m)
		}
		// The pipeline's CopyHeader, read as the pipeline reads it.
		recipient := retry.Topology{CopyHeader: notification.HeaderRecipient}.Copy(m.Headers)
		c, err := holds(ctx)
		var cancelled bool
		if err == nil {
			cancelled, err = c.HoldCopy(ctx, m.ID, name, recipient, copyHold, time.Now())
		}
		if err != nil {
			return fmt.Errorf("cannot tell whether %s was cancelled: %w", m.ID, err)
		}
		if cancelled {
			return retry.Cancel(errors.New(store.CancelReason))
		}
		// Given back with how the attempt ended (a panic is a failure)
		// before the pipeline acks it: the history hears of the attempt
		// later, through the events, and a cancellation in between reads
		// the outcome here. A hold not given back lapses after copyHold:
		// until then a cancellation answers that the copy is on its way.
		ended := false
		defer func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			end := store.AttemptEnd{Round: m.Round, Attempt: m.Attempt, Delivered: ended && err == nil}
			if rerr := c.ReleaseCopy(rctx, m.ID, name, recipient, end, time.Now()); rerr != nil {
				slog.Warn("release a copy after its attempt", "id", m.ID, "channel", name, "error", rerr)
			}
		}()
		err = next(ctx, m)
		ended = true
		return err
	}
}
