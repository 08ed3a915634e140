package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Rate is a limit of Per messages a second with bursts of Burst, shared
// by every process that takes from the same store under the same key.
type Rate struct {
	Per   float64
	Burst int
}

// interval is the time between two messages at the rate.
func (r Rate) interval() time.Duration {
	return time.Duration(float64(time.Second) / r.Per)
}

// TicketGrace is how late a ticket's holder may come back and still
// send on its slot; later, it takes a new slot, as a newcomer would.
// Sends on a ticket happen within TicketGrace of their slot, so a
// one-second window sees at most Per × (1s + TicketGrace) + Burst.
const TicketGrace = 50 * time.Millisecond

// ticketTTL is how long a ticket nobody came back for is kept.
const ticketTTL = time.Hour

// TakeRate asks the limit key for a slot for ticket (a name of the send
// that stays the same when it comes back, such as its message id), and
// returns how long the send must wait for it. A wait of up to hold is the
// caller's to wait itself: the slot is its own, to use after the wait.
// A longer wait is held under the ticket: the send comes back with the
// same ticket at most hold before its slot, and no later than TicketGrace
// after it, and is given the slot then.
//
// hold lets a send that comes back a little early (it returns through
// the delay backend, whose hops take time) wait out the rest in hand
// rather than be deferred again.
//
// The limit is a GCRA cell (one theoretical arrival time per key) updated
// in one transaction, so every worker replica sharing the store shares
// it. On PostgreSQL the database's clock is the one clock of every
// replica; on SQLite, which serves one host, the host's clock (now).
func (s *Store) TakeRate(ctx context.Context, key, ticket string, r Rate, hold time.Duration, now time.Time) (time.Duration, error) {
	if r.Per <= 0 || r.Burst < 1 {
		return 0, fmt.Errorf("rate %q: %w: %g/s with burst %d", key, ErrInvalid, r.Per, r.Burst)
	}
	var wait time.Duration
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		wait, err = s.takeRate(ctx, tx, key, ticket, r, hold, now)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("take from rate %q: %w", key, err)
	}
	return wait, nil
}

func (s *Store) takeRate(ctx context.Context, tx *sql.Tx, key, ticket string, r Rate, hold time.Duration, now time.Time) (time.Duration, error) {
	if s.d == postgres {
		if err := tx.QueryRowContext(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
			return 0, err
		}
	}
	at := now.UnixMicro()
	// The row lock (PostgreSQL) or the write lock (SQLite) makes the
	// replicas take turns.
	if _, err := tx.ExecContext(ctx, s.d.q(`INSERT INTO rate_limits (key, tat) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`), key, at); err != nil {
		return 0, err
	}
	lock := ""
	if s.d == postgres {
		lock = " FOR UPDATE"
	}
	var tat int64
	if err := tx.QueryRowContext(ctx, s.d.q(`SELECT tat FROM rate_limits WHERE key = $1`+lock), key).Scan(&tat); err != nil {
		return 0, err
	}
	var slot int64
	err := tx.QueryRowContext(ctx, s.d.q(`SELECT slot FROM rate_tickets WHERE key = $1 AND ticket = $2`), key, ticket).Scan(&slot)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return 0, err
	case slot-at > hold.Microseconds():
		return time.Duration(slot-at) * time.Microsecond, nil // back early: the slot is still ahead
	default:
		if _, err := tx.ExecContext(ctx, s.d.q(`DELETE FROM rate_tickets WHERE key = $1 AND ticket = $2`), key, ticket); err != nil {
			return 0, err
		}
		if at-slot <= TicketGrace.Microseconds() {
			return time.Duration(max(slot-at, 0)) * time.Microsecond, nil
		}
		// Too late for its slot, which went unused: sending now could
		// crowd the slots after it.
	}
	interval := r.interval().Microseconds()
	tat = max(tat, at)
	slot = tat - int64(r.Burst-1)*interval
	if _, err := tx.ExecContext(ctx, s.d.q(`UPDATE rate_limits SET tat = $2 WHERE key = $1`), key, tat+interval); err != nil {
		return 0, err
	}
	if slot-at <= hold.Microseconds() {
		return time.Duration(max(slot-at, 0)) * time.Microsecond, nil
	}
	if _, err := tx.ExecContext(ctx, s.d.q(`INSERT INTO rate_tickets (key, ticket, slot) VALUES ($1, $2, $3)`), key, ticket, slot); err != nil {
		return 0, err
	}
	// Tickets whose holders never came back (parked, replayed under
	// another round) go after a while; the index makes this cheap.
	if _, err := tx.ExecContext(ctx, s.d.q(`DELETE FROM rate_tickets WHERE key = $1 AND slot < $2`), key, at-ticketTTL.Microseconds()); err != nil {
		return 0, err
	}
	return time.Duration(slot-at) * time.Microsecond, nil
}
