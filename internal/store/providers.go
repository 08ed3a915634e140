package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// ProviderDecl is a provider as a worker declares it at start: its place
// in its channel's list and its limit.
type ProviderDecl struct {
	Name string
	// Rate is its limit; nil for none.
	Rate *Rate
}

// Provider is one provider of a channel as the workers share it: the
// circuit the last of them recorded, and its limit as it stands.
type Provider struct {
	Channel, Name string
	// Position is its place in its channel's list, from 0.
	Position int
	// Rate is its limit; nil for none.
	Rate *Rate
	// Circuit is its circuit as a worker last recorded it; its State is
	// CircuitClosed for one never recorded.
	Circuit Circuit
	// SeenAt is when a worker last declared it or recorded its circuit.
	SeenAt time.Time
	// NextSlot is how long a send asking its limit for a slot now would
	// wait; zero with no limit or a slot free.
	NextSlot time.Duration
	// Waiting counts the sends deferred for a slot still ahead.
	Waiting int
}

// DeclareProviders records the providers of channel, in order, as a
// worker opening it sees them at now, and returns the circuits the store
// holds for them, by name. The circuits recorded stay; a provider no
// longer declared stays too, its SeenAt telling its age.
func (s *Store) DeclareProviders(ctx context.Context, channel string, ps []ProviderDecl, now time.Time) (map[string]Circuit, error) {
	circuits := map[string]Circuit{}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		for i, p := range ps {
			rate, burst := 0.0, 0
			if p.Rate != nil {
				rate, burst = p.Rate.Per, p.Rate.Burst
			}
			_, err := tx.ExecContext(ctx, s.d.q(`INSERT INTO providers (channel, name, position, rate, burst, seen_at)
				VALUES ($1, $2, $3, $4, $5, $6)
				ON CONFLICT (channel, name) DO UPDATE SET position = $3, rate = $4, burst = $5, seen_at = $6`),
				channel, p.Name, i, rate, burst, s.d.ts(micro(now)))
			if err != nil {
				return err
			}
		}
		rows, err := tx.QueryContext(ctx, s.d.q(`SELECT name, circuit_state, circuit_since, circuit_error, failing_since, circuit_updated_at
			FROM providers WHERE channel = $1`), channel)
		if err != nil {
			return err
		}
		return each(rows, func() error {
			var (
				name string
				c    Circuit
			)
			if err := rows.Scan(&name, &c.State, nullTimeCol{&c.Since}, &c.LastError, nullTimeCol{&c.FailingSince}, nullTimeCol{&c.UpdatedAt}); err != nil {
				return err
			}
			circuits[name] = c
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("declare the providers of %q: %w", channel, err)
	}
	return circuits, nil
}

// RecordProviderCircuit records a worker's view of a provider's circuit
// and returns the circuit as stored: FailingSince is the earliest failure
// of the run under way, whichever worker saw it. A provider never
// declared is an error wrapping ErrNotFound.
func (s *Store) RecordProviderCircuit(ctx context.Context, channel, name string, c CircuitChange) (Circuit, error) {
	switch c.State {
	case CircuitClosed, CircuitOpen, CircuitHalfOpen:
	default:
		return Circuit{}, fmt.Errorf("record circuit of provider %s %q: %w: state %q", channel, name, ErrInvalid, c.State)
	}
	failing, args := "NULL", []any{channel, name, c.State, s.d.ts(micro(c.Since)), c.LastError, s.d.ts(micro(c.At))}
	if c.FailingSince != nil {
		failing = "CASE WHEN failing_since IS NULL OR failing_since > $7 THEN $7 ELSE failing_since END"
		args = append(args, s.d.ts(micro(*c.FailingSince)))
	}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return Circuit{}, fmt.Errorf("record circuit of provider %s %q: %w", channel, name, err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	// A write that changes nothing locks the row (PostgreSQL) or the
	// database (SQLite) before the state is read: workers recording at
	// once take turns, so only the one that finds the circuit closed and
	// opens it reports Opened.
	var was string
	err = tx.QueryRowContext(ctx, s.d.q(`UPDATE providers SET seen_at = seen_at WHERE channel = $1 AND name = $2 RETURNING circuit_state`),
		channel, name).Scan(&was)
	if errors.Is(err, sql.ErrNoRows) {
		return Circuit{}, fmt.Errorf("provider %s %q: %w", channel, name, ErrNotFound)
	}
	if err != nil {
		return Circuit{}, fmt.Errorf("record circuit of provider %s %q: %w", channel, name, err)
	}
	var out Circuit
	err = tx.QueryRowContext(ctx, s.d.q(`UPDATE providers SET circuit_state = $3, circuit_since = $4,
		circuit_error = CASE WHEN $5 = '' THEN circuit_error ELSE $5 END, failing_since = `+failing+`,
		circuit_updated_at = $6, seen_at = $6
		WHERE channel = $1 AND name = $2
		RETURNING circuit_state, circuit_since, circuit_error, failing_since, circuit_updated_at`), args...).
		Scan(&out.State, nullTimeCol{&out.Since}, &out.LastError, nullTimeCol{&out.FailingSince}, nullTimeCol{&out.UpdatedAt})
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		return Circuit{}, fmt.Errorf("record circuit of provider %s %q: %w", channel, name, err)
	}
	out.Opened = (was == "" || was == CircuitClosed) && out.State == CircuitOpen
	return out, nil
}

// Providers returns every provider declared, by channel and position,
// with its limit as it stands at now: on PostgreSQL at the database's
// clock, the one the limits are taken at.
func (s *Store) Providers(ctx context.Context, now time.Time) ([]Provider, error) {
	if s.d == postgres {
		if err := s.read.QueryRowContext(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
			return nil, fmt.Errorf("list providers: %w", err)
		}
	}
	at := now.UnixMicro()
	// A limit's key is the channel and the provider's name (see the
	// channel package's failover).
	rows, err := s.read.QueryContext(ctx, s.d.q(`SELECT p.channel, p.name, p.position, p.rate, p.burst,
			p.circuit_state, p.circuit_since, p.circuit_error, p.failing_since, p.circuit_updated_at, p.seen_at,
			r.tat, (SELECT count(*) FROM rate_tickets t WHERE t.key = p.channel || ':' || p.name AND t.slot > $1)
		FROM providers p LEFT JOIN rate_limits r ON r.key = p.channel || ':' || p.name
		ORDER BY p.channel, p.position, p.name`), at)
	if err != nil {
		return nil, fmt.Errorf("list providers: %w", err)
	}
	out := []Provider{}
	err = each(rows, func() error {
		var (
			p     Provider
			rate  float64
			burst int
			tat   sql.NullInt64
		)
		if err := rows.Scan(&p.Channel, &p.Name, &p.Position, &rate, &burst, &p.Circuit.State, nullTimeCol{&p.Circuit.Since},
			&p.Circuit.LastError, nullTimeCol{&p.Circuit.FailingSince}, nullTimeCol{&p.Circuit.UpdatedAt}, timeCol{&p.SeenAt},
			&tat, &p.Waiting); err != nil {
			return err
		}
		if rate > 0 {
			p.Rate = &Rate{Per: rate, Burst: max(burst, 1)}
			if tat.Valid {
				// The slot a newcomer gets, as TakeRate gives it.
				slot := tat.Int64 - int64(p.Rate.Burst-1)*p.Rate.interval().Microseconds()
				p.NextSlot = time.Duration(max(slot-at, 0)) * time.Microsecond
			}
		}
		out = append(out, p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list providers: %w", err)
	}
	return out, nil
}
