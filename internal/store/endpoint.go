package store

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/relay-demo/relay/internal/notification"
)

// The states of an endpoint's circuit, as the webhook workers record them.
const (
	// CircuitClosed: deliveries go through.
	CircuitClosed = "closed"
	// CircuitOpen: the endpoint kept failing; deliveries wait.
	CircuitOpen = "open"
	// CircuitHalfOpen: one delivery probes whether the endpoint is back.
	CircuitHalfOpen = "half-open"
)

// ErrExists is returned, wrapped, by CreateEndpoint for an id the store
// holds already.
var ErrExists = errors.New("already exists")

// Secret is a webhook signing secret. It prints, logs and marshals as a
// mask, so that an Endpoint logged or encoded by mistake does not give its
// secrets away; Reveal returns the secret itself.
type Secret string

// Reveal returns the secret.
func (s Secret) Reveal() string { return string(s) }

// String masks the secret.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "whsec_***"
}

// GoString masks the secret for %#v.
func (s Secret) GoString() string { return strconv.Quote(s.String()) }

// LogValue masks the secret for log/slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON masks the secret: the API sends a secret on purpose, as a
// string, never by encoding an Endpoint.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(strconv.Quote(s.String())), nil }

// Endpoint is a webhook endpoint: a URL and the secret deliveries to it
// are signed with.
type Endpoint struct {
	// ID is the endpoint id, such as "ep_…".
	ID string
	// Tenant is the tenant it was registered for; "" for the default
	// tenant. Only that tenant's tokens, and operators', see it.
	Tenant string
	// URL is where deliveries are posted.
	URL string
	// Description is the owner's note.
	Description string
	// Enabled is false for an endpoint that takes no deliveries: turned
	// off through the API, or by the workers after failing too long.
	Enabled bool
	// DisabledReason says why it is disabled.
	DisabledReason string
	// DisabledAt is when it was disabled.
	DisabledAt *time.Time
	// Secret signs every delivery.
	Secret Secret
	// PreviousSecret is the secret before the last rotation; deliveries
	// are signed with it as well until PreviousUntil.
	PreviousSecret Secret
	// PreviousUntil is when a rotation's grace period ends.
	PreviousUntil *time.Time
	// CreatedAt and UpdatedAt are when it was created and last changed
	// through the API.
	CreatedAt, UpdatedAt time.Time
	// ResetAt is when it was last re-enabled: circuit state from before
	// it is stale.
	ResetAt *time.Time
	// Circuit is its circuit state as a worker last recorded it.
	Circuit Circuit
	// Reenabled is true only on what UpdateEndpoint returns, and only
	// when that change enabled an endpoint that was disabled (no column
	// holds it): of two changes at once, one says so.
	Reenabled bool
}

// Secrets returns the secrets a delivery at now is signed with: the
// current one, and the previous one during a rotation's grace period.
func (e *Endpoint) Secrets(now time.Time) []Secret {
	out := []Secret{e.Secret}
	if e.PreviousSecret != "" && e.PreviousUntil != nil && now.Before(*e.PreviousUntil) {
		out = append(out, e.PreviousSecret)
	}
	return out
}

// Circuit is an endpoint's circuit state.
type Circuit struct {
	// State is CircuitClosed, CircuitOpen or CircuitHalfOpen.
	State string
	// Since is when it entered State; nil for a circuit never recorded.
	Since *time.Time
	// LastError is the latest failure's text.
	LastError string
	// FailingSince is the first failure of the current run of failures;
	// nil once a delivery went through.
	FailingSince *time.Time
	// UpdatedAt is when a worker last recorded the circuit.
	UpdatedAt *time.Time
	// Opened is true only on what RecordProviderCircuit returns, and only
	// when that record turned the shared circuit from closed to open (no
	// column holds it): of the workers that trip at once, one says so.
	Opened bool
}

// EndpointChange is what UpdateEndpoint changes: nil fields stay as they
// are.
type EndpointChange struct {
	URL         *string
	Description *string
	// Enabled true re-enables an endpoint: its disabled reason and its
	// circuit state are cleared, and ResetAt set. False disables it with
	// DisabledReason.
	Enabled        *bool
	DisabledReason string
}

// CircuitChange is a worker's record of a circuit.
type CircuitChange struct {
	// State is the circuit's state, one of the Circuit constants.
	State string
	// Since is when it entered State.
	Since time.Time
	// LastError is the latest failure's text; empty keeps the one stored.
	LastError string
	// FailingSince is the first failure of the run of failures the worker
	// sees, whose earliest the store keeps, whichever worker saw it; nil
	// ends the run (a delivery went through).
	FailingSince *time.Time
	// At is when the worker saw what it records.
	At time.Time
}

// EndpointQuery selects a page of ListEndpoints. Its zero value lists the
// default tenant's endpoints, DefaultLimit a page.
type EndpointQuery struct {
	// Tenant keeps the endpoints of this tenant; "" is the default
	// tenant's. AllTenants lists every tenant's instead.
	Tenant     string
	AllTenants bool
	// Limit is the page size: DefaultLimit when 0, at most MaxLimit.
	Limit int
	// Cursor is the Next of the previous page; empty for the first.
	Cursor string
}

// EndpointPage is one page of endpoints, newest first.
type EndpointPage struct {
	Items []Endpoint
	// Next is the cursor of the following page; empty on the last.
	Next string
}

const endpointColumns = `id, tenant, url, description, enabled, disabled_reason, disabled_at, secret, previous_secret, previous_until,
	created_at, updated_at, reset_at, circuit_state, circuit_since, circuit_error, failing_since, circuit_updated_at`

// scanEndpoint reads a row of endpointColumns, its secrets opened.
func (s *Store) scanEndpoint(row interface{ Scan(...any) error }) (*Endpoint, error) {
	var e Endpoint
	var secret, previous string
	err := row.Scan(&e.ID, &e.Tenant, &e.URL, &e.Description, &e.Enabled, &e.DisabledReason, nullTimeCol{&e.DisabledAt},
		&secret, &previous, nullTimeCol{&e.PreviousUntil}, timeCol{&e.CreatedAt}, timeCol{&e.UpdatedAt}, nullTimeCol{&e.ResetAt},
		&e.Circuit.State, nullTimeCol{&e.Circuit.Since}, &e.Circuit.LastError, nullTimeCol{&e.Circuit.FailingSince},
		nullTimeCol{&e.Circuit.UpdatedAt})
	if err != nil {
		return nil, err
	}
	if e.Secret, err = s.openSecret(e.ID, secret); err != nil {
		return nil, err
	}
	if e.PreviousSecret, err = s.openSecret(e.ID, previous); err != nil {
		return nil, err
	}
	return &e, nil
}

// CreateEndpoint stores a new endpoint of e.Tenant, enabled, with a closed
// circuit. e.ID, e.URL, e.Secret and e.CreatedAt are required; UpdatedAt
// is set to CreatedAt. An id the store holds already is an error wrapping ErrExists.
func (s *Store) CreateEndpoint(ctx context.Context, e Endpoint) error {
	switch {
	case e.ID == "" || e.URL == "" || e.Secret == "" || e.CreatedAt.IsZero():
		return fmt.Errorf("create endpoint: %w: id, url, secret and creation time are required", ErrInvalid)
	}
	res, err := s.write.ExecContext(ctx, s.d.q(`INSERT INTO endpoints (id, tenant, url, description, enabled, secret, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $7) ON CONFLICT (id) DO NOTHING`),
		e.ID, e.Tenant, e.URL, e.Description, s.d.bool(true), s.sealSecret(e.ID, e.Secret.Reveal()), s.d.ts(micro(e.CreatedAt)))
	if err != nil {
		return fmt.Errorf("create endpoint %q: %w", e.ID, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("create endpoint %q: %w", e.ID, ErrExists)
	}
	return nil
}

// Endpoint returns the endpoint id, whatever its tenant, or an error
// wrapping ErrNotFound: who may see it is the caller's to judge from its
// Tenant.
func (s *Store) Endpoint(ctx context.Context, id string) (*Endpoint, error) {
	e, err := s.scanEndpoint(s.read.QueryRowContext(ctx, s.d.q(`SELECT `+endpointColumns+` FROM endpoints WHERE id = $1`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("endpoint %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read endpoint %q: %w", id, err)
	}
	return e, nil
}

// ListEndpoints returns a page of the endpoints q selects, newest first,
// keyset-paginated on (created_at, id).
func (s *Store) ListEndpoints(ctx context.Context, q EndpointQuery) (EndpointPage, error) {
	limit := pageSize(q.Limit)
	var (
		args  []any
		where []string
	)
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if !q.AllTenants {
		where = append(where, "tenant = "+arg(q.Tenant))
	}
	if q.Cursor != "" {
		at, id, err := decodeCursor(q.Cursor)
		if err != nil {
			return EndpointPage{}, err
		}
		where = append(where, "(created_at, id) < ("+arg(s.d.ts(at))+", "+arg(id)+")")
	}
	query := `SELECT ` + endpointColumns + ` FROM endpoints`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += ` ORDER BY created_at DESC, id DESC LIMIT ` + strconv.Itoa(limit+1)
	rows, err := s.read.QueryContext(ctx, s.d.q(query), args...)
	if err != nil {
		return EndpointPage{}, fmt.Errorf("list endpoints: %w", err)
	}
	var page EndpointPage
	err = each(rows, func() error {
		e, err := s.scanEndpoint(rows)
		if err != nil {
			return err
		}
		page.Items = append(page.Items, *e)
		return nil
	})
	if err != nil {
		return EndpointPage{}, fmt.Errorf("list endpoints: %w", err)
	}
	if len(page.Items) > limit {
		page.Items = page.Items[:limit]
		last := page.Items[limit-1]
		page.Next = encodeCursor(last.CreatedAt, last.ID)
	}
	return page, nil
}

// pageSize is a query's Limit made a page size.
func pageSize(limit int) int {
	switch {
	case limit <= 0:
		return DefaultLimit
	case limit > MaxLimit:
		return MaxLimit
	}
	return limit
}

// UpdateEndpoint changes the endpoint id as c says, at now, and returns it
// as it then is, or an error wrapping ErrNotFound.
func (s *Store) UpdateEndpoint(ctx context.Context, id string, c EndpointChange, now time.Time) (*Endpoint, error) {
	var set []string
	args := []any{id}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if c.URL != nil {
		set = append(set, "url = "+arg(*c.URL))
	}
	if c.Description != nil {
		set = append(set, "description = "+arg(*c.Description))
	}
	if c.Enabled != nil {
		at := arg(s.d.ts(micro(now)))
		if *c.Enabled {
			// Only an endpoint that was disabled is reset: enabling an
			// enabled one leaves its circuit alone.
			off := "enabled = " + arg(s.d.bool(false))
			set = append(set, "enabled = "+arg(s.d.bool(true)), "disabled_reason = ''", "disabled_at = NULL",
				"reset_at = CASE WHEN "+off+" THEN "+at+" ELSE reset_at END",
				"circuit_state = CASE WHEN "+off+" THEN 'closed' ELSE circuit_state END",
				"circuit_since = CASE WHEN "+off+" THEN NULL ELSE circuit_since END",
				"circuit_error = CASE WHEN "+off+" THEN '' ELSE circuit_error END",
				"failing_since = CASE WHEN "+off+" THEN NULL ELSE failing_since END")
		} else {
			on := "enabled = " + arg(s.d.bool(true))
			set = append(set, "disabled_reason = CASE WHEN "+on+" THEN "+arg(c.DisabledReason)+" ELSE disabled_reason END",
				"disabled_at = CASE WHEN "+on+" THEN "+at+" ELSE disabled_at END",
				"enabled = "+arg(s.d.bool(false)))
		}
	}
	set = append(set, "updated_at = "+arg(s.d.ts(micro(now))))
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("update endpoint %q: %w", id, err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	// A write that changes nothing locks the row (PostgreSQL) or the
	// database (SQLite) before the state is read: two changes at once take
	// turns, so only the one that finds the endpoint disabled and enables
	// it reports Reenabled.
	var was bool
	err = tx.QueryRowContext(ctx, s.d.q(`UPDATE endpoints SET updated_at = updated_at WHERE id = $1 RETURNING enabled`), id).Scan(&was)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("endpoint %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("update endpoint %q: %w", id, err)
	}
	// Both backends evaluate every CASE against the row as it was.
	e, err := s.scanEndpoint(tx.QueryRowContext(ctx, s.d.q(`UPDATE endpoints SET `+strings.Join(set, ", ")+
		` WHERE id = $1 RETURNING `+endpointColumns), args...))
	if err != nil {
		return nil, fmt.Errorf("update endpoint %q: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("update endpoint %q: %w", id, err)
	}
	e.Reenabled = !was && e.Enabled
	return e, nil
}

// DeleteEndpoint deletes the endpoint id, or returns an error wrapping
// ErrNotFound. Its delivery log goes with the notifications, at their
// retention.
func (s *Store) DeleteEndpoint(ctx context.Context, id string) error {
	res, err := s.write.ExecContext(ctx, s.d.q(`DELETE FROM endpoints WHERE id = $1`), id)
	if err != nil {
		return fmt.Errorf("delete endpoint %q: %w", id, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("endpoint %q: %w", id, ErrNotFound)
	}
	return nil
}

// RotateEndpointSecret makes secret the endpoint's secret at now. For
// grace after it, deliveries are signed with the secret it replaces as
// well; a grace of zero drops that secret at once (say, when it leaked).
// A rotation during another's grace period ends that one: only the secret
// just replaced stays valid. It returns the endpoint as it then is, or an
// error wrapping ErrNotFound.
func (s *Store) RotateEndpointSecret(ctx context.Context, id string, secret Secret, grace time.Duration, now time.Time) (*Endpoint, error) {
	if secret == "" || grace < 0 {
		return nil, fmt.Errorf("rotate endpoint %q: %w: a secret and a grace period of zero or more are required", id, ErrInvalid)
	}
	previous, until := "secret", s.d.nullTS(nil)
	if grace > 0 {
		until = s.d.ts(micro(now.Add(grace)))
	} else {
		previous = "''"
	}
	e, err := s.scanEndpoint(s.write.QueryRowContext(ctx, s.d.q(`UPDATE endpoints SET previous_secret = `+previous+`,
		previous_until = $2, secret = $3, updated_at = $4 WHERE id = $1 RETURNING `+endpointColumns),
		id, until, s.sealSecret(id, secret.Reveal()), s.d.ts(micro(now))))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("endpoint %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("rotate endpoint %q: %w", id, err)
	}
	return e, nil
}

// RecordCircuit records a worker's view of an endpoint's circuit and
// returns the circuit as stored: FailingSince is the earliest failure of
// the run under way, whichever worker saw it. A state entered before the
// endpoint's ResetAt is stale and not recorded; the stored circuit is
// returned. An unknown id is an error wrapping ErrNotFound.
func (s *Store) RecordCircuit(ctx context.Context, id string, c CircuitChange) (Circuit, error) {
	switch c.State {
	case CircuitClosed, CircuitOpen, CircuitHalfOpen:
	default:
		return Circuit{}, fmt.Errorf("record circuit of %q: %w: state %q", id, ErrInvalid, c.State)
	}
	failing, args := "NULL", []any{id, c.State, s.d.ts(micro(c.Since)), c.LastError, s.d.ts(micro(c.At))}
	if c.FailingSince != nil {
		failing = "CASE WHEN failing_since IS NULL OR failing_since > $6 THEN $6 ELSE failing_since END"
		args = append(args, s.d.ts(micro(*c.FailingSince)))
	}
	var out Circuit
	err := s.write.QueryRowContext(ctx, s.d.q(`UPDATE endpoints SET circuit_state = $2, circuit_since = $3,
		circuit_error = CASE WHEN $4 = '' THEN circuit_error ELSE $4 END, failing_since = `+failing+`, circuit_updated_at = $5
		WHERE id = $1 AND (reset_at IS NULL OR reset_at <= $3)
		RETURNING circuit_state, circuit_since, circuit_error, failing_since, circuit_updated_at`), args...).
		Scan(&out.State, nullTimeCol{&out.Since}, &out.LastError, nullTimeCol{&out.FailingSince}, nullTimeCol{&out.UpdatedAt})
	if errors.Is(err, sql.ErrNoRows) {
		e, gerr := s.Endpoint(ctx, id)
		if gerr != nil {
			return Circuit{}, gerr
		}
		return e.Circuit, nil // reset since: the worker's view is stale
	}
	if err != nil {
		return Circuit{}, fmt.Errorf("record circuit of %q: %w", id, err)
	}
	return out, nil
}

// DisableEndpoint disables the endpoint id at now with reason, unless it
// is disabled already (whose reason then stays). It reports whether it
// disabled it; an unknown id is an error wrapping ErrNotFound.
func (s *Store) DisableEndpoint(ctx context.Context, id, reason string, now time.Time) (bool, error) {
	res, err := s.write.ExecContext(ctx, s.d.q(`UPDATE endpoints SET enabled = $2, disabled_reason = $3, disabled_at = $4
		WHERE id = $1 AND enabled = $5`), id, s.d.bool(false), reason, s.d.ts(micro(now)), s.d.bool(true))
	if err != nil {
		return false, fmt.Errorf("disable endpoint %q: %w", id, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 1 {
		return true, nil
	}
	if _, err := s.Endpoint(ctx, id); err != nil {
		return false, err
	}
	return false, nil
}

// AttemptQuery selects a page of EndpointAttempts.
type AttemptQuery struct {
	// Channel is the channel whose copies deliver to endpoints.
	Channel string
	// Limit is the page size: DefaultLimit when 0, at most MaxLimit.
	Limit int
	// Cursor is the Next of the previous page; empty for the first.
	Cursor string
}

// EndpointAttempt is one attempt at delivering a notification to an
// endpoint.
type EndpointAttempt struct {
	// NotificationID is the notification the attempt delivers.
	NotificationID string
	// CreatedAt is when the notification was accepted.
	CreatedAt time.Time
	notification.Attempt
}

// AttemptPage is one page of an endpoint's attempts.
type AttemptPage struct {
	Items []EndpointAttempt
	// Next is the cursor of the following page; empty on the last.
	Next string
}

// EndpointAttempts returns a page of the attempts of the q.Channel copies
// of the notifications that name the endpoint id: the newest notification
// first, and its newest attempt first. The replays that start a round are
// left out. An endpoint that is gone still has its log, until the
// notifications are pruned.
func (s *Store) EndpointAttempts(ctx context.Context, id string, q AttemptQuery) (AttemptPage, error) {
	limit := pageSize(q.Limit)
	args := []any{id, q.Channel}
	query := `SELECT en.notification_id, en.created_at, a.round, a.attempt, a.at, a.outcome, a.error, a.reason, a.service,
			a.delay_ms, a.waited_ms, a.duration_ms, a.deferred
		FROM endpoint_notifications en
		JOIN attempts a ON a.notification_id = en.notification_id AND a.channel = $2 AND a.attempt > 0
		WHERE en.endpoint_id = $1`
	if q.Cursor != "" {
		k, err := decodeAttemptCursor(q.Cursor)
		if err != nil {
			return AttemptPage{}, err
		}
		query += ` AND (en.created_at, en.notification_id, a.round, a.attempt) < ($3, $4, $5, $6)`
		args = append(args, s.d.ts(k.createdAt), k.id, k.round, k.attempt)
	}
	query += ` ORDER BY en.created_at DESC, en.notification_id DESC, a.round DESC, a.attempt DESC LIMIT ` + strconv.Itoa(limit+1)
	rows, err := s.read.QueryContext(ctx, s.d.q(query), args...)
	if err != nil {
		return AttemptPage{}, fmt.Errorf("list attempts of endpoint %q: %w", id, err)
	}
	var page AttemptPage
	err = each(rows, func() error {
		var (
			a                       EndpointAttempt
			delay, waited, duration sql.NullInt64
			deferred                sql.NullBool
		)
		if err := rows.Scan(&a.NotificationID, timeCol{&a.CreatedAt}, &a.Round, &a.Attempt.N, timeCol{&a.At}, &a.Outcome,
			&a.Error, &a.Reason, &a.Service, &delay, &waited, &duration, &deferred); err != nil {
			return err
		}
		a.DelayMS, a.WaitedMS, a.DurationMS, a.Deferred = ptrInt(delay), ptrInt(waited), ptrInt(duration), deferred.Bool
		page.Items = append(page.Items, a)
		return nil
	})
	if err != nil {
		return AttemptPage{}, fmt.Errorf("list attempts of endpoint %q: %w", id, err)
	}
	if len(page.Items) > limit {
		page.Items = page.Items[:limit]
		last := page.Items[limit-1]
		page.Next = encodeAttemptCursor(attemptKey{last.CreatedAt, last.NotificationID, last.Round, last.Attempt.N})
	}
	return page, nil
}

// attemptKey is where a page of EndpointAttempts ends.
type attemptKey struct {
	createdAt      time.Time
	id             string
	round, attempt int
}

// An attempt cursor is "micros,round,attempt,id" in URL-safe base64.
func encodeAttemptCursor(k attemptKey) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d,%d,%d,%s", k.createdAt.UnixMicro(), k.round, k.attempt, k.id))
}

func decodeAttemptCursor(c string) (attemptKey, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return attemptKey{}, fmt.Errorf("%w: not base64", ErrBadCursor)
	}
	f := strings.SplitN(string(b), ",", 4)
	if len(f) != 4 || f[3] == "" {
		return attemptKey{}, fmt.Errorf("%w: want four fields", ErrBadCursor)
	}
	us, err1 := strconv.ParseInt(f[0], 10, 64)
	round, err2 := strconv.Atoi(f[1])
	attempt, err3 := strconv.Atoi(f[2])
	if err := errors.Join(err1, err2, err3); err != nil {
		return attemptKey{}, fmt.Errorf("%w: bad number", ErrBadCursor)
	}
	return attemptKey{time.UnixMicro(us).UTC(), f[3], round, attempt}, nil
}
