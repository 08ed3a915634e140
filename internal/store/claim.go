package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// ClaimState says what a Claim found.
type ClaimState int

const (
	// ClaimNew means the caller now owns the key: it must publish, then
	// call Complete, or Release if publishing failed.
	ClaimNew ClaimState = iota + 1
	// ClaimDone means a request with the same key and fingerprint
	// completed earlier: answer with its ID and Response.
	ClaimDone
	// ClaimPending means a request with the same key and fingerprint is
	// being published right now.
	ClaimPending
	// ClaimMismatch means the key was used for a different request.
	ClaimMismatch
)

// String names the state: "new", "done", "pending" or "mismatch".
func (c ClaimState) String() string {
	switch c {
	case ClaimNew:
		return "new"
	case ClaimDone:
		return "done"
	case ClaimPending:
		return "pending"
	case ClaimMismatch:
		return "mismatch"
	}
	return fmt.Sprintf("ClaimState(%d)", int(c))
}

// Claim is the result of claiming an Idempotency-Key.
type Claim struct {
	// State says what the claim found.
	State ClaimState
	// ID is the notification id stored with the key: the caller's own for
	// ClaimNew, the earlier request's otherwise.
	ID string
	// Response is the body Complete stored, for ClaimDone.
	Response []byte
	// CreatedAt is when the key was first claimed.
	CreatedAt time.Time
}

// Claim claims key within scope (the client's identity, say) for a
// request with this fingerprint and notification id. A claim older than
// ttl counts as absent and is taken over. Of many concurrent Claims of one
// key, on any number of connections or replicas, exactly one is ClaimNew:
// the database's unique key decides, not a lock in this process.
func (s *Store) Claim(ctx context.Context, scope, key string, fingerprint []byte, id string, now time.Time, ttl time.Duration) (Claim, error) {
	now = micro(now)
	if fingerprint == nil {
		fingerprint = []byte{}
	}
	// A claim released between our insert and our read is gone: try again.
	for range 3 {
		var got string
		err := s.write.QueryRowContext(ctx, s.d.q(`
			INSERT INTO idempotency_keys (scope, key, fingerprint, notification_id, response, done, created_at, expires_at)
			VALUES ($1, $2, $3, $4, NULL, $5, $6, $7)
			ON CONFLICT (scope, key) DO UPDATE SET fingerprint = excluded.fingerprint,
				notification_id = excluded.notification_id, response = NULL, done = excluded.done,
				created_at = excluded.created_at, expires_at = excluded.expires_at
			WHERE idempotency_keys.created_at < $8
			RETURNING notification_id`),
			scope, key, fingerprint, id, s.d.bool(false), s.d.ts(now), s.d.ts(now.Add(ttl)), s.d.ts(now.Add(-ttl))).Scan(&got)
		if err == nil {
			return Claim{State: ClaimNew, ID: got, CreatedAt: now}, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return Claim{}, fmt.Errorf("claim key %q: %w", key, err)
		}
		// The key is held and not expired.
		var (
			c    Claim
			fp   []byte
			done bool
		)
		err = s.write.QueryRowContext(ctx, s.d.q(`
			SELECT fingerprint, notification_id, response, done, created_at FROM idempotency_keys WHERE scope = $1 AND key = $2`),
			scope, key).Scan(&fp, &c.ID, &c.Response, &done, timeCol{&c.CreatedAt})
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return Claim{}, fmt.Errorf("read key %q: %w", key, err)
		}
		switch {
		case !bytes.Equal(fp, fingerprint):
			c.State, c.Response = ClaimMismatch, nil
		case done:
			c.State = ClaimDone
		default:
			c.State = ClaimPending
		}
		return c, nil
	}
	return Claim{}, fmt.Errorf("claim key %q: claimed and released repeatedly, try again", key)
}

// Complete records that the request holding key was published, with the
// response to give its repeats. It returns an error wrapping ErrNotFound
// when the key is not claimed.
func (s *Store) Complete(ctx context.Context, scope, key string, response []byte) error {
	if response == nil {
		response = []byte{}
	}
	res, err := s.write.ExecContext(ctx, s.d.q(`UPDATE idempotency_keys SET response = $3, done = $4 WHERE scope = $1 AND key = $2`),
		scope, key, response, s.d.bool(true))
	if err != nil {
		return fmt.Errorf("complete key %q: %w", key, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("complete key %q: %w", key, ErrNotFound)
	}
	return nil
}

// Release forgets a claim whose request could not be published, so that
// a retry can claim the key again. A completed claim is kept.
func (s *Store) Release(ctx context.Context, scope, key string) error {
	if _, err := s.write.ExecContext(ctx, s.d.q(`DELETE FROM idempotency_keys WHERE scope = $1 AND key = $2 AND done = $3`),
		scope, key, s.d.bool(false)); err != nil {
		return fmt.Errorf("release key %q: %w", key, err)
	}
	return nil
}
