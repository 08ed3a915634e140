package worker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/services/internal/history"
	"github.com/relay-demo/relay/services/internal/notification"
)

// Cancellations says whether a copy of a notification was cancelled;
// *history.Store is one.
type Cancellations interface {
	Cancelled(ctx context.Context, id, channel, recipient string) (bool, error)
}

// checkCancelled asks cancellations, before next sends a copy of a
// scheduled notification or a retry, whether the copy was cancelled: such
// a copy is acked unsent and reported cancelled (retry.Cancel), even when
// the cancellation came after its message left its wait. A first attempt
// at a notification sent at once is not asked about: the API never
// cancels one. When the store cannot answer, the attempt fails and is
// retried rather than risk sending what a client took back.
//
// Cancellations live in the API's history store, which every API replica
// writes and every worker reads (as the webhook endpoints do): a
// cancellation reaches every worker replica at once, and it is durable.
// Nothing needs to reach the broker: a cancelled message stays where it
// waits until it is due, and is dropped then.
func checkCancelled(name string, c Cancellations, next retry.HandlerFunc) retry.HandlerFunc {
	return func(ctx context.Context, m *retry.Message) error {
		_, scheduled := m.Headers[notification.HeaderDueAt]
		if !scheduled && m.Attempt <= 1 {
			return next(ctx, m)
		}
		cancelled, err := c.Cancelled(ctx, m.ID, name, retry.Recipient(m.Headers))
		if err != nil {
			return fmt.Errorf("cannot tell whether %s was cancelled: %w", m.ID, err)
		}
		if cancelled {
			return retry.Cancel(errors.New(history.CancelReason))
		}
		return next(ctx, m)
	}
}

// historyCancellations opens the history store on first use, so a worker
// starts, and sends notifications not scheduled, while it is down.
type historyCancellations struct {
	dsn string

	mu    sync.Mutex
	store *history.Store
}

func (h *historyCancellations) Cancelled(ctx context.Context, id, channel, recipient string) (bool, error) {
	h.mu.Lock()
	if h.store == nil {
		s, err := history.Open(ctx, h.dsn)
		if err != nil {
			h.mu.Unlock()
			return false, fmt.Errorf("open the history store: %w", err)
		}
		h.store = s
	}
	s := h.store
	h.mu.Unlock()
	return s.Cancelled(ctx, id, channel, recipient)
}

func (h *historyCancellations) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.store == nil {
		return nil
	}
	return h.store.Close()
}

// historyDSN is the store cancellations are read from: HISTORY_DSN, or
// the SQLite file in DATA_DIR, as the API opens it.
func (c Config) historyDSN() string {
	if c.HistoryDSN != "" {
		return c.HistoryDSN
	}
	return filepath.Join(c.DataDir, "history.db")
}
