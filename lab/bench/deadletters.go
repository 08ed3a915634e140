package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/services/api"
)

// maxDeadLetterCopies bounds the deadletters figure: the copies are all
// parked at once in one queue, and copyID numbers them in six digits.
const maxDeadLetterCopies = 200_000

// defaultDeadLetterCopies is what the deadletters figure parks by
// default: the scale operators ask bulk replays to work at.
const defaultDeadLetterCopies = 100_000

// DeadLettersOptions sizes the deadletters figure; zero fields take the
// defaults.
type DeadLettersOptions struct {
	// Copies is how many copies are parked (100,000, at most
	// maxDeadLetterCopies); half of them, the email ones, are replayed.
	Copies int `json:"copies"`
	// QueueType is the queues' type (quorum).
	QueueType retry.QueueType `json:"queue_type"`
}

func (o DeadLettersOptions) withDefaults() DeadLettersOptions {
	if o.Copies <= 0 {
		o.Copies = defaultDeadLetterCopies
	}
	o.Copies = min(o.Copies, maxDeadLetterCopies)
	if o.QueueType == "" {
		o.QueueType = retry.Quorum
	}
	return o
}

// DeadLettersResult is a bulk replay job over a dead-letter queue: how
// long it took, what it cost in memory, and whether each selected copy
// arrived once.
type DeadLettersResult struct {
	Options DeadLettersOptions `json:"options"`
	// Selected is how many parked copies the job's filter selects.
	Selected int `json:"selected"`
	// Elapsed is from the job's POST to its state done; PerSecond is
	// Selected over it.
	Elapsed   time.Duration `json:"elapsed_ns"`
	PerSecond float64       `json:"per_second"`
	// RSSBefore and RSSPeak are this process's VmRSS before the job and
	// the most seen while it ran (the job runs in this process).
	RSSBefore uint64 `json:"rss_before_bytes"`
	RSSPeak   uint64 `json:"rss_peak_bytes"`
	// Arrived counts the selected copies that reached their work queue,
	// Duplicates those that arrived more than once (each extra arrival),
	// Lost those that never arrived.
	Arrived    int `json:"arrived"`
	Duplicates int `json:"duplicates"`
	Lost       int `json:"lost"`
	// LeftParked is what the dead-letter queue held after: the copies
	// the filter did not select.
	LeftParked int `json:"left_parked"`
}

// DeadLetters parks opts.Copies copies, half of them parked from the
// email queue and half from the webhook queue, and times a replay job
// of the email ones (POST /v1/dead-letters/jobs {"channel":"email"})
// through the API's handler and its job runner, with a SQLite history.
func (b *bench) DeadLetters(ctx context.Context, opts DeadLettersOptions) (DeadLettersResult, error) {
	opts = opts.withDefaults()
	res := DeadLettersResult{Options: opts, Selected: opts.Copies / 2}
	topo := retry.Topology{Prefix: b.names(opts.QueueType, "deadletters"), Routes: channel.Routes(), Backend: retry.TTL, QueueType: opts.QueueType}
	b.janitor.topology(topo)
	conn, err := retry.Dial(b.url, "relay-lab bench deadletters")
	if err != nil {
		return res, err
	}
	defer conn.Close()
	if err := topo.Declare(ctx, conn); err != nil {
		return res, err
	}
	b.progress("deadletters: parking %d copies", opts.Copies)
	if err := parkCopies(ctx, conn, topo, opts.Copies); err != nil {
		return res, err
	}
	dir, err := os.MkdirTemp("", "relay-bench-deadletters-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	st, err := store.Open(ctx, filepath.Join(dir, "history.db"))
	if err != nil {
		return res, err
	}
	defer st.Close()
	jobs := &api.DeadLetterJobs{Store: st, Topology: topo, Owner: "bench",
		Dial: func() (retry.DeadLetters, func(), error) {
			return retry.DeadLetters{Conn: conn, Topology: topo}, func() {}, nil
		}}
	handler := api.NewServer(api.Deps{AuthOff: true, Topology: topo, DeadLetterJobs: jobs})

	runtime.GC()
	if res.RSSBefore, err = statusKB("VmRSS"); err != nil {
		return res, err
	}
	var peak sync.WaitGroup
	stop := make(chan struct{})
	rssPeak := res.RSSBefore // the sampler's own until it is done
	peak.Go(func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			if rss, err := statusKB("VmRSS"); err == nil {
				rssPeak = max(rssPeak, rss)
			}
		}
	})
	b.progress("deadletters: a replay job of the %d email copies", res.Selected)
	started := time.Now()
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/dead-letters/jobs", strings.NewReader(`{"action":"replay","channel":"email"}`)))
	if rec.Code != http.StatusAccepted {
		close(stop)
		peak.Wait()
		return res, fmt.Errorf("POST /v1/dead-letters/jobs: %d %s", rec.Code, rec.Body)
	}
	id := strings.TrimPrefix(rec.Header().Get("Location"), "/v1/dead-letters/jobs/")
	var j store.DeadLetterJob
	for {
		if j, err = st.DeadLetterJob(ctx, id); err != nil || j.State != store.JobRunning {
			break
		}
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if err != nil {
			break
		}
	}
	res.Elapsed = time.Since(started)
	close(stop)
	peak.Wait()
	res.RSSPeak = rssPeak
	if err != nil {
		return res, err
	}
	if j.State != store.JobDone {
		return res, fmt.Errorf("the job ended %s: %s", j.State, j.LastError)
	}
	res.PerSecond = float64(res.Selected) / res.Elapsed.Seconds()
	arrivals, err := takeCounts(conn, topo.Name("email-queue"))
	if err != nil {
		return res, err
	}
	for i := 0; i < opts.Copies; i += 2 {
		switch n := arrivals[copyID(i)]; {
		case n == 0:
			res.Lost++
		default:
			res.Arrived++
			res.Duplicates += n - 1
		}
	}
	ch, err := conn.Channel()
	if err != nil {
		return res, err
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(topo.Name(retry.DeadQueue), true, false, false, false, nil)
	if err != nil {
		return res, err
	}
	res.LeftParked = q.Messages
	return res, nil
}

func copyID(i int) string { return fmt.Sprintf("bench-dl-%06d", i) }

// parkCopies publishes n parked copies into topo's dead-letter exchange,
// confirmed, and waits until the queue holds them: copy i is parked from
// the email queue when i is even, from the webhook queue when odd.
func parkCopies(ctx context.Context, conn *amqp.Connection, topo retry.Topology, n int) error {
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	if err := ch.Confirm(false /* noWait */); err != nil {
		return err
	}
	confirms := make([]*amqp.DeferredConfirmation, 0, n)
	parkedAt := time.Now().UTC().Format(time.RFC3339Nano)
	for i := range n {
		queue := "email-queue"
		if i%2 == 1 {
			queue = "webhook-queue"
		}
		c, err := ch.PublishWithDeferredConfirmWithContext(ctx, topo.Name(retry.DeadExchange), "", false, false, amqp.Publishing{
			MessageId: copyID(i), ContentType: "application/json", Body: []byte(`{"v":1}`), DeliveryMode: amqp.Persistent,
			Headers: amqp.Table{retry.HeaderDeadSource: topo.Name(queue), retry.HeaderDeadReason: retry.ReasonMaxRetries,
				retry.HeaderParkedAt: parkedAt, retry.HeaderLastError: "503 busy"},
		})
		if err != nil {
			return fmt.Errorf("park copy %d: %w", i, err)
		}
		confirms = append(confirms, c)
	}
	for i, c := range confirms {
		ok, err := c.WaitContext(ctx)
		if err != nil || !ok {
			return errors.Join(fmt.Errorf("park copy %d: not confirmed", i), err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		q, err := ch.QueueDeclarePassive(topo.Name(retry.DeadQueue), true, false, false, false, nil)
		if err != nil {
			return err
		}
		if q.Messages >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the dead-letter queue holds %d of %d after a minute", q.Messages, n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// takeCounts takes every message in queue and counts each id.
func takeCounts(conn *amqp.Connection, queue string) (map[string]int, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, err
	}
	defer ch.Close()
	out := map[string]int{}
	for {
		d, ok, err := ch.Get(queue, true /* autoAck */)
		if err != nil {
			return out, fmt.Errorf("take from %s: %w", queue, err)
		}
		if !ok {
			return out, nil
		}
		out[d.MessageId]++
	}
}
