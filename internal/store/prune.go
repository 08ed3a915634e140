package store

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// defaultPruneBatch is how many notifications one Prune statement deletes,
// with their copies, events and attempts: enough to make progress, few
// enough that the write lock is held for milliseconds, not seconds.
const defaultPruneBatch = 1000

// The batches Prune deletes.
const (
	pruneNotifications = `SELECT id FROM notifications WHERE created_at < $1 ORDER BY created_at LIMIT $2`
	pruneKeys          = `SELECT scope, key FROM idempotency_keys WHERE expires_at < $1 ORDER BY expires_at LIMIT $2`
	// A copy's hold outlives its notification until it is as old as the
	// notifications pruned: a worker may hold a copy, and give it back,
	// before the history hears of the notification.
	pruneHolds = `SELECT notification_id, channel, recipient FROM copy_holds h WHERE until < $1
		AND NOT EXISTS (SELECT 1 FROM notifications n WHERE n.id = h.notification_id) LIMIT $2`
	// A dead-letter job goes once it has ended, its journal first; a
	// running one stays whatever its age.
	pruneJobReplays = `SELECT r.job_id, r.message_id, r.copy, r.source, r.round FROM dead_letter_job_replays r
		JOIN dead_letter_jobs j ON j.id = r.job_id WHERE j.state <> 'running' AND j.finished_at < $1 LIMIT $2`
	pruneJobs = `SELECT id FROM dead_letter_jobs WHERE state <> 'running' AND finished_at < $1 LIMIT $2`
)

// Prune deletes the notifications created before before, with their
// copies, events and attempts, and the idempotency keys that expired
// before it, and the holds on copies (HoldCopy, Cancel) of notifications
// no longer there, and the dead-letter jobs that ended before it, with
// their journals. It deletes in batches, each its own transaction, so that a
// large prune never holds the write lock for long, and returns how many
// notifications and keys it deleted. It then refreshes the planner's
// statistics.
func (s *Store) Prune(ctx context.Context, before time.Time) (int64, error) {
	ts := s.d.ts(micro(before))
	var total int64
	for _, stmt := range []struct {
		what, query string
		before      any
		counted     bool
	}{
		{"notifications", `DELETE FROM notifications WHERE id IN (` + pruneNotifications + `)`, ts, true},
		{"idempotency keys", `DELETE FROM idempotency_keys WHERE (scope, key) IN (` + pruneKeys + `)`, ts, true},
		{"copy holds", `DELETE FROM copy_holds WHERE (notification_id, channel, recipient) IN (` + pruneHolds + `)`, micro(before).UnixMicro(), false},
		{"dead-letter job journals", `DELETE FROM dead_letter_job_replays WHERE (job_id, message_id, copy, source, round) IN (` + pruneJobReplays + `)`, ts, false},
		{"dead-letter jobs", `DELETE FROM dead_letter_jobs WHERE id IN (` + pruneJobs + `)`, ts, false},
	} {
		for {
			if err := ctx.Err(); err != nil {
				return total, err
			}
			res, err := s.write.ExecContext(ctx, s.d.q(stmt.query), stmt.before, s.pruneBatch)
			if err != nil {
				return total, fmt.Errorf("prune %s: %w", stmt.what, err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return total, fmt.Errorf("prune %s: %w", stmt.what, err)
			}
			if stmt.counted {
				total += n
			}
			if n < int64(s.pruneBatch) {
				break
			}
		}
	}
	// Fresh planner statistics after a large delete. On PostgreSQL
	// autovacuum does this too, where it is on; without it the planner
	// would keep plans made when the tables were small, and read a batch's
	// events back with a sequential scan.
	stats := "ANALYZE notifications, copies, events, attempts, idempotency_keys"
	if s.d == sqlite {
		stats = "PRAGMA optimize"
	}
	if _, err := s.write.ExecContext(ctx, stats); err != nil {
		return total, fmt.Errorf("refresh planner statistics: %w", err)
	}
	return total, nil
}

// RunPruner prunes what is older than retention now, then again every
// interval, until ctx is done. It logs how many rows each run deleted, and
// the errors, which it does not return: the next run tries again.
func (s *Store) RunPruner(ctx context.Context, every, retention time.Duration, now func() time.Time, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		before := now().Add(-retention)
		start := time.Now()
		n, err := s.Prune(ctx, before)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			log.Error("prune history", "error", err, "before", before, "rows", n)
		default:
			log.Info("pruned history", "rows", n, "before", before, "duration_ms", time.Since(start).Milliseconds())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
