package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/retry"
)

// JobStore keeps the dead-letter jobs and the journal of their replays;
// *store.Store is one.
type JobStore interface {
	CreateDeadLetterJob(ctx context.Context, j store.DeadLetterJob) error
	DeadLetterJob(ctx context.Context, id string) (store.DeadLetterJob, error)
	TakeOverDeadLetterJob(ctx context.Context, owner string, now, until time.Time) (store.DeadLetterJob, bool, error)
	RenewDeadLetterJob(ctx context.Context, id, owner string, until time.Time, p store.JobProgress) error
	FinishDeadLetterJob(ctx context.Context, id, owner, state string, p store.JobProgress, at time.Time) error
	SettleCancelledJob(ctx context.Context, id, owner string, p store.JobProgress) error
	RecordJobReplay(ctx context.Context, job string, r store.JobReplay) error
	JobReplayed(ctx context.Context, job string, r store.JobReplay) (bool, error)
	JobReplays(ctx context.Context, job string) (int64, error)
	CancelDeadLetterJob(ctx context.Context, id string, at time.Time) (store.DeadLetterJob, error)
}

// DefaultJobLease is how long a process holds a job's lease without
// renewing it when DeadLetterJobs.Lease is zero: a job whose process died
// is taken over about this long after.
const DefaultJobLease = 15 * time.Second

// DeadLetterJobs runs bulk replays and purges of the dead-letter queue as
// jobs: it stores each in Store, runs it in the background of this
// process under a lease it renews with the job's progress, and takes
// over the jobs whose process died (Run). See docs/guarantees.md
// for what a job promises across a crash.
type DeadLetterJobs struct {
	Store JobStore
	// Dial opens the broker connection one pass of a job runs on; done
	// closes it.
	Dial     func() (dl retry.DeadLetters, done func(), err error)
	Topology retry.Topology
	Log      *slog.Logger
	// Owner names this process in the leases it holds; each run of a job
	// holds its lease as Owner#n, so that this process taking over a job
	// one of its own runs let lapse stops that run.
	Owner string
	// Lease is how long a lease lasts unrenewed; zero means
	// DefaultJobLease. It is renewed every third of it, or every second
	// if that is sooner.
	Lease time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// NewID makes a job's id; nil means NewID.
	NewID func() string

	mu sync.Mutex
	// ctx is what every job this process runs ends with: cancel ends it
	// when the context Run was given ends.
	ctx    context.Context
	cancel context.CancelFunc
	// wg counts the jobs running in this process; Run waits for them.
	wg sync.WaitGroup
	// runs numbers the runs of jobs in this process.
	runs atomic.Int64
	// turn lets one job at a time walk the queue: two passes at once would
	// each miss what the other holds.
	turn     chan struct{}
	turnOnce sync.Once
}

// runOwner names a new run of a job in this process's leases.
func (js *DeadLetterJobs) runOwner() string {
	return js.Owner + "#" + strconv.FormatInt(js.runs.Add(1), 10)
}

// takeTurn waits until no other job of this process walks the queue, or
// ctx ends; release ends the turn.
func (js *DeadLetterJobs) takeTurn(ctx context.Context) (release func(), err error) {
	js.turnOnce.Do(func() { js.turn = make(chan struct{}, 1) })
	select {
	case js.turn <- struct{}{}:
		return func() { <-js.turn }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (js *DeadLetterJobs) lease() time.Duration {
	if js.Lease > 0 {
		return js.Lease
	}
	return DefaultJobLease
}

// renewEvery is how often a running job renews its lease and stores its
// progress: every third of a lease, and at least every second, so that
// those who follow the job see it move.
func (js *DeadLetterJobs) renewEvery() time.Duration {
	return min(js.lease()/3, time.Second)
}

func (js *DeadLetterJobs) now() time.Time {
	if js.Now != nil {
		return js.Now()
	}
	return time.Now()
}

func (js *DeadLetterJobs) log() *slog.Logger {
	if js.Log != nil {
		return js.Log
	}
	return slog.New(slog.DiscardHandler)
}

// Run takes over the jobs whose lease lapsed, now and every third of a
// lease, and runs them, until ctx ends; then it waits for every job this
// process runs to stop. The jobs Start begins end with ctx too: one that
// has not finished keeps its state, running, and hands its lease back
// so that another process takes it over at once.
func (js *DeadLetterJobs) Run(ctx context.Context) {
	js.jobsContext()
	stop := context.AfterFunc(ctx, js.cancel)
	defer stop()
	defer js.wg.Wait()
	t := time.NewTicker(js.lease() / 3)
	defer t.Stop()
	for {
		for {
			j, ok, err := js.Store.TakeOverDeadLetterJob(ctx, js.runOwner(), js.now(), js.now().Add(js.lease()))
			if err != nil && ctx.Err() == nil {
				js.log().Error("take over dead-letter jobs", "error", err)
			}
			if !ok {
				break
			}
			js.log().Warn("took over a dead-letter job whose process stopped", "job_id", j.ID, "action", j.Action, "done", j.Done, "takeovers", j.Takeovers)
			js.start(j)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// jobsContext returns the context the jobs of this process run under,
// made on first use: a job started before Run ends with Run's context
// too.
func (js *DeadLetterJobs) jobsContext() context.Context {
	js.mu.Lock()
	defer js.mu.Unlock()
	if js.ctx == nil {
		js.ctx, js.cancel = context.WithCancel(context.Background())
	}
	return js.ctx
}

// start runs j in the background, under the jobs' context.
func (js *DeadLetterJobs) start(j store.DeadLetterJob) {
	ctx := js.jobsContext()
	js.wg.Add(1)
	go func() {
		defer js.wg.Done()
		js.run(ctx, j)
	}()
}

// Start stores a new job that replays or purges sel within the tenants
// of sc and begins it.
func (js *DeadLetterJobs) Start(ctx context.Context, action string, sel selection, sc tenantScope) (store.DeadLetterJob, error) {
	raw, err := json.Marshal(sel)
	if err != nil {
		return store.DeadLetterJob{}, err
	}
	newID := js.NewID
	if newID == nil {
		newID = NewID
	}
	now := js.now()
	j := store.DeadLetterJob{ID: "job_" + strings.TrimPrefix(newID(), IDPrefix), Action: action, Selection: raw, State: store.JobRunning,
		CreatedAt: now, LeaseOwner: js.runOwner(), LeaseUntil: now.Add(js.lease()), Tenant: sc.tenant, AllTenants: sc.all}
	if err := js.Store.CreateDeadLetterJob(ctx, j); err != nil {
		return j, err
	}
	js.start(j)
	return j, nil
}

// MaxJobTakeovers is how many times a job the broker stopped (it could
// not be reached, or its connection closed) is taken up again before it
// fails.
const MaxJobTakeovers = 10

// brokerLost reports whether err says the broker connection went: a job
// stopped by it goes on later rather than fail.
func brokerLost(err error) bool {
	var aerr *amqp.Error
	return errors.Is(err, amqp.ErrClosed) || errors.As(err, &aerr) && aerr.Server && !aerr.Recover
}

// journal is a job's retry.Journal in the store.
type journal struct {
	store JobStore
	job   string
}

func replayOf(k retry.ReplayKey) store.JobReplay {
	return store.JobReplay{MessageID: k.ID, Copy: k.Copy, Source: k.Source, Round: k.Round}
}

func (j journal) Replayed(ctx context.Context, k retry.ReplayKey) (bool, error) {
	return j.store.JobReplayed(ctx, j.job, replayOf(k))
}

func (j journal) Record(ctx context.Context, k retry.ReplayKey) error {
	// The write must land even if the job is being stopped: the copy
	// is confirmed, and the journal is what keeps it from going twice.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return j.store.RecordJobReplay(ctx, j.job, replayOf(k))
}

// run makes one pass of job j over the queue and records how it ended.
func (js *DeadLetterJobs) run(ctx context.Context, j store.DeadLetterJob) {
	log := js.log().With("job_id", j.ID, "action", j.Action)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		mu   sync.Mutex
		prog store.JobProgress
		base int64 // what the processes before this one did
	)
	finish := func(state string, err error) {
		mu.Lock()
		p := prog
		mu.Unlock()
		if err != nil {
			p.LastError = err.Error()
		}
		ctx := context.WithoutCancel(ctx)
		if ferr := js.Store.FinishDeadLetterJob(ctx, j.ID, j.LeaseOwner, state, p, js.now()); ferr != nil {
			log.Error("finish dead-letter job", "error", ferr)
			return
		}
		log.Info("dead-letter job ended", "state", state, "matched", p.Matched, "done", p.Done, "failed", p.Failed, "error", p.LastError)
	}
	var sel selection
	if err := json.Unmarshal(j.Selection, &sel); err != nil {
		finish(store.JobFailed, fmt.Errorf("read the job's selection: %w", err))
		return
	}
	f, bad := sel.filter(js.Topology)
	if len(bad) > 0 {
		finish(store.JobFailed, fmt.Errorf("the job's selection: %w", bad))
		return
	}
	// The scope is the job's, as stored when it was created, not the
	// selection's: a process that takes the job over keeps it to the
	// tenant it was made for.
	b := retry.Bulk{Filter: jobScope(j).narrow(f), Purge: j.Action == "purge"}
	base = j.Done
	if !b.Purge {
		b.Journal = journal{js.Store, j.ID}
		n, err := js.Store.JobReplays(ctx, j.ID)
		if err != nil {
			finish(store.JobFailed, err)
			return
		}
		base = n
	}
	prog = store.JobProgress{Matched: base, Done: base}
	lastLog := time.Now()
	b.Progress = func(p retry.Progress) {
		mu.Lock()
		prog = store.JobProgress{Matched: base + int64(p.Matched-p.Journaled), Done: base + int64(p.Done), Failed: int64(p.Failed), LastError: p.LastError}
		cur := prog
		mu.Unlock()
		if time.Since(lastLog) >= time.Second {
			lastLog = time.Now()
			log.Info("dead-letter job progress", "matched", cur.Matched, "done", cur.Done, "failed", cur.Failed)
		}
	}

	// The heartbeat renews the lease with the progress; a lease another
	// process took stops the pass.
	errLost := errors.New("lease lost")
	beat := make(chan struct{})
	go func() {
		defer close(beat)
		t := time.NewTicker(js.renewEvery())
		defer t.Stop()
		held := j.LeaseUntil
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			mu.Lock()
			p := prog
			mu.Unlock()
			until := js.now().Add(js.lease())
			err := js.Store.RenewDeadLetterJob(ctx, j.ID, j.LeaseOwner, until, p)
			switch {
			case err == nil:
				held = until
			case errors.Is(err, store.ErrLeaseLost):
				log.Warn("the dead-letter job was cancelled, or another process took it over: stopping")
				cancel(errLost)
				return
			case ctx.Err() != nil:
			case !js.now().Before(held.Add(-js.lease() / 3)):
				// The lease is about to lapse and could not be renewed:
				// another process may take the job over, and must not
				// find this one still at work.
				log.Error("renew a dead-letter job's lease: stopping before it lapses", "error", err)
				cancel(errLost)
				return
			default:
				log.Error("renew a dead-letter job's lease", "error", err)
			}
		}
	}()
	defer func() { cancel(nil); <-beat }()

	log.Info("dead-letter job started", "selection", string(j.Selection), "tenant", jobScope(j).String(), "done_before", base)
	// retryLater leaves the job running, its lease kept until it lapses,
	// with err as its last error: a process takes it over then, this one
	// or another, and the job goes on once the broker is back.
	retryLater := func(err error) {
		mu.Lock()
		cur := prog
		mu.Unlock()
		cur.LastError = err.Error()
		if rerr := js.Store.RenewDeadLetterJob(context.WithoutCancel(ctx), j.ID, j.LeaseOwner, js.now().Add(js.lease()), cur); rerr != nil {
			log.Error("keep a dead-letter job for later", "error", rerr)
		}
		log.Warn("dead-letter job stopped by the broker: it goes on after its lease lapses", "error", err, "takeovers", j.Takeovers)
	}
	p, err := js.pass(ctx, b)
	b.Progress(p)
	switch {
	case err != nil && ctx.Err() == nil && (brokerLost(err) || errors.Is(err, errDial)) && j.Takeovers < MaxJobTakeovers:
		retryLater(err)
	case errors.Is(context.Cause(ctx), errLost):
		// Cancelled (or taken over): a cancelled job gets this run's last
		// counts, which its last renewal did not hold.
		mu.Lock()
		cur := prog
		mu.Unlock()
		if err := js.Store.SettleCancelledJob(context.WithoutCancel(ctx), j.ID, j.LeaseOwner, cur); err != nil {
			log.Error("settle a cancelled dead-letter job's counts", "error", err)
		}
	case ctx.Err() != nil:
		// The process is stopping: the job stays running, and its lease
		// goes back so that the next process takes it over at once.
		mu.Lock()
		cur := prog
		mu.Unlock()
		if err := js.Store.RenewDeadLetterJob(context.WithoutCancel(ctx), j.ID, j.LeaseOwner, js.now().Add(-time.Millisecond), cur); err != nil {
			log.Error("hand back a dead-letter job's lease", "error", err)
		}
		log.Info("dead-letter job interrupted: another process resumes it", "matched", cur.Matched, "done", cur.Done)
	case err != nil:
		finish(store.JobFailed, err)
	default:
		finish(store.JobDone, nil)
	}
}

// errDial marks a pass that could not reach the broker.
var errDial = errors.New("connect to the broker")

// pass waits for this process's turn, dials the broker and makes one
// pass of b over the queue.
func (js *DeadLetterJobs) pass(ctx context.Context, b retry.Bulk) (retry.Progress, error) {
	release, err := js.takeTurn(ctx)
	if err != nil {
		return retry.Progress{}, err
	}
	defer release()
	dl, done, err := js.Dial()
	if err != nil {
		return retry.Progress{}, fmt.Errorf("%w: %w", errDial, err)
	}
	defer done()
	return dl.Bulk(ctx, b)
}

// jobScope is the tenants whose parked copies j acts on.
func jobScope(j store.DeadLetterJob) tenantScope {
	return tenantScope{tenant: j.Tenant, all: j.AllTenants}
}

// newJobView is j as the API answers it.
func newJobView(j store.DeadLetterJob) notification.DeadLetterJob {
	return notification.DeadLetterJob{ID: j.ID, Tenant: j.Tenant, Action: j.Action, State: j.State, Selection: json.RawMessage(j.Selection), Matched: j.Matched,
		Done: j.Done, Failed: j.Failed, LastError: j.LastError, StartedAt: j.CreatedAt, FinishedAt: j.FinishedAt, Takeovers: j.Takeovers}
}

// errNoJob answers a job id nothing matches, or one of a tenant the
// request does not see: the two read alike.
func errNoJob(id string) *Problem {
	return newProblem(ProblemNotFound, http.StatusNotFound, "Not found", "no dead-letter job "+quote(id))
}

// visibleJob returns the job id if the request of ctx may see it;
// store.ErrNotFound if there is none or it is another tenant's.
func visibleJob(ctx context.Context, js JobStore, id string) (store.DeadLetterJob, error) {
	j, err := js.DeadLetterJob(ctx, id)
	if err == nil && !jobScope(j).seenBy(ctx) {
		return store.DeadLetterJob{}, fmt.Errorf("job %s: %w", id, store.ErrNotFound)
	}
	return j, err
}

// jobRequest is the body of POST /v1/dead-letters/jobs.
type jobRequest struct {
	Action string `json:"action"`
	selection
	// Confirm must be true for a purge.
	Confirm bool `json:"confirm"`
}

func handleCreateDeadLetterJob(deps Deps) http.HandlerFunc {
	return deps.serve(func(w http.ResponseWriter, r *http.Request) error {
		var req jobRequest
		if p := decodeSelection(r, &req, "action, "+orList(append(selectionFields, "all"))+", and confirm"); p != nil {
			return p
		}
		var bad notification.Invalid
		switch req.Action {
		case "replay":
		case "purge":
			if !req.Confirm {
				bad = append(bad, notification.FieldError{Field: "confirm", Message: "must be true: a purge deletes parked messages for good"})
			}
		default:
			bad = append(bad, notification.FieldError{Field: "action", Message: "replay or purge"})
		}
		_, invalid := req.filter(deps.Topology)
		sc, unseen := scopeOf(r.Context(), req.selection)
		if bad = append(append(append(req.checkSelected(), invalid...), unseen...), bad...); len(bad) > 0 {
			return invalidRequest(bad)
		}
		if deps.DeadLetterJobs == nil {
			return unavailable("dead-letter jobs need the history store")
		}
		j, err := deps.DeadLetterJobs.Start(r.Context(), req.Action, req.selection, sc)
		if err != nil {
			deps.Log.Error("start a dead-letter job", "error", err)
			return unavailable("the job could not be stored: " + err.Error())
		}
		w.Header().Set("Location", "/v1/dead-letters/jobs/"+j.ID)
		writeJSON(w, http.StatusAccepted, newJobView(j))
		return nil
	})
}

func handleGetDeadLetterJob(deps Deps) http.HandlerFunc {
	return deps.serve(func(w http.ResponseWriter, r *http.Request) error {
		if deps.DeadLetterJobs == nil {
			return unavailable("dead-letter jobs need the history store")
		}
		id := chi.URLParam(r, "id")
		j, err := visibleJob(r.Context(), deps.DeadLetterJobs.Store, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return errNoJob(id)
		case err != nil:
			deps.Log.Error("read a dead-letter job", "error", err)
			return unavailable("the job could not be read: " + err.Error())
		}
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, newJobView(j))
		return nil
	})
}

func handleCancelDeadLetterJob(deps Deps) http.HandlerFunc {
	return deps.serve(func(w http.ResponseWriter, r *http.Request) error {
		if deps.DeadLetterJobs == nil {
			return unavailable("dead-letter jobs need the history store")
		}
		id := chi.URLParam(r, "id")
		// A job's tenant never changes: one read tells whether the
		// request may cancel it.
		_, err := visibleJob(r.Context(), deps.DeadLetterJobs.Store, id)
		var j store.DeadLetterJob
		if err == nil {
			j, err = deps.DeadLetterJobs.Store.CancelDeadLetterJob(r.Context(), id, deps.Now())
		}
		switch {
		case errors.Is(err, store.ErrNotFound):
			return errNoJob(id)
		case errors.Is(err, store.ErrJobEnded):
			p := newProblem(ProblemJobEnded, http.StatusConflict, "Job already ended", err.Error())
			p.Members = struct {
				State string `json:"state"`
			}{j.State}
			return p
		case err != nil:
			deps.Log.Error("cancel a dead-letter job", "error", err)
			return unavailable("the job could not be cancelled: " + err.Error())
		}
		deps.Log.Info("dead-letter job cancelled", "job_id", j.ID, "done", j.Done)
		writeJSON(w, http.StatusOK, newJobView(j))
		return nil
	})
}
