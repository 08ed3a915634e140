package peers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/relay-demo/relay/lab/internal/unique"
)

// peer is one system under test. The harness calls Setup, Enqueue (every
// job, before the clock starts), Work (the clock runs; it returns once its
// workers have stopped after ctx is done), Parked, and Cleanup, which runs
// whatever happened before.
type peer interface {
	// Setup creates what the run needs on the server: queues, a schema.
	Setup(ctx context.Context) error
	// Enqueue hands every job to the server with the system's producer.
	Enqueue(ctx context.Context, ids []string) error
	// Work runs the system's workers, each attempt decided by tr, until
	// ctx is done.
	Work(ctx context.Context, tr *tracker) error
	// Parked asks the server how many jobs it holds parked (dead, archived,
	// discarded, poisoned).
	Parked(ctx context.Context) (int, error)
	// Cleanup deletes everything Setup and the run created.
	Cleanup(ctx context.Context) error
	// Settings says how the system was set up, for the table's notes.
	Settings() []string
	// Server names the server and its version, once Setup has run.
	Server() string
}

// system is a peer as the command line and the table know it.
type system struct {
	Name, Title string
	Server      Server
	New         func(o Options, w Workload) peer
	// Needs43 marks a system that runs on RabbitMQ 4.3 or later only: left
	// out of the default list on an older broker.
	Needs43 bool
	// Fsync, set for a system on Redis, runs it on a redis-server of its
	// own with appendonly yes and this appendfsync policy (everysec,
	// always), started for the run and stopped after it; empty runs it on
	// the Redis of --redis-addr as that server is.
	Fsync string
	// Floor is the name of the raw loop of the same kind, the row's own
	// baseline; empty for a row that is not relay's.
	Floor string
}

// systems lists every system, in the table's order.
var systems = []system{
	{Name: "relay-stages", Title: "relay (stages)", Server: RabbitMQ, New: newRelay(false, false), Floor: "raw"},
	{Name: "relay-direct", Title: "relay (direct)", Server: RabbitMQ, New: newRelay(true, false), Floor: "raw"},
	{Name: "relay-stages-quorum", Title: "relay (stages, quorum)", Server: RabbitMQ, New: newRelay(false, true), Floor: "raw-quorum"},
	{Name: "relay-direct-quorum", Title: "relay (direct, quorum)", Server: RabbitMQ, New: newRelay(true, true), Floor: "raw-quorum"},
	{Name: "relay-native", Title: "relay (native, quorum)", Server: RabbitMQ, New: newRelayNative, Needs43: true, Floor: "raw-native"},
	{Name: "raw", Title: "raw amqp091-go", Server: RabbitMQ, New: newRaw},
	{Name: "raw-quorum", Title: "raw amqp091-go (quorum)", Server: RabbitMQ, New: newRawKind(rawQuorum)},
	{Name: "raw-native", Title: "raw amqp091-go (native, quorum)", Server: RabbitMQ, New: newRawKind(rawNative), Needs43: true},
	{Name: "asynq", Title: "asynq", Server: Redis, New: newAsynq},
	{Name: "asynq-everysec", Title: "asynq (appendfsync everysec)", Server: Redis, New: newAsynq, Fsync: "everysec"},
	{Name: "asynq-always", Title: "asynq (appendfsync always)", Server: Redis, New: newAsynq, Fsync: "always"},
	{Name: "river", Title: "River", Server: PostgreSQL, New: newRiver},
	{Name: "watermill", Title: "watermill-amqp", Server: RabbitMQ, New: newWatermill},
}

// systemNamed finds a system by its flag name.
func systemNamed(name string) (system, bool) {
	for _, s := range systems {
		if s.Name == name {
			return s, true
		}
	}
	return system{}, false
}

// cleanupTimeout bounds the stopping of workers and the cleanup after a
// run, timed out or not.
const cleanupTimeout = 30 * time.Second

// runPeer runs the workload w on p and measures it; a failure or a
// timeout is the result's Err, with whatever was measured until then.
// Progress lines go to progress every o.Progress.
func runPeer(ctx context.Context, sys system, p peer, o Options, w Workload, progress io.Writer) (res Result) {
	res = Result{Name: sys.Name, Title: sys.Title, Workload: w}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	// The cleanup runs whatever happened, with a time of its own.
	defer func() {
		after, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if err := p.Cleanup(after); err != nil {
			// Said even after another failure: something is left on the
			// server.
			res.Err = strings.TrimPrefix(res.Err+"; cleanup: "+err.Error(), "; ")
		}
	}()

	if err := p.Setup(ctx); err != nil {
		res.Err = fmt.Sprintf("setup: %v", timedOut(ctx, o, err))
		return res
	}
	res.Server, res.Settings = p.Server(), p.Settings()
	t0 := time.Now()
	if err := p.Enqueue(ctx, w.IDs()); err != nil {
		res.Err = fmt.Sprintf("enqueue: %v", timedOut(ctx, o, err))
		return res
	}
	res.Enqueue = time.Since(t0)

	tr := newTracker(w)
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	worked := make(chan error, 1)
	start := time.Now()
	go func() { worked <- p.Work(workCtx, tr) }()

	tick := time.NewTicker(o.Progress)
	defer tick.Stop()
	var workErr error
	ended := false
wait:
	for {
		select {
		case <-tr.Done():
			break wait
		case workErr = <-worked:
			ended = true
			if workErr == nil {
				workErr = errors.New("the workers stopped before every job finished")
			}
			res.Err = fmt.Sprintf("work: %v", workErr)
			break wait
		case <-ctx.Done():
			n, _ := tr.Progress()
			res.Err = fmt.Sprintf("timeout after %s: %s of %s jobs finished", o.Timeout, thousands(n), thousands(w.Jobs))
			break wait
		case <-tick.C:
			n, attempts := tr.Progress()
			fmt.Fprintf(progress, "  %s: %s of %s jobs finished, %s attempts, %s\n",
				sys.Title, thousands(n), thousands(w.Jobs), thousands(attempts), time.Since(start).Round(100*time.Millisecond))
		}
	}
	if res.Err == "" {
		// Keep the workers a moment longer: a duplicate delivery shows
		// up after the job it duplicates.
		settle := time.NewTimer(o.Settle)
		select {
		case <-settle.C:
		case workErr = <-worked:
			ended = true
			if workErr != nil {
				res.Err = fmt.Sprintf("work: %v", workErr)
			}
		}
		settle.Stop()
	}
	// Stopping the workers and counting what was parked have a time of
	// their own, begun now: the run's may be over.
	after, cancelAfter := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancelAfter()
	stopWork()
	if !ended {
		select {
		case err := <-worked:
			if err != nil && res.Err == "" {
				res.Err = fmt.Sprintf("work: %v", err)
			}
		case <-after.Done():
			if res.Err == "" {
				res.Err = "the workers did not stop"
			}
		}
	}
	parked, err := p.Parked(after)
	if err != nil {
		parked = -1
		if res.Err == "" {
			res.Err = fmt.Sprintf("count parked: %v", err)
		}
	}
	res.settle(tr.Tally(), parked, start)
	return res
}

// timedOut names a timeout as such.
func timedOut(ctx context.Context, o Options, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("timeout after %s: %w", o.Timeout, err)
	}
	return err
}

// uniqueName is a name no other run uses: peers-<pid>-<8 hex digits>.
func uniqueName() string {
	return fmt.Sprintf("peers-%d-%s", os.Getpid(), unique.Hex())
}
