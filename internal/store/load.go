package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

// loadChunk is how many notifications Load writes in one transaction.
const loadChunk = 5000

// The columns Load writes, in the order of its rows.
var (
	loadNotificationCols = []string{"id", "created_at", "accepted", "channels", "recipients", "search", "public_search", "payload"}
	loadCopyCols         = []string{"notification_id", "channel", "recipient", "status", "reason", "round", "attempts", "last_error", "next_attempt_at", "updated_at"}
	loadEventCols        = []string{"notification_id", "channel", "recipient", "round", "attempt", "outcome", "at", "error", "reason", "delay_ms", "duration_ms", "service", "provider", "deferred"}
	loadAttemptCols      = []string{"notification_id", "channel", "recipient", "round", "attempt", "at", "outcome", "error", "reason", "service", "delay_ms", "waited_ms", "duration_ms", "provider", "deferred"}
)

// Load stores notifications, each accepted with its events, the fast way:
// it writes the rows that Accept and then Record would, with no merging,
// loadChunk notifications a transaction, through multi-row inserts on
// SQLite and COPY on PostgreSQL. Once everything is written it refreshes
// the planner's statistics, which a load of this size leaves stale. It is
// for filling a store quickly, for benchmarks and tools; the pipeline
// itself goes through Accept and Record.
//
// Every event must be about the notification it comes with. The ids must
// be new to the store: one it holds already fails the chunk it is in with
// the database's error. An invalid notification or event fails the load
// with an *InputError whose Index is the notification's position; the
// chunks before it stay stored.
func (s *Store) Load(ctx context.Context, notifications iter.Seq2[notification.Accepted, []notification.Event]) error {
	var chunk loadRows
	i := 0
	for a, evs := range notifications {
		if err := ctx.Err(); err != nil {
			return err
		}
		if p := checkLoaded(a, evs); p != "" {
			return &InputError{Index: i, Problem: p}
		}
		chunk.add(s.d, a, evs)
		i++
		if chunk.n == loadChunk {
			if err := s.loadChunk(ctx, &chunk); err != nil {
				return err
			}
			chunk = loadRows{}
		}
	}
	if err := s.loadChunk(ctx, &chunk); err != nil {
		return err
	}
	stats := "ANALYZE notifications, copies, events, attempts"
	if s.d == sqlite {
		stats = "PRAGMA optimize=0x10002" // as Open does: every table, within an analysis limit
	}
	if _, err := s.write.ExecContext(ctx, stats); err != nil {
		return fmt.Errorf("refresh planner statistics: %w", err)
	}
	return nil
}

func checkLoaded(a notification.Accepted, evs []notification.Event) string {
	if p := checkAccepted(a); p != "" {
		return p
	}
	for _, e := range evs {
		if p := checkEvent(e); p != "" {
			return p
		}
		if e.ID != a.ID {
			return fmt.Sprintf("event for %q loaded with notification %q", e.ID, a.ID)
		}
	}
	return ""
}

// loadRows are the rows of one chunk of Load, one []any a row.
type loadRows struct {
	n                                    int // notifications
	notifications, copies, evs, attempts [][]any
}

// add derives the rows of notification a and its events as Accept and
// Record would write them.
func (r *loadRows) add(d dialect, a notification.Accepted, events []notification.Event) {
	r.n++
	a.CreatedAt = micro(a.CreatedAt)
	channels, _ := json.Marshal(nonNil(a.Channels))
	recipients, _ := json.Marshal(nonNil(a.Recipients))
	var payload any
	if len(a.Payload) > 0 {
		payload = string(a.Payload)
	}
	r.notifications = append(r.notifications, []any{a.ID, d.ts(a.CreatedAt), d.bool(true), string(channels), string(recipients),
		searchText(a.ID, a.Recipients), publicSearchText(a.ID, a.Recipients), payload})

	// The events as Record keeps them: one per key, the winner of
	// duplicates, a replay's attempt 0.
	at := map[eventKey]int{}
	var evs []notification.Event
	for _, e := range events {
		e.At = micro(e.At)
		if e.Outcome == retry.Replayed {
			e.Attempt = 0
		}
		if j, ok := at[keyOf(e)]; ok {
			if duplicateWins(evs[j], e) {
				evs[j] = e
			}
			continue
		}
		at[keyOf(e)] = len(evs)
		evs = append(evs, e)
	}
	slices.SortFunc(evs, func(a, b notification.Event) int {
		return cmp.Or(compareCopies(copyOf(a), copyOf(b)), compareEvents(a, b))
	})
	byCopy := map[copyKey][]notification.Event{}
	for _, e := range evs {
		byCopy[copyOf(e)] = append(byCopy[copyOf(e)], e)
		r.evs = append(r.evs, []any{e.ID, e.Channel, e.Recipient, e.Round, e.Attempt, string(e.Outcome), d.ts(e.At), e.Error, e.Reason, e.DelayMS, e.DurationMS, e.Service, e.Provider, d.bool(e.Deferred)})
	}
	// A row for each copy accepted, queued until its events say
	// otherwise, and one for each copy that only events name.
	var copies []copyKey
	for _, c := range copiesOf(a) {
		copies = append(copies, copyKey{a.ID, c.Channel, c.Recipient})
	}
	for k := range byCopy {
		if !slices.Contains(copies, k) {
			copies = append(copies, k)
		}
	}
	slices.SortFunc(copies, compareCopies)
	for _, k := range copies {
		c := notification.Copy{Status: notification.StatusQueued, UpdatedAt: a.CreatedAt}
		if evs := byCopy[k]; len(evs) > 0 {
			c = project(evs)
		}
		r.copies = append(r.copies, []any{a.ID, k.channel, k.recipient, string(c.Status), c.Reason, c.Round, c.AttemptCount, c.LastError, d.nullTS(c.NextAttemptAt), d.ts(c.UpdatedAt)})
		for _, t := range c.Attempts {
			r.attempts = append(r.attempts, []any{a.ID, k.channel, k.recipient, t.Round, t.N, d.ts(t.At), string(t.Outcome), t.Error, t.Reason, t.Service,
				nullInt(t.DelayMS), nullInt(t.WaitedMS), nullInt(t.DurationMS), t.Provider, d.bool(t.Deferred)})
		}
	}
}

// loadChunk writes the rows of a chunk in one transaction, in the order
// of their primary keys, which keeps a load's writes to each index close
// together.
func (s *Store) loadChunk(ctx context.Context, r *loadRows) error {
	if r.n == 0 {
		return nil
	}
	// The rows of one notification are in key order already: a stable
	// sort by id keeps them so.
	byID := func(a, b []any) int { return cmp.Compare(a[0].(string), b[0].(string)) }
	for _, rows := range [][][]any{r.notifications, r.copies, r.evs, r.attempts} {
		slices.SortStableFunc(rows, byID)
	}
	tables := []struct {
		name string
		cols []string
		rows [][]any
	}{
		{"notifications", loadNotificationCols, r.notifications},
		{"copies", loadCopyCols, r.copies},
		{"events", loadEventCols, r.evs},
		{"attempts", loadAttemptCols, r.attempts},
	}
	if s.d == postgres {
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			for _, t := range tables {
				if _, err := tx.CopyFrom(ctx, pgx.Identifier{t.name}, t.cols, pgx.CopyFromRows(t.rows)); err != nil {
					return fmt.Errorf("copy into %s: %w", t.name, err)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("load %d notifications: %w", r.n, err)
		}
		return nil
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		for _, t := range tables {
			if err := insertRows(ctx, tx, s.d, t.name, t.cols, t.rows); err != nil {
				return fmt.Errorf("insert into %s: %w", t.name, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("load %d notifications: %w", r.n, err)
	}
	return nil
}

// loadRowsPerInsert is how many rows one INSERT of Load writes on SQLite.
const loadRowsPerInsert = 128

// insertRows inserts rows into table on SQLite with one prepared
// statement of loadRowsPerInsert rows, executed as often as they fill it,
// and one for the rest: SQLite parses the statement once, where
// execRows's statements of thousands of rows spend more time in SQLite's
// parser than in writing the rows.
func insertRows(ctx context.Context, tx *sql.Tx, d dialect, table string, cols []string, rows [][]any) error {
	head := "INSERT INTO " + table + " (" + strings.Join(cols, ", ") + ") VALUES "
	args := make([]any, 0, loadRowsPerInsert*len(cols))
	var full *sql.Stmt
	for len(rows) > 0 {
		n := min(loadRowsPerInsert, len(rows))
		args = args[:0]
		for _, row := range rows[:n] {
			args = append(args, row...)
		}
		rows = rows[n:]
		if n < loadRowsPerInsert {
			if _, err := tx.ExecContext(ctx, head+d.values(n, len(cols), 1), args...); err != nil {
				return err
			}
			continue
		}
		if full == nil {
			var err error
			if full, err = tx.PrepareContext(ctx, head+d.values(n, len(cols), 1)); err != nil {
				return err
			}
			defer full.Close()
		}
		if _, err := full.ExecContext(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}
