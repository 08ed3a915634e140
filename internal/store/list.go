package store

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/relay-demo/relay/internal/notification"
)

// ErrBadCursor is wrapped by List's error for a cursor it did not issue.
var ErrBadCursor = errors.New("malformed cursor")

// ErrBadQuery is wrapped by List's error for a query it cannot run, such
// as an unknown status.
var ErrBadQuery = errors.New("invalid query")

const (
	// DefaultLimit is List's page size when the Query sets none.
	DefaultLimit = 50
	// MaxLimit is List's largest page: a larger Limit gets this many.
	MaxLimit = 500
)

// Query selects notifications for List. Its zero value lists every
// notification of the default tenant, newest first, DefaultLimit a page.
type Query struct {
	// Tenant keeps the notifications of this tenant; "" is the default
	// tenant's. AllTenants lists every tenant's instead.
	Tenant     string
	AllTenants bool
	// Status keeps notifications with a copy in this status: one of its
	// recipients' copies is enough.
	Status notification.Status
	// Channel keeps notifications with a copy for this channel; with
	// Status, a copy for this channel in this status.
	Channel string
	// Since keeps notifications created at or after it.
	Since time.Time
	// Until keeps notifications created before it.
	Until time.Time
	// Search keeps notifications whose id starts with it or with a
	// recipient that contains it, case-insensitively.
	Search string
	// Public makes Search look only at what a viewer without a token
	// sees: the id, and each recipient as notification.PublicRecipient
	// shows it. A search that matched the rest would tell such a viewer,
	// by the notifications and cursors it answers with, what is hidden.
	Public bool
	// Limit is the page size: DefaultLimit when 0, at most MaxLimit.
	Limit int
	// Cursor is the Next of the previous page; empty for the first.
	Cursor string
}

// Page is one page of List's results.
type Page struct {
	// Items are the notifications, newest first.
	Items []Summary
	// Next is the cursor of the following page; empty on the last.
	Next string
}

// Summary is a notification as List shows it.
type Summary struct {
	// ID is the notification id.
	ID string
	// Tenant is the tenant it belongs to; "" for the default tenant.
	Tenant string
	// CreatedAt is when the API accepted it, as in notification.View.
	CreatedAt time.Time
	// DueAt is when a scheduled notification is due; nil for one sent at
	// once.
	DueAt *time.Time
	// Accepted is false for a notification known only from its events.
	Accepted bool
	// Channels are the channels it was accepted for.
	Channels []string
	// Recipients are its recipients as accepted.
	Recipients []string
	// Copies are the status of each copy, by channel and recipient.
	Copies []notification.CopyStatus
}

// ChannelStatus is the status of each channel of n, for a view with one
// status per channel: a channel with a copy per recipient shows the most
// pressing of theirs, parked before retrying before queued before
// delivered, so that it is delivered only once every copy is and a parked
// copy is never hidden by the others.
func (n Summary) ChannelStatus() map[string]notification.Status {
	out := make(map[string]notification.Status, len(n.Copies))
	for _, c := range n.Copies {
		if had, ok := out[c.Channel]; !ok || urgency(c.Status) > urgency(had) {
			out[c.Channel] = c.Status
		}
	}
	return out
}

// urgency orders the statuses for ChannelStatus.
func urgency(status notification.Status) int {
	switch status {
	case notification.StatusParked:
		return 3
	case notification.StatusScheduled:
		return 2
	case notification.StatusRetrying:
		return 2
	case notification.StatusQueued:
		return 1
	}
	return 0
}

// List returns a page of notifications matching q, newest first. Pages
// are keyset-paginated on (created_at, id), so they neither repeat nor
// skip a notification while new ones arrive.
func (s *Store) List(ctx context.Context, q Query) (Page, error) {
	query, args, limit, err := s.listQuery(q)
	if err != nil {
		return Page{}, err
	}
	rows, err := s.read.QueryContext(ctx, query, args...)
	if err != nil {
		return Page{}, fmt.Errorf("list notifications: %w", err)
	}
	var page Page
	err = each(rows, func() error {
		var (
			n                    Summary
			channels, recipients []byte
		)
		if err := rows.Scan(&n.ID, &n.Tenant, timeCol{&n.CreatedAt}, nullTimeCol{&n.DueAt}, &n.Accepted, &channels, &recipients); err != nil {
			return err
		}
		if err := unmarshalStrings(channels, &n.Channels); err != nil {
			return err
		}
		if err := unmarshalStrings(recipients, &n.Recipients); err != nil {
			return err
		}
		page.Items = append(page.Items, n)
		return nil
	})
	if err != nil {
		return Page{}, fmt.Errorf("list notifications: %w", err)
	}
	if len(page.Items) > limit {
		page.Items = page.Items[:limit]
		last := page.Items[limit-1]
		page.Next = encodeCursor(last.CreatedAt, last.ID)
	}
	if err := s.copyStatuses(ctx, page.Items); err != nil {
		return Page{}, err
	}
	return page, nil
}

// listQuery builds List's statement: it asks for one row more than the
// page size, to tell whether there is a next page.
func (s *Store) listQuery(q Query) (query string, args []any, limit int, err error) {
	switch q.Status {
	case "", notification.StatusScheduled, notification.StatusQueued, notification.StatusRetrying, notification.StatusDelivered, notification.StatusParked, notification.StatusCancelled:
	default:
		return "", nil, 0, fmt.Errorf("%w: unknown status %q, want %s, %s, %s, %s, %s or %s",
			ErrBadQuery, q.Status, notification.StatusScheduled, notification.StatusQueued, notification.StatusRetrying, notification.StatusDelivered, notification.StatusParked, notification.StatusCancelled)
	}
	limit = q.Limit
	switch {
	case limit <= 0:
		limit = DefaultLimit
	case limit > MaxLimit:
		limit = MaxLimit
	}
	var where []string
	arg := func(v any) string {
		args = append(args, v)
		return s.d.arg(len(args))
	}
	if !q.AllTenants {
		where = append(where, "n.tenant = "+arg(q.Tenant))
	}
	if !q.Since.IsZero() {
		where = append(where, "n.created_at >= "+arg(s.d.ts(micro(q.Since))))
	}
	if !q.Until.IsZero() {
		where = append(where, "n.created_at < "+arg(s.d.ts(micro(q.Until))))
	}
	if q.Cursor != "" {
		at, id, err := decodeCursor(q.Cursor)
		if err != nil {
			return "", nil, 0, err
		}
		where = append(where, "(n.created_at, n.id) < ("+arg(s.d.ts(at))+", "+arg(id)+")")
	}
	if q.Status != "" || q.Channel != "" {
		cond := "c.notification_id = n.id"
		if q.Status != "" {
			cond += " AND c.status = " + arg(string(q.Status))
		}
		if q.Channel != "" {
			cond += " AND c.channel = " + arg(q.Channel)
		}
		where = append(where, "EXISTS (SELECT 1 FROM copies c WHERE "+cond+")")
	}
	if term := strings.ToLower(strings.TrimSpace(q.Search)); term != "" {
		if strings.ContainsAny(term, "\r\n") {
			return "", nil, 0, fmt.Errorf("%w: search holds a line break", ErrBadQuery)
		}
		// The id is the first line of search, the recipients the others:
		// the id starts with the term, or a line after the first holds it.
		// On PostgreSQL one trigram index serves both. public_search is
		// NULL, and matches nothing, until Open has filled it in.
		col := "n.search"
		if q.Public {
			col = "n.public_search"
		}
		esc := escapeLike(term)
		where = append(where, `(`+col+` LIKE `+arg(esc+"%")+` ESCAPE '\' OR `+col+` LIKE `+arg("%\n%"+esc+"%")+` ESCAPE '\')`)
	}
	query = `SELECT n.id, n.tenant, n.created_at, n.due_at, n.accepted, n.channels, n.recipients FROM notifications n`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY n.created_at DESC, n.id DESC LIMIT " + arg(limit+1)
	return query, args, limit, nil
}

// copyStatuses fills in the Copies of items.
func (s *Store) copyStatuses(ctx context.Context, items []Summary) error {
	if len(items) == 0 {
		return nil
	}
	at := make(map[string]int, len(items))
	ids := make([]string, len(items))
	for i, n := range items {
		at[n.ID] = i
		ids[i] = n.ID
	}
	in, args := s.d.in("notification_id", ids)
	rows, err := s.read.QueryContext(ctx,
		`SELECT notification_id, channel, recipient, status FROM copies WHERE `+in+` ORDER BY notification_id, channel, recipient`, args...)
	if err != nil {
		return fmt.Errorf("list copies: %w", err)
	}
	err = each(rows, func() error {
		var id string
		var c notification.CopyStatus
		if err := rows.Scan(&id, &c.Channel, &c.Recipient, &c.Status); err != nil {
			return err
		}
		n := &items[at[id]]
		n.Copies = append(n.Copies, c)
		return nil
	})
	if err != nil {
		return fmt.Errorf("list copies: %w", err)
	}
	return nil
}

// escapeLike makes s match itself in a LIKE pattern with ESCAPE '\'.
func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// A cursor is the key of the last item of a page, (created_at in
// microseconds, id), in URL-safe base64: opaque to clients, and safe in a
// query string.
func encodeCursor(at time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(at.UnixMicro(), 10) + "," + id))
}

func decodeCursor(c string) (time.Time, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return time.Time{}, "", fmt.Errorf("%w: not base64", ErrBadCursor)
	}
	micros, id, ok := strings.Cut(string(b), ",")
	if !ok || id == "" {
		return time.Time{}, "", fmt.Errorf("%w: no id", ErrBadCursor)
	}
	us, err := strconv.ParseInt(micros, 10, 64)
	if err != nil {
		return time.Time{}, "", fmt.Errorf("%w: bad time", ErrBadCursor)
	}
	return time.UnixMicro(us).UTC(), id, nil
}
