package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

// Accept stores notifications the API accepted, with a queued copy for
// each of their Copies, or for each channel when Copies is empty. It is
// idempotent: an id the store already accepted is left as it is. A
// notification whose events arrived first is filled in.
func (s *Store) Accept(ctx context.Context, ns []notification.Accepted) error {
	if len(ns) == 0 {
		return nil
	}
	seen := map[string]bool{}
	var batch []notification.Accepted
	for i, n := range ns {
		if p := checkAccepted(n); p != "" {
			return &InputError{Index: i, Problem: p}
		}
		if seen[n.ID] {
			continue // the first wins, as across batches
		}
		seen[n.ID] = true
		batch = append(batch, n)
	}
	// One order for every writer, so that concurrent batches on PostgreSQL
	// lock their rows in the same order and cannot deadlock.
	slices.SortFunc(batch, func(a, b notification.Accepted) int { return cmp.Compare(a.ID, b.ID) })

	args := make([]any, 0, len(batch)*10)
	for _, n := range batch {
		channels, _ := json.Marshal(nonNil(n.Channels))
		recipients, _ := json.Marshal(nonNil(n.Recipients))
		var payload any
		if len(n.Payload) > 0 {
			payload = string(n.Payload)
		}
		var due *time.Time
		if !n.DueAt.IsZero() {
			at := micro(n.DueAt)
			due = &at
		}
		args = append(args, n.ID, n.Tenant, s.d.ts(micro(n.CreatedAt)), s.d.nullTS(due), s.d.bool(true), string(channels), string(recipients), searchText(n.ID, n.Recipients),
			publicSearchText(n.ID, n.Recipients), payload)
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		accepted := map[string]bool{}
		err := queryRows(ctx, tx, s.d,
			`INSERT INTO notifications (id, tenant, created_at, due_at, accepted, channels, recipients, search, public_search, payload) `,
			` ON CONFLICT (id) DO UPDATE SET tenant = excluded.tenant, created_at = excluded.created_at, due_at = excluded.due_at, accepted = excluded.accepted,
				channels = excluded.channels, recipients = excluded.recipients, search = excluded.search, public_search = excluded.public_search,
				payload = excluded.payload
			WHERE notifications.accepted = false
			RETURNING id`,
			[]string{"text", "text", "timestamptz", "timestamptz", "boolean", "jsonb", "jsonb", "text", "text", "json"}, args, func(rows *sql.Rows) error {
				var id string
				if err := rows.Scan(&id); err != nil {
					return err
				}
				accepted[id] = true
				return nil
			})
		if err != nil {
			return fmt.Errorf("insert notifications: %w", err)
		}
		var copies []any
		for _, n := range batch {
			if !accepted[n.ID] {
				continue
			}
			status, due := notification.StatusQueued, (*time.Time)(nil)
			if !n.DueAt.IsZero() {
				at := micro(n.DueAt)
				status, due = notification.StatusScheduled, &at
			}
			for _, c := range copiesOf(n) {
				copies = append(copies, n.ID, c.Channel, c.Recipient, string(status), s.d.nullTS(due), s.d.ts(micro(n.CreatedAt)))
			}
		}
		// A copy its events created already is left as it is.
		if err := execRows(ctx, tx, s.d,
			`INSERT INTO copies (notification_id, channel, recipient, status, next_attempt_at, updated_at) `,
			` ON CONFLICT (notification_id, channel, recipient) DO NOTHING`, []string{"text", "text", "text", "text", "timestamptz", "timestamptz"}, copies); err != nil {
			return fmt.Errorf("insert copies: %w", err)
		}
		return nil
	})
}

// MaxRecipient is the longest recipient a copy or an event may name, in
// bytes: room for any email address (RFC 3696 counts 320 at most).
const MaxRecipient = 320

func checkAccepted(n notification.Accepted) string {
	switch {
	case n.ID == "":
		return "notification has no id"
	case n.CreatedAt.IsZero():
		return fmt.Sprintf("notification %q has no creation time", n.ID)
	case len(n.Payload) > 0 && !json.Valid(n.Payload):
		return fmt.Sprintf("notification %q: payload is not JSON", n.ID)
	case slices.Contains(n.Channels, ""):
		return fmt.Sprintf("notification %q has an empty channel", n.ID)
	}
	for _, c := range n.Copies {
		switch {
		case c.Channel == "":
			return fmt.Sprintf("notification %q has a copy with no channel", n.ID)
		case !slices.Contains(n.Channels, c.Channel):
			return fmt.Sprintf("notification %q has a copy for %q, which is not one of its channels %q", n.ID, c.Channel, n.Channels)
		}
		if p := checkRecipient(c.Recipient); p != "" {
			return fmt.Sprintf("notification %q: %s copy: %s", n.ID, c.Channel, p)
		}
	}
	return ""
}

// checkRecipient says what is wrong with a copy's recipient, if anything:
// PostgreSQL refuses text that is not UTF-8 or holds a NUL, and would fail
// the whole batch.
func checkRecipient(r string) string {
	switch {
	case len(r) > MaxRecipient:
		return fmt.Sprintf("recipient is %d bytes long, more than %d", len(r), MaxRecipient)
	case !utf8.ValidString(r) || strings.ContainsRune(r, 0):
		return fmt.Sprintf("recipient %q is not UTF-8 text", r)
	}
	return ""
}

// copiesOf are the copies Accept makes for n, each once: its Copies, or
// one per channel when it names none.
func copiesOf(n notification.Accepted) []notification.CopyRef {
	var out []notification.CopyRef
	if len(n.Copies) == 0 {
		for _, ch := range dedupe(n.Channels) {
			out = append(out, notification.CopyRef{Channel: ch})
		}
		return out
	}
	for _, c := range n.Copies {
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// Record stores a batch of events, in one transaction, and updates the
// state of every copy they concern. It is idempotent and order-blind:
// events may arrive in any order, any number of times, and before the
// notification's notification.Accepted (the store then keeps a placeholder that Accept
// fills in). An invalid event fails the whole batch with an *InputError
// naming it.
func (s *Store) Record(ctx context.Context, events []notification.Event) error {
	if len(events) == 0 {
		return nil
	}
	evs := make([]notification.Event, 0, len(events))
	at := map[eventKey]int{}
	for i, e := range events {
		if p := checkEvent(e); p != "" {
			return &InputError{Index: i, Problem: p}
		}
		e.At = micro(e.At)
		if e.Outcome == retry.Replayed {
			e.Attempt = 0 // the marker sorts before the round's first attempt
		}
		k := keyOf(e)
		if j, ok := at[k]; ok {
			// One statement cannot upsert a row twice on PostgreSQL: keep
			// the copy the database would keep.
			if duplicateWins(evs[j], e) {
				evs[j] = e
			}
			continue
		}
		at[k] = len(evs)
		evs = append(evs, e)
	}
	slices.SortFunc(evs, func(a, b notification.Event) int {
		return cmp.Or(compareCopies(copyOf(a), copyOf(b)), compareEvents(a, b))
	})

	// Placeholders for notifications not accepted yet, created at their
	// earliest event, in the tenant their events name: a placeholder is
	// listed to its tenant alone, as the accepted record that replaces it
	// will be.
	var ids []string
	first := map[string]time.Time{}
	tenant := map[string]string{}
	affected := map[copyKey]bool{}
	for _, e := range evs {
		if t, ok := first[e.ID]; !ok || e.At.Before(t) {
			if !ok {
				ids = append(ids, e.ID)
			}
			first[e.ID] = e.At
		}
		if tenant[e.ID] == "" {
			tenant[e.ID] = e.Tenant
		}
		affected[copyOf(e)] = true
	}
	placeholders := make([]any, 0, 5*len(ids))
	for _, id := range ids {
		placeholders = append(placeholders, id, tenant[id], s.d.ts(first[id]), searchText(id, nil), publicSearchText(id, nil))
	}
	rows := make([]any, 0, len(eventTypes)*len(evs))
	for _, e := range evs {
		rows = append(rows, e.ID, e.Channel, e.Recipient, e.Round, e.Attempt, string(e.Outcome), s.d.ts(e.At), e.Error, e.Reason, e.DelayMS, e.DurationMS, e.Service, e.Provider, s.d.bool(e.Deferred))
	}

	return s.inTx(ctx, func(tx *sql.Tx) error {
		// On PostgreSQL this also locks the notifications' rows (ON
		// CONFLICT DO UPDATE locks the rows it leaves unchanged too), so
		// that two batches about one notification take turns and each
		// derives its copies from every event committed before it.
		//
		// An event that names no tenant (the default tenant's, or one
		// from before tenants) leaves a placeholder's named tenant as it
		// is; the accepted record has the last word.
		if err := execRows(ctx, tx, s.d,
			`INSERT INTO notifications (id, tenant, created_at, search, public_search) `,
			` ON CONFLICT (id) DO UPDATE SET
				created_at = CASE WHEN excluded.created_at < notifications.created_at THEN excluded.created_at ELSE notifications.created_at END,
				tenant = CASE WHEN excluded.tenant <> '' THEN excluded.tenant ELSE notifications.tenant END
			WHERE notifications.accepted = false
				AND (excluded.created_at < notifications.created_at OR (excluded.tenant <> '' AND excluded.tenant <> notifications.tenant))`,
			[]string{"text", "text", "timestamptz", "text", "text"}, placeholders); err != nil {
			return fmt.Errorf("insert placeholder notifications: %w", err)
		}
		if err := execRows(ctx, tx, s.d,
			`INSERT INTO events (notification_id, channel, recipient, round, attempt, outcome, at, error, reason, delay_ms, duration_ms, service, provider, deferred) `,
			` ON CONFLICT (notification_id, channel, recipient, round, attempt, outcome) DO UPDATE SET
				at = excluded.at, error = excluded.error, reason = excluded.reason,
				delay_ms = excluded.delay_ms, duration_ms = excluded.duration_ms, service = excluded.service, provider = excluded.provider,
				deferred = excluded.deferred
			WHERE (excluded.at, excluded.error, excluded.reason, excluded.delay_ms, excluded.duration_ms, excluded.service, excluded.provider, excluded.deferred)
				< (events.at, events.error, events.reason, events.delay_ms, events.duration_ms, events.service, events.provider, events.deferred)`,
			eventTypes, rows); err != nil {
			return fmt.Errorf("insert events: %w", err)
		}
		all, err := s.loadEvents(ctx, tx, ids, affected)
		if err != nil {
			return err
		}
		return s.saveCopies(ctx, tx, all)
	})
}

func checkEvent(e notification.Event) string {
	switch {
	case e.ID == "":
		return "event has no notification id"
	case e.Channel == "":
		return fmt.Sprintf("event for %q has no channel", e.ID)
	case checkRecipient(e.Recipient) != "":
		return fmt.Sprintf("event for %q/%s: %s", e.ID, e.Channel, checkRecipient(e.Recipient))
	case e.Rank() < 0:
		return fmt.Sprintf("event for %q/%s: unknown outcome %q", e.ID, e.Channel, e.Outcome)
	case e.Round < 0 || e.Attempt < 0:
		return fmt.Sprintf("event for %q/%s: negative round or attempt", e.ID, e.Channel)
	case e.Outcome != retry.Replayed && e.Attempt == 0:
		return fmt.Sprintf("event for %q/%s: %s of attempt 0", e.ID, e.Channel, e.Outcome)
	case e.Outcome == retry.Replayed && e.Round == 0:
		return fmt.Sprintf("event for %q/%s: a replay starts round 1 or later, not 0", e.ID, e.Channel)
	case e.At.IsZero():
		return fmt.Sprintf("event for %q/%s has no time", e.ID, e.Channel)
	}
	return ""
}

// loadEvents reads every stored event of the affected copies, which are
// copies of the notifications ids.
func (s *Store) loadEvents(ctx context.Context, tx *sql.Tx, ids []string, affected map[copyKey]bool) (map[copyKey][]notification.Event, error) {
	out := map[copyKey][]notification.Event{}
	for chunk := range slices.Chunk(ids, maxParams) {
		query, args := s.loadEventsQuery(chunk)
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return nil, fmt.Errorf("read events: %w", err)
		}
		err = each(rows, func() error {
			var e notification.Event
			if err := rows.Scan(&e.ID, &e.Channel, &e.Recipient, &e.Round, &e.Attempt, &e.Outcome, timeCol{&e.At},
				&e.Error, &e.Reason, &e.DelayMS, &e.DurationMS, &e.Service, &e.Provider, &e.Deferred); err != nil {
				return err
			}
			if k := copyOf(e); affected[k] {
				out[k] = append(out[k], e)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read events: %w", err)
		}
	}
	return out, nil
}

func (s *Store) loadEventsQuery(ids []string) (string, []any) {
	in, args := s.d.in("notification_id", ids)
	return `SELECT notification_id, channel, recipient, round, attempt, outcome, at, error, reason, delay_ms, duration_ms, service, provider, deferred
		FROM events WHERE ` + in, args
}

// saveCopies writes the state and timeline derived from each copy's
// events.
func (s *Store) saveCopies(ctx context.Context, tx *sql.Tx, events map[copyKey][]notification.Event) error {
	keys := make([]copyKey, 0, len(events))
	for k := range events {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareCopies)
	copies := make([]any, 0, len(copyTypes)*len(keys))
	var attempts []any
	for _, k := range keys {
		c := project(events[k])
		copies = append(copies, k.id, k.channel, k.recipient, string(c.Status), c.Reason, c.Round, c.AttemptCount, c.LastError, s.d.nullTS(c.NextAttemptAt), s.d.ts(c.UpdatedAt))
		for _, a := range c.Attempts {
			attempts = append(attempts, k.id, k.channel, k.recipient, a.Round, a.N, s.d.ts(a.At), string(a.Outcome), a.Error, a.Reason, a.Service,
				nullInt(a.DelayMS), nullInt(a.WaitedMS), nullInt(a.DurationMS), a.Provider, s.d.bool(a.Deferred))
		}
	}
	if err := execRows(ctx, tx, s.d,
		`INSERT INTO copies (notification_id, channel, recipient, status, reason, round, attempts, last_error, next_attempt_at, updated_at) `,
		` ON CONFLICT (notification_id, channel, recipient) DO UPDATE SET status = excluded.status, reason = excluded.reason,
			round = excluded.round, attempts = excluded.attempts, last_error = excluded.last_error,
			next_attempt_at = excluded.next_attempt_at, updated_at = excluded.updated_at`,
		copyTypes, copies); err != nil {
		return fmt.Errorf("update copies: %w", err)
	}
	// Rows are never removed: more events only add to a timeline.
	if err := execRows(ctx, tx, s.d,
		`INSERT INTO attempts (notification_id, channel, recipient, round, attempt, at, outcome, error, reason, service, delay_ms, waited_ms, duration_ms, provider, deferred) `,
		` ON CONFLICT (notification_id, channel, recipient, round, attempt) DO UPDATE SET at = excluded.at, outcome = excluded.outcome,
			error = excluded.error, reason = excluded.reason, service = excluded.service,
			delay_ms = excluded.delay_ms, waited_ms = excluded.waited_ms, duration_ms = excluded.duration_ms, provider = excluded.provider,
			deferred = excluded.deferred`,
		attemptTypes, attempts); err != nil {
		return fmt.Errorf("update attempts: %w", err)
	}
	return nil
}

// inTx runs fn in a write transaction.
func (s *Store) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func dedupe(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// searchText is what List's Search looks in: the id on the first line,
// then the recipients, one a line, all lower-cased.
func searchText(id string, recipients []string) string {
	return strings.ToLower(id + "\n" + strings.Join(recipients, "\n"))
}

// publicSearchText is what List's Search looks in for a viewer without a
// token (Query.Public): searchText with each recipient as
// notification.PublicRecipient shows it.
func publicSearchText(id string, recipients []string) string {
	public := make([]string, len(recipients))
	for i, r := range recipients {
		public[i] = notification.PublicRecipient(r)
	}
	return searchText(id, public)
}
