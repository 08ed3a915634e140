package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

// SetPruneBatch makes Prune delete n notifications a statement, so that a
// test can make it take several batches.
func SetPruneBatch(s *Store, n int) { s.pruneBatch = n }

// OpenAt opens the store dsn names with its migrations applied up to
// version and no further, as an older release left it.
func OpenAt(ctx context.Context, dsn string, version int) (*Store, error) {
	kind, target, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	var s *Store
	if kind == postgres {
		s, err = openPostgres(ctx, target)
	} else {
		s, err = openSQLite(ctx, target)
	}
	if err != nil {
		return nil, err
	}
	if err := s.migrateTo(ctx, version); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// QueryText runs a query on the writer's connection, which sees the schema as
// migrations left it, and returns its rows as text.
func QueryText(ctx context.Context, s *Store, query string) ([][]string, error) {
	rows, err := s.write.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	cols, err := rows.Columns()
	if err != nil {
		rows.Close()
		return nil, err
	}
	var out [][]string
	err = each(rows, func() error {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		row := make([]string, len(cols))
		for i, v := range vals {
			row[i] = v.String
		}
		out = append(out, row)
		return nil
	})
	return out, err
}

// MigrationCount is how many migrations the backend of s has.
func MigrationCount(s *Store) int {
	m, err := s.d.migrations()
	if err != nil {
		panic(err)
	}
	return len(m)
}

// CountRows counts the rows of a table.
func CountRows(ctx context.Context, s *Store, table string) (int64, error) {
	var n int64
	err := s.read.QueryRowContext(ctx, "SELECT count(*) FROM "+table).Scan(&n)
	return n, err
}

// ExplainList returns the database's plan for List(q), one line a row.
func ExplainList(ctx context.Context, s *Store, q Query) ([]string, error) {
	query, args, _, err := s.listQuery(q)
	if err != nil {
		return nil, err
	}
	return explain(ctx, s, query, args...)
}

// The statements of the store, to explain.
const (
	GetNotificationSQL    = getNotification
	GetCopiesSQL          = getCopies
	PruneNotificationsSQL = pruneNotifications
	PruneKeysSQL          = pruneKeys
)

// LoadEventsQuery is the statement Record reads a batch's events back
// with.
func LoadEventsQuery(s *Store, ids []string) (string, []any) { return s.loadEventsQuery(ids) }

// Explain returns the database's plan for a query, one line a row: EXPLAIN
// QUERY PLAN on SQLite, EXPLAIN ANALYZE on PostgreSQL. Placeholders are
// rewritten for s as the store rewrites its own.
func Explain(ctx context.Context, s *Store, query string, args ...any) ([]string, error) {
	return explain(ctx, s, s.d.q(query), args...)
}

func explain(ctx context.Context, s *Store, query string, args ...any) ([]string, error) {
	if s.d == sqlite {
		rows, err := s.read.QueryContext(ctx, "EXPLAIN QUERY PLAN "+query, args...)
		if err != nil {
			return nil, err
		}
		var out []string
		err = each(rows, func() error {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				return err
			}
			out = append(out, detail)
			return nil
		})
		return out, err
	}
	rows, err := s.read.QueryContext(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+query, args...)
	if err != nil {
		return nil, err
	}
	var out []string
	err = each(rows, func() error {
		var line string
		if err := rows.Scan(&line); err != nil {
			return err
		}
		out = append(out, line)
		return nil
	})
	return out, err
}

// SeedID is the id Seed gives notification i.
func SeedID(i int) string { return fmt.Sprintf("ntf_seed%09d", i) }

// SeedEvents are the events Seed records for notification i, created at
// at: an email copy and a webhook copy, delivered at once mostly, after a
// retry every 10th, parked after three failures every 100th.
func SeedEvents(i int, at time.Time) []notification.Event {
	id := SeedID(i)
	ev := func(ch string, attempt int, outcome retry.Outcome, after time.Duration) notification.Event {
		e := notification.Event{ID: id, Channel: ch, Attempt: attempt, Outcome: outcome, At: at.Add(after), Service: "worker"}
		switch outcome {
		case retry.Failed:
			e.Error, e.DelayMS, e.DurationMS = "503 Service Unavailable", 1000, 120
		case retry.Retrying:
			e.Error, e.DelayMS, e.Service = "503 Service Unavailable", 1100, "retrier"
		case retry.Delivered:
			e.DurationMS = 80
		case retry.Parked:
			e.Error, e.Reason, e.Service = "503 Service Unavailable", "max-retries", "retrier"
		}
		return e
	}
	out := []notification.Event{ev("webhook", 1, retry.Delivered, 200*time.Millisecond)}
	switch {
	case i%100 == 0:
		for a := 1; a <= 3; a++ {
			base := time.Duration(a) * 2 * time.Second
			out = append(out, ev("email", a, retry.Failed, base))
			if a < 3 {
				out = append(out, ev("email", a, retry.Retrying, base+10*time.Millisecond), ev("email", a+1, retry.Requeued, base+time.Second))
			}
		}
		out = append(out, ev("email", 3, retry.Parked, 6*time.Second+10*time.Millisecond))
	case i%10 == 0:
		out = append(out,
			ev("email", 1, retry.Failed, time.Second),
			ev("email", 1, retry.Retrying, time.Second+10*time.Millisecond),
			ev("email", 2, retry.Requeued, 2*time.Second+100*time.Millisecond),
			ev("email", 2, retry.Delivered, 2*time.Second+200*time.Millisecond))
	default:
		out = append(out, ev("email", 1, retry.Delivered, 300*time.Millisecond))
	}
	return out
}

// SeedAccepted is the accepted record Seed stores for notification i.
func SeedAccepted(i int, at time.Time) notification.Accepted {
	return notification.Accepted{
		ID:         SeedID(i),
		CreatedAt:  at,
		Channels:   []string{"email", "webhook"},
		Recipients: []string{fmt.Sprintf("user%d@example.com", i), fmt.Sprintf("https://hooks.example.com/%d", i%5000)},
		Payload:    json.RawMessage(fmt.Sprintf(`{"email":{"to":"user%d@example.com","subject":"Your order %d"},"webhook":{"endpoint":"ep_%d"}}`, i, i, i%5000)),
	}
}

// Seed stores n notifications, SeedAccepted(i, at(i)) with
// SeedEvents(i, at(i)), the fast way: the rows Accept and Record would
// write, in bulk, through COPY on PostgreSQL and multi-row inserts in one
// transaction on SQLite.
func Seed(ctx context.Context, s *Store, n int, at func(int) time.Time) error {
	const chunk = 10000
	var tx *sql.Tx
	if s.d == sqlite {
		var err error
		if tx, err = s.write.BeginTx(ctx, nil); err != nil {
			return err
		}
		defer tx.Rollback()
	}
	for lo := 0; lo < n; lo += chunk {
		var notifications, copies, events, attempts [][]any
		for i := lo; i < min(n, lo+chunk); i++ {
			a := SeedAccepted(i, micro(at(i)))
			ch, _ := json.Marshal(a.Channels)
			rc, _ := json.Marshal(a.Recipients)
			notifications = append(notifications, []any{a.ID, s.d.ts(a.CreatedAt), s.d.bool(true), string(ch), string(rc), searchText(a.ID, a.Recipients), string(a.Payload)})
			byCopy := map[string][]notification.Event{}
			for _, e := range SeedEvents(i, a.CreatedAt) {
				e.At = micro(e.At)
				byCopy[e.Channel] = append(byCopy[e.Channel], e)
				events = append(events, []any{e.ID, e.Channel, e.Round, e.Attempt, e.Outcome, s.d.ts(e.At), e.Error, e.Reason, e.DelayMS, e.DurationMS, e.Service})
			}
			for _, channel := range a.Channels {
				c := project(byCopy[channel])
				copies = append(copies, []any{a.ID, channel, c.Status, c.Reason, c.Round, c.AttemptCount, c.LastError, s.d.nullTS(c.NextAttemptAt), s.d.ts(c.UpdatedAt)})
				for _, t := range c.Attempts {
					attempts = append(attempts, []any{a.ID, channel, t.Round, t.N, s.d.ts(t.At), t.Outcome, t.Error, t.Reason, t.Service,
						nullInt(t.DelayMS), nullInt(t.WaitedMS), nullInt(t.DurationMS)})
				}
			}
		}
		tables := []struct {
			name string
			cols []string
			rows [][]any
		}{
			{"notifications", []string{"id", "created_at", "accepted", "channels", "recipients", "search", "payload"}, notifications},
			{"copies", []string{"notification_id", "channel", "status", "reason", "round", "attempts", "last_error", "next_attempt_at", "updated_at"}, copies},
			{"events", []string{"notification_id", "channel", "round", "attempt", "outcome", "at", "error", "reason", "delay_ms", "duration_ms", "service"}, events},
			{"attempts", []string{"notification_id", "channel", "round", "attempt", "at", "outcome", "error", "reason", "service", "delay_ms", "waited_ms", "duration_ms"}, attempts},
		}
		for _, t := range tables {
			if s.d == postgres {
				err := s.pool.AcquireFunc(ctx, func(c *pgxpool.Conn) error {
					_, err := c.Conn().CopyFrom(ctx, pgx.Identifier{t.name}, t.cols, pgx.CopyFromRows(t.rows))
					return err
				})
				if err != nil {
					return fmt.Errorf("copy into %s: %w", t.name, err)
				}
				continue
			}
			var flat []any
			for _, r := range t.rows {
				flat = append(flat, r...)
			}
			head := "INSERT INTO " + t.name + " (" + join(t.cols) + ") "
			if err := execRows(ctx, tx, s.d, head, "", make([]string, len(t.cols)), flat); err != nil {
				return fmt.Errorf("insert into %s: %w", t.name, err)
			}
		}
	}
	if tx != nil {
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	// Statistics for the planners, as autovacuum and PRAGMA optimize would
	// gather in time.
	if _, err := s.write.ExecContext(ctx, "ANALYZE"); err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	return nil
}

func join(cols []string) string {
	out := ""
	for i, c := range cols {
		if i > 0 {
			out += ", "
		}
		out += c
	}
	return out
}
