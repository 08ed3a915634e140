package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// The states of a DeadLetterJob.
const (
	JobRunning   = "running"
	JobDone      = "done"
	JobFailed    = "failed"
	JobCancelled = "cancelled"
)

// ErrLeaseLost means another process holds a job's lease now: the one
// that lost it must stop working on the job.
var ErrLeaseLost = errors.New("the job's lease is held by another process")

// DeadLetterJob is a bulk replay or purge of the dead-letter queue, as the
// store keeps it.
type DeadLetterJob struct {
	ID string
	// Action is "replay" or "purge".
	Action string
	// Selection is the request's selection of parked messages, as JSON.
	Selection []byte
	State     string
	JobProgress
	CreatedAt  time.Time
	FinishedAt *time.Time
	// LeaseOwner is the process working on the job until LeaseUntil.
	LeaseOwner string
	LeaseUntil time.Time
	// Takeovers counts the times a process took the job over from one
	// whose lease lapsed.
	Takeovers int64
	// Tenant is the tenant whose parked copies the job acts on, "" for
	// the default tenant; AllTenants, an operator's job over every
	// tenant's, in which case Tenant is "".
	Tenant     string
	AllTenants bool
}

// JobProgress is how far a job has got.
type JobProgress struct {
	Matched, Done, Failed int64
	LastError             string
}

const jobColumns = `id, action, selection, state, matched, done, failed, last_error, created_at, finished_at, lease_owner, lease_until, takeovers, tenant`

func (s *Store) scanJob(row interface{ Scan(...any) error }) (DeadLetterJob, error) {
	var j DeadLetterJob
	var sel string
	var tenant sql.NullString
	err := row.Scan(&j.ID, &j.Action, &sel, &j.State, &j.Matched, &j.Done, &j.Failed, &j.LastError, timeCol{&j.CreatedAt},
		nullTimeCol{&j.FinishedAt}, &j.LeaseOwner, timeCol{&j.LeaseUntil}, &j.Takeovers, &tenant)
	j.Selection = []byte(sel)
	// NULL is every tenant's: see 0015_dead_letter_job_tenant.sql.
	j.Tenant, j.AllTenants = tenant.String, !tenant.Valid
	return j, err
}

// CreateDeadLetterJob stores a new running job, its lease held by
// j.LeaseOwner until j.LeaseUntil.
func (s *Store) CreateDeadLetterJob(ctx context.Context, j DeadLetterJob) error {
	if j.Action != "replay" && j.Action != "purge" {
		return fmt.Errorf("create job: %w: action %q", ErrInvalid, j.Action)
	}
	if j.AllTenants && j.Tenant != "" {
		return fmt.Errorf("create job: %w: tenant %q with every tenant", ErrInvalid, j.Tenant)
	}
	tenant := sql.NullString{String: j.Tenant, Valid: !j.AllTenants}
	_, err := s.write.ExecContext(ctx, s.d.q(`INSERT INTO dead_letter_jobs (id, action, selection, state, created_at, lease_owner, lease_until, tenant)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`), j.ID, j.Action, string(j.Selection), JobRunning, s.d.ts(j.CreatedAt), j.LeaseOwner, s.d.ts(j.LeaseUntil), tenant)
	if err != nil {
		return fmt.Errorf("create job %s: %w", j.ID, err)
	}
	return nil
}

// DeadLetterJob returns the job id; ErrNotFound if there is none.
func (s *Store) DeadLetterJob(ctx context.Context, id string) (DeadLetterJob, error) {
	j, err := s.scanJob(s.read.QueryRowContext(ctx, s.d.q(`SELECT `+jobColumns+` FROM dead_letter_jobs WHERE id = $1`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return j, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return j, fmt.Errorf("read job %s: %w", id, err)
	}
	return j, nil
}

// TakeOverDeadLetterJob gives owner the lease, until until, of one running
// job whose lease lapsed before now, oldest first, and returns it; false
// when there is none. One statement takes it, so two processes never both
// get the same job.
func (s *Store) TakeOverDeadLetterJob(ctx context.Context, owner string, now, until time.Time) (DeadLetterJob, bool, error) {
	for {
		var id string
		err := s.read.QueryRowContext(ctx, s.d.q(`SELECT id FROM dead_letter_jobs WHERE state = 'running' AND lease_until < $1
			ORDER BY created_at LIMIT 1`), s.d.ts(now)).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return DeadLetterJob{}, false, nil
		}
		if err != nil {
			return DeadLetterJob{}, false, fmt.Errorf("find a lapsed job: %w", err)
		}
		res, err := s.write.ExecContext(ctx, s.d.q(`UPDATE dead_letter_jobs SET lease_owner = $2, lease_until = $3, takeovers = takeovers + 1
			WHERE id = $1 AND state = 'running' AND lease_until < $4`), id, owner, s.d.ts(until), s.d.ts(now))
		if err != nil {
			return DeadLetterJob{}, false, fmt.Errorf("take over job %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			continue // another process took it first: look again
		}
		j, err := s.DeadLetterJob(ctx, id)
		return j, err == nil, err
	}
}

// SettleCancelledJob stores the last progress of owner's run of job id,
// which was cancelled while it ran: the counts the cancel found were the
// run's last renewal's, up to a renewal behind what it did before it
// stopped. It does nothing to a job owner no longer runs.
func (s *Store) SettleCancelledJob(ctx context.Context, id, owner string, p JobProgress) error {
	if _, err := s.write.ExecContext(ctx, s.d.q(`UPDATE dead_letter_jobs SET matched = $3, done = $4, failed = $5, lease_owner = ''
		WHERE id = $1 AND lease_owner = $2 AND state = 'cancelled'`), id, owner, p.Matched, p.Done, p.Failed); err != nil {
		return fmt.Errorf("settle cancelled job %s: %w", id, err)
	}
	return nil
}

// RenewDeadLetterJob extends owner's lease of job id to until and stores
// its progress; ErrLeaseLost if owner no longer holds it.
func (s *Store) RenewDeadLetterJob(ctx context.Context, id, owner string, until time.Time, p JobProgress) error {
	res, err := s.write.ExecContext(ctx, s.d.q(`UPDATE dead_letter_jobs SET lease_until = $3, matched = $4, done = $5, failed = $6, last_error = $7
		WHERE id = $1 AND lease_owner = $2 AND state = 'running'`), id, owner, s.d.ts(until), p.Matched, p.Done, p.Failed, p.LastError)
	if err != nil {
		return fmt.Errorf("renew job %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("renew job %s: %w", id, ErrLeaseLost)
	}
	return nil
}

// FinishDeadLetterJob ends owner's job id in state (done, failed or
// cancelled) with its last progress; ErrLeaseLost if owner no longer
// holds it.
func (s *Store) FinishDeadLetterJob(ctx context.Context, id, owner, state string, p JobProgress, at time.Time) error {
	res, err := s.write.ExecContext(ctx, s.d.q(`UPDATE dead_letter_jobs SET state = $3, matched = $4, done = $5, failed = $6, last_error = $7,
		finished_at = $8, lease_owner = '' WHERE id = $1 AND lease_owner = $2 AND state = 'running'`),
		id, owner, state, p.Matched, p.Done, p.Failed, p.LastError, s.d.ts(at))
	if err != nil {
		return fmt.Errorf("finish job %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("finish job %s: %w", id, ErrLeaseLost)
	}
	return nil
}

// JobReplay names one parked copy a replay job replayed: its message id,
// copy, source queue and the round that parked it.
type JobReplay struct {
	MessageID, Copy, Source string
	Round                   int
}

// RecordJobReplay writes r into job's journal. Writing it twice is no
// error.
func (s *Store) RecordJobReplay(ctx context.Context, job string, r JobReplay) error {
	_, err := s.write.ExecContext(ctx, s.d.q(`INSERT INTO dead_letter_job_replays (job_id, message_id, copy, source, round)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`), job, r.MessageID, r.Copy, r.Source, r.Round)
	if err != nil {
		return fmt.Errorf("journal a replay of job %s: %w", job, err)
	}
	return nil
}

// JobReplayed reports whether job's journal holds r.
func (s *Store) JobReplayed(ctx context.Context, job string, r JobReplay) (bool, error) {
	var one int
	err := s.write.QueryRowContext(ctx, s.d.q(`SELECT 1 FROM dead_letter_job_replays
		WHERE job_id = $1 AND message_id = $2 AND copy = $3 AND source = $4 AND round = $5`), job, r.MessageID, r.Copy, r.Source, r.Round).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read the journal of job %s: %w", job, err)
	}
	return true, nil
}

// JobReplays counts the copies in job's journal: how many it replayed,
// across every process that worked on it.
func (s *Store) JobReplays(ctx context.Context, job string) (int64, error) {
	var n int64
	if err := s.write.QueryRowContext(ctx, s.d.q(`SELECT count(*) FROM dead_letter_job_replays WHERE job_id = $1`), job).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the journal of job %s: %w", job, err)
	}
	return n, nil
}

// ErrJobEnded means a job asked to stop had already ended.
var ErrJobEnded = errors.New("the job has already ended")

// CancelDeadLetterJob ends the running job id as cancelled at at and
// returns it: its process finds its lease gone at its next renewal and
// stops, after the copy in hand, and then settles its counts
// (SettleCancelledJob). ErrNotFound if there is no such job, ErrJobEnded
// (with the job) if it had already ended.
func (s *Store) CancelDeadLetterJob(ctx context.Context, id string, at time.Time) (DeadLetterJob, error) {
	res, err := s.write.ExecContext(ctx, s.d.q(`UPDATE dead_letter_jobs SET state = 'cancelled', finished_at = $2
		WHERE id = $1 AND state = 'running'`), id, s.d.ts(at))
	if err != nil {
		return DeadLetterJob{}, fmt.Errorf("cancel job %s: %w", id, err)
	}
	n, _ := res.RowsAffected()
	j, err := s.DeadLetterJob(ctx, id)
	if err == nil && n == 0 {
		err = fmt.Errorf("job %s is %s: %w", id, j.State, ErrJobEnded)
	}
	return j, err
}
