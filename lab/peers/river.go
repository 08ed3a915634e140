package peers

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverPeer runs River on PostgreSQL, in a schema of its own migrated
// with rivermigrate: MaxAttempts is MaxRetries + 1, the worker's NextRetry
// a fixed delay, a job past its last attempt is discarded.
//
// What brings a retry back: a job whose retry is due within the scheduler
// interval (5s, River's JobSchedulerIntervalDefault; Config keeps it
// unexported, so it cannot be set) is set straight back to available by
// the executor, with scheduled_at in the future (River's eager retry,
// riverqueue/river#105); only longer delays wait for the JobScheduler, a
// maintenance service of the elected leader that moves due retryable jobs
// to available every interval. A fetch locks available jobs whose
// scheduled_at has passed, ordered by priority, scheduled_at and id, at
// most MaxWorkers less the jobs running, and runs at most once per
// FetchCooldown (after a completion frees a worker) or every
// FetchPollInterval. A retry's scheduled_at is later than that of every
// job enqueued before it, so it waits behind the backlog, which drains at
// most MaxWorkers jobs per fetch: FetchCooldown is what bounds the rate,
// and so the lateness (see the --river-fetch-cooldown flag).
type riverPeer struct {
	o      Options
	w      Workload
	schema string
	pool   *pgxpool.Pool
	client *river.Client[pgx.Tx]
	tr     *tracker
	server string
}

func newRiver(o Options, w Workload) peer {
	return &riverPeer{o: o, w: w, schema: strings.ReplaceAll(uniqueName(), "-", "_")}
}

// riverArgs are a job's arguments: its id.
type riverArgs struct {
	ID string `json:"id"`
}

// Kind names the job type.
func (riverArgs) Kind() string { return "bench_job" }

// riverWorker works a job with the tracker.
type riverWorker struct {
	river.WorkerDefaults[riverArgs]
	p *riverPeer
}

// Work is the handler.
func (w *riverWorker) Work(_ context.Context, job *river.Job[riverArgs]) error {
	return w.p.tr.Attempt(job.Args.ID, job.Attempt)
}

// NextRetry is the fixed delay.
func (w *riverWorker) NextRetry(*river.Job[riverArgs]) time.Time { return time.Now().Add(w.p.w.Delay) }

func (r *riverPeer) Setup(ctx context.Context) error {
	pool, err := pgxpool.New(ctx, r.o.PostgresDSN)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	r.pool = pool
	var version string
	if err := pool.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	r.server = "PostgreSQL " + strings.Fields(version)[0]
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{r.schema}.Sanitize()); err != nil {
		return fmt.Errorf("create schema %s: %w", r.schema, err)
	}
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	driver := riverpgxv5.New(pool)
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: r.schema, Logger: quiet})
	if err != nil {
		return fmt.Errorf("river migrator: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate river into %s: %w", r.schema, err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &riverWorker{p: r})
	r.client, err = river.NewClient(driver, &river.Config{
		Schema:            r.schema,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: r.w.Concurrency}},
		Workers:           workers,
		FetchCooldown:     r.o.RiverCooldown,
		FetchPollInterval: r.o.RiverPoll,
		Logger:            quiet,
	})
	if err != nil {
		return fmt.Errorf("river client: %w", err)
	}
	return nil
}

func (r *riverPeer) Enqueue(ctx context.Context, ids []string) error {
	const batch = 5000
	opts := &river.InsertOpts{MaxAttempts: r.w.MaxRetries + 1}
	for len(ids) > 0 {
		n := min(batch, len(ids))
		params := make([]river.InsertManyParams, n)
		for i, id := range ids[:n] {
			params[i] = river.InsertManyParams{Args: riverArgs{ID: id}, InsertOpts: opts}
		}
		if _, err := r.client.InsertManyFast(ctx, params); err != nil {
			return fmt.Errorf("insert jobs: %w", err)
		}
		ids = ids[n:]
	}
	return nil
}

func (r *riverPeer) Work(ctx context.Context, tr *tracker) error {
	r.tr = tr // before Start runs a worker
	if err := r.client.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("start river: %w", err)
	}
	<-ctx.Done()
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
	defer cancel()
	return r.client.Stop(stop)
}

func (r *riverPeer) Parked(ctx context.Context) (int, error) {
	var n int
	err := r.pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{r.schema, "river_job"}.Sanitize()+" WHERE state = 'discarded'").Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count discarded jobs: %w", err)
	}
	return n, nil
}

func (r *riverPeer) Cleanup(ctx context.Context) error {
	if r.pool == nil {
		return nil
	}
	defer r.pool.Close()
	_, err := r.pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{r.schema}.Sanitize()+" CASCADE")
	if err != nil {
		return fmt.Errorf("drop schema %s: %w", r.schema, err)
	}
	return nil
}

func (r *riverPeer) Server() string { return r.server }

func (r *riverPeer) Settings() []string {
	return []string{
		fmt.Sprintf("riverpgxv5, a schema of its own (Config.Schema) migrated with rivermigrate; one queue with MaxWorkers %d; MaxAttempts %d; the worker's NextRetry returns now + %s; exhausted jobs are discarded",
			r.w.Concurrency, r.w.MaxRetries+1, r.w.Delay),
		fmt.Sprintf("FetchCooldown %s (default 100ms, least allowed 1ms): the least time between two fetches, each of which takes at most MaxWorkers (%d) jobs, so with a backlog it bounds the rate; its doc says \"Throughput is limited by this value\"",
			r.o.RiverCooldown, r.w.Concurrency),
		fmt.Sprintf("FetchPollInterval %s (default 1s): the fetch that runs when nothing else triggers one, which is what picks up a due retry once the queue has run dry", r.o.RiverPoll),
		"scheduler interval 5s (the default; Config keeps it unexported): a retry due sooner is set available at once, with its scheduled_at in the future, and needs no scheduler run; inserts notify over LISTEN/NOTIFY",
		"completed jobs are kept as rows (CompletedJobRetentionPeriod 24h, the default) until the schema is dropped",
	}
}
