//go:build integration

package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/internal/store/storetest"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
	"github.com/relay-demo/relay/services/api"
)

// parkSplit parks n copies: copy i goes to the email queue when even and
// to the webhook queue when odd, each with id c<i>.
func parkSplit(t *testing.T, conn *amqp.Connection, topo retry.Topology, n int) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	for i := range n {
		queue := "email-queue"
		if i%2 == 1 {
			queue = "webhook-queue"
		}
		if err := ch.Publish(topo.Name(retry.DeadExchange), "", false, false, amqp.Publishing{
			MessageId: fmt.Sprintf("c%03d", i), Body: []byte(`{}`), DeliveryMode: amqp.Persistent,
			Headers: amqp.Table{retry.HeaderDeadSource: topo.Name(queue), retry.HeaderDeadReason: retry.ReasonMaxRetries,
				retry.HeaderParkedAt: time.Now().UTC().Format(time.RFC3339Nano), retry.HeaderLastError: "503 busy"},
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// evenCopies are the ids parkSplit parks from the email queue, once each.
func evenCopies(n int) map[string]int {
	out := map[string]int{}
	for i := 0; i < n; i += 2 {
		out[fmt.Sprintf("c%03d", i)] = 1
	}
	return out
}

// jobAnswer is what the job routes answer, less the times.
type jobAnswer struct {
	ID        string `json:"id"`
	State     string `json:"state"`
	LastError string `json:"last_error"`
	Matched   int64  `json:"matched"`
	Done      int64  `json:"done"`
	Failed    int64  `json:"failed"`
}

// TestDeadLetterJobOnTheBroker runs a replay job through the real `relay
// api`: a dry run counts the selection, the job answers 202 and a
// Location, its progress can be followed there, each selected copy
// arrives once on its work queue and the others stay parked.
func TestDeadLetterJobOnTheBroker(t *testing.T) {
	p := startAPI(t, deadLetterToken)
	const n = 300
	parkSplit(t, p.conn, p.topo, n)
	if !poll(defaultWait, func() bool { return p.depth(t, retry.DeadQueue) == n }) {
		t.Fatalf("not parked: %d", p.depth(t, retry.DeadQueue))
	}

	status, body := p.do(t, http.MethodPost, "/v1/dead-letters/replay", `{"channel":"email","dry_run":true}`)
	if status != http.StatusOK || string(body) != `{"dry_run":true,"matched":150}`+"\n" {
		t.Fatalf("dry run: %d %s", status, body)
	}

	req, _ := http.NewRequest(http.MethodPost, p.base+"/v1/dead-letters/jobs", strings.NewReader(`{"action":"replay","channel":"email","error":"BUSY"}`))
	req.Header.Set("Authorization", "Bearer "+deadLetterToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var started jobAnswer
	err = json.NewDecoder(resp.Body).Decode(&started)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusAccepted || resp.Header.Get("Location") != "/v1/dead-letters/jobs/"+started.ID || started.State != "running" {
		t.Fatalf("POST jobs: %d %+v, Location %q, %v", resp.StatusCode, started, resp.Header.Get("Location"), err)
	}

	var seen []int64
	var last jobAnswer
	if !poll(30*time.Second, func() bool {
		status, body := p.do(t, http.MethodGet, resp.Header.Get("Location"), "")
		if status != http.StatusOK || json.Unmarshal(body, &last) != nil {
			t.Fatalf("GET job: %d %s", status, body)
		}
		if len(seen) == 0 || seen[len(seen)-1] != last.Done {
			seen = append(seen, last.Done)
		}
		return last.State != "running"
	}) {
		t.Fatalf("the job never ended: %+v", last)
	}
	t.Logf("done counts seen while polling: %v", seen)
	if diff := cmp.Diff(jobAnswer{ID: started.ID, State: "done", Matched: n / 2, Done: n / 2}, last); diff != "" {
		t.Errorf("the job (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(evenCopies(n), retrytest.TakeAll(t, p.conn, p.topo.Name("email-queue"))); diff != "" {
		t.Errorf("arrivals on the email queue (-want +got):\n%s", diff)
	}
	if !poll(defaultWait, func() bool { return p.depth(t, retry.DeadQueue) == n/2 }) {
		t.Errorf("parked after the job: %d, want the %d webhook copies", p.depth(t, retry.DeadQueue), n/2)
	}
	if !strings.Contains(p.logs.String(), `"msg":"dead-letter job ended"`) {
		t.Errorf("no log of the job's end:\n%s", p.logs.String())
	}
	if status, _ := p.do(t, http.MethodGet, "/v1/dead-letters/jobs/job_nope", ""); status != http.StatusNotFound {
		t.Errorf("unknown job: %d", status)
	}
}

// crashingStore is a JobStore that dies after its nth journal write:
// that write lands, the process's broker connection is cut, and nothing
// it writes afterwards reaches the store, as if its process had been
// killed between the journal write and the ack of the parked original:
// the narrowest point of a replay.
type crashingStore struct {
	api.JobStore
	after   int
	writes  atomic.Int64
	crashed atomic.Bool
	conn    *amqp.Connection
}

var errCrashed = errors.New("the process is gone")

func (s *crashingStore) RecordJobReplay(ctx context.Context, job string, r store.JobReplay) error {
	if s.crashed.Load() {
		return errCrashed
	}
	err := s.JobStore.RecordJobReplay(ctx, job, r)
	if s.writes.Add(1) == int64(s.after) {
		s.crashed.Store(true)
		s.conn.Close()
		return errCrashed
	}
	return err
}

func (s *crashingStore) JobReplayed(ctx context.Context, job string, r store.JobReplay) (bool, error) {
	if s.crashed.Load() {
		return false, errCrashed
	}
	return s.JobStore.JobReplayed(ctx, job, r)
}

func (s *crashingStore) RenewDeadLetterJob(ctx context.Context, id, owner string, until time.Time, p store.JobProgress) error {
	if s.crashed.Load() {
		return errCrashed
	}
	return s.JobStore.RenewDeadLetterJob(ctx, id, owner, until, p)
}

func (s *crashingStore) FinishDeadLetterJob(ctx context.Context, id, owner, state string, p store.JobProgress, at time.Time) error {
	if s.crashed.Load() {
		return errCrashed
	}
	return s.JobStore.FinishDeadLetterJob(ctx, id, owner, state, p, at)
}

// TestDeadLetterJobResumes kills the process running a replay job right
// after a journal write, and checks that another process takes the job
// over once its lease lapses and finishes it: every selected copy
// replayed once, none lost, the others still parked.
func TestDeadLetterJobResumes(t *testing.T) {
	for _, backend := range storetest.Backends() {
		t.Run(backend, func(t *testing.T) {
			conn := retrytest.Conn(t)
			topo := retrytest.Declare(t, conn, retry.Topology{Backend: retry.TTL, Routes: channel.Routes()})
			st := storetest.Open(t, backend)
			const n = 300
			parkSplit(t, conn, topo, n)
			retrytest.Eventually(t, defaultWait, func() bool { return retrytest.Depth(t, conn, topo.Name(retry.DeadQueue)) == n }, "not parked")

			// Process A: its own connection, which dies with it.
			connA := retrytest.Conn(t)
			crash := &crashingStore{JobStore: st, after: 60, conn: connA}
			a := &api.DeadLetterJobs{Store: crash, Topology: topo, Owner: "a", Lease: time.Second,
				Dial: func() (retry.DeadLetters, func(), error) {
					return retry.DeadLetters{Conn: connA, Topology: topo}, func() {}, nil
				}}
			srv := httptest.NewServer(api.NewServer(api.Deps{AuthOff: true, Topology: topo, DeadLetterJobs: a}))
			defer srv.Close()
			resp, err := http.Post(srv.URL+"/v1/dead-letters/jobs", "application/json", strings.NewReader(`{"action":"replay","channel":"email"}`))
			if err != nil {
				t.Fatal(err)
			}
			var started jobAnswer
			_ = json.NewDecoder(resp.Body).Decode(&started)
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				t.Fatalf("POST jobs: %d", resp.StatusCode)
			}
			retrytest.Eventually(t, defaultWait, crash.crashed.Load, "process A never got to its crash")

			// Process B takes over once A's lease lapses.
			connB := retrytest.Conn(t)
			b := &api.DeadLetterJobs{Store: st, Topology: topo, Owner: "b", Lease: time.Second,
				Dial: func() (retry.DeadLetters, func(), error) {
					return retry.DeadLetters{Conn: connB, Topology: topo}, func() {}, nil
				}}
			ctx, cancel := context.WithCancel(context.Background())
			ran := make(chan struct{})
			go func() { b.Run(ctx); close(ran) }()
			defer func() { cancel(); <-ran }()
			var j store.DeadLetterJob
			retrytest.Eventually(t, 30*time.Second, func() bool {
				j, err = st.DeadLetterJob(context.Background(), started.ID)
				return err == nil && j.State != store.JobRunning
			}, "the job never ended")
			if j.State != store.JobDone || j.Matched != n/2 || j.Done != n/2 || j.Failed != 0 || j.Takeovers != 1 || j.LeaseOwner != "" {
				t.Errorf("the job: %+v", j)
			}
			if diff := cmp.Diff(evenCopies(n), retrytest.TakeAll(t, conn, topo.Name("email-queue"))); diff != "" {
				t.Errorf("arrivals on the email queue (-want +got):\n%s", diff)
			}
			retrytest.Eventually(t, defaultWait, func() bool { return retrytest.Depth(t, conn, topo.Name(retry.DeadQueue)) == n/2 },
				"the webhook copies are not all parked")
		})
	}
}

// slowStore is a JobStore whose journal reads take a while, so that a job
// is still running when the test acts on it.
type slowStore struct {
	api.JobStore
	reads atomic.Int64
	last  atomic.Int64 // when the last read came, in Unix nanoseconds
}

func (s *slowStore) JobReplayed(ctx context.Context, job string, r store.JobReplay) (bool, error) {
	s.reads.Add(1)
	s.last.Store(time.Now().UnixNano())
	time.Sleep(5 * time.Millisecond) // stands for a slow store, not a wait for the broker
	return s.JobStore.JobReplayed(ctx, job, r)
}

// TestCancelDeadLetterJob cancels a running replay job: it stops within a
// lease renewal, what it replayed arrived once, the rest stays parked.
func TestCancelDeadLetterJob(t *testing.T) {
	conn := retrytest.Conn(t)
	topo := retrytest.Declare(t, conn, retry.Topology{Backend: retry.TTL, Routes: channel.Routes()})
	st := &slowStore{JobStore: storetest.Open(t, storetest.SQLite)}
	const n = 300
	parkSplit(t, conn, topo, n)
	retrytest.Eventually(t, defaultWait, func() bool { return retrytest.Depth(t, conn, topo.Name(retry.DeadQueue)) == n }, "not parked")
	jobs := &api.DeadLetterJobs{Store: st, Topology: topo, Owner: "a", Lease: 300 * time.Millisecond,
		Dial: func() (retry.DeadLetters, func(), error) {
			return retry.DeadLetters{Conn: conn, Topology: topo}, func() {}, nil
		}}
	srv := httptest.NewServer(api.NewServer(api.Deps{AuthOff: true, Topology: topo, DeadLetterJobs: jobs}))
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/dead-letters/jobs", "application/json", strings.NewReader(`{"action":"replay","channel":"email"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	location := srv.URL + resp.Header.Get("Location")
	retrytest.Eventually(t, defaultWait, func() bool { return st.reads.Load() >= 10 }, "the job never started")
	req, _ := http.NewRequest(http.MethodDelete, location, nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var cancelled jobAnswer
	_ = json.NewDecoder(resp.Body).Decode(&cancelled)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || cancelled.State != "cancelled" {
		t.Fatalf("DELETE job: %d %+v", resp.StatusCode, cancelled)
	}
	// The job stops at its next renewal (every 100ms): the journal reads
	// stop.
	retrytest.Eventually(t, defaultWait, func() bool { return time.Since(time.Unix(0, st.last.Load())) > time.Second },
		"the job never stopped")
	arrived := retrytest.TakeAll(t, conn, topo.Name("email-queue"))
	if len(arrived) == 0 || len(arrived) >= n/2 {
		t.Errorf("%d arrived: want some, not all of %d", len(arrived), n/2)
	}
	for id, c := range arrived {
		if c != 1 {
			t.Errorf("%s arrived %d times", id, c)
		}
	}
	retrytest.Eventually(t, defaultWait, func() bool { return retrytest.Depth(t, conn, topo.Name(retry.DeadQueue)) == n-len(arrived) },
		"what the job did not replay is not all parked")
	// Its counts are what it did, settled once it stopped, not its last
	// renewal's.
	var settled jobAnswer
	resp, err = http.Get(location)
	if err != nil {
		t.Fatal(err)
	}
	_ = json.NewDecoder(resp.Body).Decode(&settled)
	resp.Body.Close()
	if settled.State != "cancelled" || settled.Done != int64(len(arrived)) {
		t.Errorf("the cancelled job says %+v; %d copies arrived", settled, len(arrived))
	}
	req, _ = http.NewRequest(http.MethodDelete, location, nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusConflict {
		t.Errorf("DELETE a cancelled job: %v, %v", resp.StatusCode, err)
	}
}

// TestDeadLetterJobWaitsForTheBroker: a job whose process cannot reach
// the broker stays running with the error, and goes on once a process
// (here the same one) takes it up again with the broker back.
func TestDeadLetterJobWaitsForTheBroker(t *testing.T) {
	conn := retrytest.Conn(t)
	topo := retrytest.Declare(t, conn, retry.Topology{Backend: retry.TTL, Routes: channel.Routes()})
	st := storetest.Open(t, storetest.SQLite)
	const n = 20
	parkSplit(t, conn, topo, n)
	retrytest.Eventually(t, defaultWait, func() bool { return retrytest.Depth(t, conn, topo.Name(retry.DeadQueue)) == n }, "not parked")
	var dials atomic.Int64
	jobs := &api.DeadLetterJobs{Store: st, Topology: topo, Owner: "a", Lease: 300 * time.Millisecond,
		Dial: func() (retry.DeadLetters, func(), error) {
			if dials.Add(1) == 1 {
				return retry.DeadLetters{}, nil, errors.New("connection refused")
			}
			return retry.DeadLetters{Conn: conn, Topology: topo}, func() {}, nil
		}}
	srv := httptest.NewServer(api.NewServer(api.Deps{AuthOff: true, Topology: topo, DeadLetterJobs: jobs}))
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/dead-letters/jobs", "application/json", strings.NewReader(`{"action":"purge","channel":"webhook","confirm":true}`))
	if err != nil {
		t.Fatal(err)
	}
	var started jobAnswer
	_ = json.NewDecoder(resp.Body).Decode(&started)
	resp.Body.Close()
	var j store.DeadLetterJob
	retrytest.Eventually(t, defaultWait, func() bool {
		j, err = st.DeadLetterJob(context.Background(), started.ID)
		return err == nil && strings.Contains(j.LastError, "connection refused")
	}, "the job never said why it waits")
	if j.State != store.JobRunning {
		t.Fatalf("a job that could not reach the broker: %+v", j)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { jobs.Run(ctx); close(ran) }()
	defer func() { cancel(); <-ran }()
	retrytest.Eventually(t, defaultWait, func() bool {
		j, err = st.DeadLetterJob(context.Background(), started.ID)
		return err == nil && j.State != store.JobRunning
	}, "the job never ended")
	if j.State != store.JobDone || j.Done != n/2 || j.Takeovers != 1 || j.LastError != "" {
		t.Errorf("the job: %+v", j)
	}
	retrytest.Eventually(t, defaultWait, func() bool { return retrytest.Depth(t, conn, topo.Name(retry.DeadQueue)) == n/2 }, "the email copies are not all parked")
}

// TestDeadLetterJobHandedBack stops the process running a job cleanly:
// the job stays running with its lease handed back, and the next process
// takes it over at once, not a lease later, and finishes it: each copy
// replayed once.
func TestDeadLetterJobHandedBack(t *testing.T) {
	conn := retrytest.Conn(t)
	topo := retrytest.Declare(t, conn, retry.Topology{Backend: retry.TTL, Routes: channel.Routes()})
	plain := storetest.Open(t, storetest.SQLite)
	slow := &slowStore{JobStore: plain}
	const n = 300
	parkSplit(t, conn, topo, n)
	retrytest.Eventually(t, defaultWait, func() bool { return retrytest.Depth(t, conn, topo.Name(retry.DeadQueue)) == n }, "not parked")
	dial := func() (retry.DeadLetters, func(), error) {
		return retry.DeadLetters{Conn: conn, Topology: topo}, func() {}, nil
	}
	a := &api.DeadLetterJobs{Store: slow, Topology: topo, Owner: "a", Lease: time.Minute, Dial: dial}
	ctxA, stopA := context.WithCancel(context.Background())
	ranA := make(chan struct{})
	go func() { a.Run(ctxA); close(ranA) }()
	srv := httptest.NewServer(api.NewServer(api.Deps{AuthOff: true, Topology: topo, DeadLetterJobs: a}))
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/dead-letters/jobs", "application/json", strings.NewReader(`{"action":"replay","channel":"email"}`))
	if err != nil {
		t.Fatal(err)
	}
	var started jobAnswer
	_ = json.NewDecoder(resp.Body).Decode(&started)
	resp.Body.Close()
	retrytest.Eventually(t, defaultWait, func() bool { return slow.reads.Load() >= 10 }, "the job never started")
	stopA()
	<-ranA
	j, err := plain.DeadLetterJob(context.Background(), started.ID)
	if err != nil || j.State != store.JobRunning || j.LeaseUntil.After(time.Now()) {
		t.Fatalf("after a clean stop: %+v, %v; want running, its lease handed back", j, err)
	}

	b := &api.DeadLetterJobs{Store: plain, Topology: topo, Owner: "b", Lease: time.Minute, Dial: dial}
	ctxB, stopB := context.WithCancel(context.Background())
	ranB := make(chan struct{})
	go func() { b.Run(ctxB); close(ranB) }()
	defer func() { stopB(); <-ranB }()
	// Well within the minute a lapsed lease would take.
	retrytest.Eventually(t, 20*time.Second, func() bool {
		j, err = plain.DeadLetterJob(context.Background(), started.ID)
		return err == nil && j.State != store.JobRunning
	}, "the job was not taken over at once")
	if j.State != store.JobDone || j.Done != n/2 || j.Takeovers != 1 {
		t.Errorf("the job: %+v", j)
	}
	if diff := cmp.Diff(evenCopies(n), retrytest.TakeAll(t, conn, topo.Name("email-queue"))); diff != "" {
		t.Errorf("arrivals on the email queue (-want +got):\n%s", diff)
	}
}

// TestDeadLetterJobsTakeTurns starts two jobs at once in one process:
// the second walks the queue after the first, so neither misses a copy
// the other holds.
func TestDeadLetterJobsTakeTurns(t *testing.T) {
	conn := retrytest.Conn(t)
	topo := retrytest.Declare(t, conn, retry.Topology{Backend: retry.TTL, Routes: channel.Routes()})
	st := storetest.Open(t, storetest.SQLite)
	const n = 300
	parkSplit(t, conn, topo, n)
	retrytest.Eventually(t, defaultWait, func() bool { return retrytest.Depth(t, conn, topo.Name(retry.DeadQueue)) == n }, "not parked")
	jobs := &api.DeadLetterJobs{Store: st, Topology: topo, Owner: "a",
		Dial: func() (retry.DeadLetters, func(), error) {
			return retry.DeadLetters{Conn: conn, Topology: topo}, func() {}, nil
		}}
	srv := httptest.NewServer(api.NewServer(api.Deps{AuthOff: true, Topology: topo, DeadLetterJobs: jobs}))
	defer srv.Close()
	var ids []string
	for _, body := range []string{`{"action":"replay","channel":"email"}`, `{"action":"purge","channel":"webhook","confirm":true}`} {
		resp, err := http.Post(srv.URL+"/v1/dead-letters/jobs", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var started jobAnswer
		_ = json.NewDecoder(resp.Body).Decode(&started)
		resp.Body.Close()
		ids = append(ids, started.ID)
	}
	for _, id := range ids {
		var j store.DeadLetterJob
		retrytest.Eventually(t, 30*time.Second, func() bool {
			var err error
			j, err = st.DeadLetterJob(context.Background(), id)
			return err == nil && j.State != store.JobRunning
		}, "job %s never ended", id)
		if j.State != store.JobDone || j.Done != n/2 {
			t.Errorf("job %s: %+v", id, j)
		}
	}
	if diff := cmp.Diff(evenCopies(n), retrytest.TakeAll(t, conn, topo.Name("email-queue"))); diff != "" {
		t.Errorf("arrivals on the email queue (-want +got):\n%s", diff)
	}
	if got := retrytest.Depth(t, conn, topo.Name(retry.DeadQueue)); got != 0 {
		t.Errorf("%d still parked, want none", got)
	}
}

// TestDeadLetterFiltersOnTheBroker lists through the real `relay api`
// by endpoint, parked-at range, reason and error text.
func TestDeadLetterFiltersOnTheBroker(t *testing.T) {
	p := startAPI(t, deadLetterToken)
	const ep = "ep_3kq7ymzd5vbxw2n4c6f7h2j4la"
	p.park(t, "hook-ep", "webhook-queue", []byte(`{"v":1,"id":"hook-ep","channel":"webhook","webhook":{"endpoint":"`+ep+`","payload":{}}}`), "application/json")
	p.park(t, "hook-url", "webhook-queue", []byte(`{"v":1,"id":"hook-url","channel":"webhook","webhook":{"url":"https://example.com","payload":{}}}`), "application/json")
	p.park(t, "mail", "email-queue", []byte(`{}`), "application/json")
	if !poll(defaultWait, func() bool { return p.depth(t, retry.DeadQueue) == 3 }) {
		t.Fatal("not parked")
	}
	ids := func(query string) []string {
		t.Helper()
		status, body := p.do(t, http.MethodGet, "/v1/dead-letters?"+query, "")
		if status != http.StatusOK {
			t.Fatalf("GET ?%s: %d %s", query, status, body)
		}
		var answer struct {
			DeadLetters []struct {
				ID string `json:"id"`
			} `json:"dead_letters"`
		}
		if err := json.Unmarshal(body, &answer); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, d := range answer.DeadLetters {
			out = append(out, d.ID)
		}
		return out
	}
	// park writes x-parked-at 2026-01-02T03:09:05Z, reason max-retries and
	// last error "503 busy".
	for _, tt := range []struct {
		query string
		want  []string
	}{
		{"endpoint=" + ep, []string{"hook-ep"}},
		{"channel=webhook", []string{"hook-ep", "hook-url"}},
		{"since=2026-01-02T03:09:05Z&until=2026-01-02T03:09:06Z", []string{"hook-ep", "hook-url", "mail"}},
		{"until=2026-01-02T03:09:05Z", nil},
		{"reason=max-retries&error=BUSY&channel=email", []string{"mail"}},
		{"reason=permanent", nil},
	} {
		if diff := cmp.Diff(tt.want, ids(tt.query)); diff != "" {
			t.Errorf("?%s (-want +got):\n%s", tt.query, diff)
		}
	}
	if status, body := p.do(t, http.MethodGet, "/v1/dead-letters?endpoint=nope&since=x", ""); status != http.StatusUnprocessableEntity ||
		!strings.Contains(string(body), `"field":"endpoint"`) || !strings.Contains(string(body), `"field":"since"`) {
		t.Errorf("bad filters: %d %s", status, body)
	}
}
