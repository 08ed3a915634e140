package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

const (
	getNotification = `SELECT tenant, created_at, due_at, accepted, channels, recipients, payload FROM notifications WHERE id = $1`
	// getCopies reads copies and timelines in one statement, so that they
	// agree with each other even while events are being recorded.
	getCopies = `
		SELECT c.channel, c.recipient, c.status, c.reason, c.round, c.attempts, c.last_error, c.next_attempt_at, c.updated_at,
			a.round, a.attempt, a.at, a.outcome, a.error, a.reason, a.service, a.delay_ms, a.waited_ms, a.duration_ms, a.provider, a.deferred
		FROM copies c LEFT JOIN attempts a
			ON a.notification_id = c.notification_id AND a.channel = c.channel AND a.recipient = c.recipient
		WHERE c.notification_id = $1
		ORDER BY c.channel, c.recipient, a.round, a.attempt`
)

// Get returns the notification id with its copies and their timelines, or
// an error wrapping ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (*notification.View, error) {
	n := &notification.View{ID: id}
	var channels, recipients, payload []byte
	err := s.read.QueryRowContext(ctx, s.d.q(getNotification), id).
		Scan(&n.Tenant, timeCol{&n.CreatedAt}, nullTimeCol{&n.DueAt}, &n.Accepted, &channels, &recipients, &payload)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("notification %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read notification %q: %w", id, err)
	}
	if err := unmarshalStrings(channels, &n.Channels); err != nil {
		return nil, fmt.Errorf("read notification %q channels: %w", id, err)
	}
	if err := unmarshalStrings(recipients, &n.Recipients); err != nil {
		return nil, fmt.Errorf("read notification %q recipients: %w", id, err)
	}
	if len(payload) > 0 {
		n.Payload = json.RawMessage(payload)
	}
	rows, err := s.read.QueryContext(ctx, s.d.q(getCopies), id)
	if err != nil {
		return nil, fmt.Errorf("read copies of %q: %w", id, err)
	}
	err = each(rows, func() error {
		var (
			c                          notification.Copy
			round, attempt             sql.NullInt64
			at                         *time.Time
			outcome, aerr, reason, svc sql.NullString
			provider                   sql.NullString
			deferred                   sql.NullBool
			delay, waited, duration    sql.NullInt64
		)
		if err := rows.Scan(&c.Channel, &c.Recipient, &c.Status, &c.Reason, &c.Round, &c.AttemptCount, &c.LastError,
			nullTimeCol{&c.NextAttemptAt}, timeCol{&c.UpdatedAt},
			&round, &attempt, nullTimeCol{&at}, &outcome, &aerr, &reason, &svc, &delay, &waited, &duration, &provider, &deferred); err != nil {
			return err
		}
		if k := len(n.Copies); k == 0 || n.Copies[k-1].Channel != c.Channel || n.Copies[k-1].Recipient != c.Recipient {
			n.Copies = append(n.Copies, c)
		}
		if !round.Valid {
			return nil // a copy with no attempt yet
		}
		last := &n.Copies[len(n.Copies)-1]
		last.Attempts = append(last.Attempts, notification.Attempt{
			Round: int(round.Int64), N: int(attempt.Int64), At: *at, Outcome: retry.Outcome(outcome.String),
			Error: aerr.String, Reason: reason.String, Service: svc.String,
			DelayMS: ptrInt(delay), WaitedMS: ptrInt(waited), DurationMS: ptrInt(duration), Provider: provider.String, Deferred: deferred.Bool,
		})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read copies of %q: %w", id, err)
	}
	return n, nil
}

func unmarshalStrings(b []byte, dst *[]string) error {
	if len(b) == 0 {
		return nil
	}
	return json.Unmarshal(b, dst)
}
