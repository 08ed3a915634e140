//go:build cluster

package cluster_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relay-demo/relay/demo/all"
	"github.com/relay-demo/relay/demo/flaky"
	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/retry"
)

// token is the API token the test's relay accepts.
const token = "cluster-token-0123456789abcdef"

// clientTimeout is how long a client waits for the API's answer: the API's
// publish timeout (10s) with room to spare.
const clientTimeout = 20 * time.Second

// rig is the traffic side of the test: the fake downstreams, in the test
// process, and `relay all`, in-process too, on the cluster.
type rig struct {
	t      *tee
	c      *cluster
	prefix string
	topo   retry.Topology
	down   *flaky.Server
	dcfg   flaky.Config
	env    map[string]string
	hook   string // the webhook URL every notification targets
	api    string // the API's base URL
	logs   string // the file relay logs to
	// released lists the queues whose dead-lettered messages the broker
	// held until the test moved the queue's leader.
	released []release
}

// release is one quorum queue whose at-least-once dead-letter worker had
// stopped forwarding, and the leader move that started it again.
type release struct {
	queue, leader string
	held          int
	stalled       time.Duration // how long nothing was delivered before
}

func (x release) String() string {
	return fmt.Sprintf("%s held %d dead-lettered messages unforwarded (nothing delivered for %s) until its leader moved off %s",
		x.queue, x.held, x.stalled.Round(time.Second), x.leader)
}

// newRig starts the downstreams, failing rate of the attempts, and
// prepares relay's environment: every node in AMQP_URLS, quorum queues,
// the TTL backend and a short schedule. CLUSTER_DELAY_BACKEND=native runs
// RabbitMQ 4.3's delayed retry instead, on a linear schedule.
func newRig(t *tee, c *cluster, rate float64) *rig {
	t.Helper()
	backend, delays, max := retry.TTL, "200ms,500ms,1s", 10
	if os.Getenv("CLUSTER_DELAY_BACKEND") == string(retry.Native) {
		backend, delays = retry.Native, "200ms,400ms,600ms,800ms,1s"
	}
	r := &rig{t: t, c: c, prefix: "cluster-" + randomHex(4) + "."}
	secret := "whsec_" + base64.StdEncoding.EncodeToString(random(32))
	denv := map[string]string{
		"FLAKY_HTTP_ADDR": "127.0.0.1:0", "FLAKY_SMTP_ADDR": "127.0.0.1:0",
		"FLAKY_EMAIL_SCENARIO": flaky.Flaky, "FLAKY_WEBHOOK_SCENARIO": flaky.Flaky,
		"FLAKY_RATE": fmt.Sprint(rate), "FLAKY_SEED": "7", "WEBHOOK_SECRET": secret,
	}
	dcfg, err := flaky.LoadConfig(func(k string) string { return denv[k] })
	if err != nil {
		t.Fatal(err)
	}
	dctx, stopDown := context.WithCancel(context.Background())
	down, err := flaky.Start(dctx, dcfg, slog.New(slog.DiscardHandler))
	if err != nil {
		stopDown()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopDown()
		_ = down.Wait()
	})
	r.down, r.dcfg = down, dcfg
	r.hook = "http://" + down.HTTPAddr() + "/webhooks/cluster"

	d, err := retry.ParseDelays(delays)
	if err != nil {
		t.Fatal(err)
	}
	r.topo = retry.Topology{Prefix: r.prefix, Routes: channel.Routes(), QueueType: retry.Quorum,
		Backend: backend, Policy: retry.Policy{Delays: d, MaxRetries: max}}

	_, smtpPort, _ := net.SplitHostPort(down.SMTPAddr())
	r.env = map[string]string{
		"AMQP_URLS": strings.Join(c.urls(), ","),
		// The first node as AMQP_URL too: a process that reads the one
		// address reaches the cluster, never the default broker on 5672.
		"AMQP_URL":        c.nodes[0].url(),
		"TOPOLOGY_PREFIX": r.prefix, "QUEUE_TYPE": "quorum", "DELAY_BACKEND": string(backend), "MANAGEMENT_URL": "off",
		"RETRY_DELAYS": delays, "RETRY_MAX": fmt.Sprint(max),
		// Ports the system chooses; startRelay reads the API's back.
		"API_TOKENS": token, "HTTP_ADDR": "127.0.0.1:0", "SHUTDOWN_TIMEOUT": "5s", "DATA_DIR": t.TempDir(),
		// relay all runs downstreams of its own; they listen on spare
		// ports and nothing is sent to them.
		"FLAKY_HTTP_ADDR": "127.0.0.1:0", "FLAKY_SMTP_ADDR": "127.0.0.1:0",
		"FLAKY_EMAIL_SCENARIO": flaky.Healthy, "FLAKY_WEBHOOK_SCENARIO": flaky.Healthy,
		"SMTP_HOST": "127.0.0.1", "SMTP_PORT": smtpPort, "SMTP_TLS": "none", "SMTP_TIMEOUT": "5s",
		"EMAIL_FROM":     "relay@cluster.test",
		"WEBHOOK_SECRET": secret, "WEBHOOK_ALLOW_CIDRS": "127.0.0.0/8,::1/128", "WEBHOOK_TIMEOUT": "5s",
	}
	r.logs = filepath.Join(t.TempDir(), "relay.log")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("end of the relay log %s:\n%s", r.logs, tail(r.logs, 24<<10))
		}
	})
	return r
}

func random(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func randomHex(n int) string { return fmt.Sprintf("%x", random(n)) }

// startRelay runs `relay all` in the test process until the test ends,
// reads where its API listens from its log, and waits until it is ready.
func (r *rig) startRelay() {
	r.t.Helper()
	logs, err := os.OpenFile(r.logs, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- all.Run(ctx, func(k string) string { return r.env[k] }, logs)
		logs.Close()
	}()
	r.t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				r.t.Errorf("relay all: %v", err)
			}
		case <-time.After(time.Minute):
			r.t.Errorf("relay all did not stop within a minute")
		}
	})
	if !poll(time.Minute, 100*time.Millisecond, func() bool {
		if r.api == "" {
			log, _ := os.ReadFile(r.logs)
			addrs, ok := all.Listening(string(log))
			if !ok {
				return false
			}
			r.api = "http://" + addrs.API
		}
		resp, err := http.Get(r.api + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}) {
		r.t.Fatalf("the API at %q never became ready; log:\n%s", r.api, tail(r.logs, 8<<10))
	}
}

// load is a run of clients posting notifications to the API. A client
// that gets a 503 or no answer tries again with the same Idempotency-Key,
// as a real client would; only 202 answers count as accepted.
type load struct {
	n        int
	mu       sync.Mutex
	accepted map[string]time.Time // notification id: when the API accepted it
	due      map[string]time.Time // a scheduled notification's id: the earliest it may go
	statuses map[int]int          // unexpected answers
	count    atomic.Int64
	// unavailable counts 503 answers; unanswered, requests that got no
	// answer; abandoned, notifications given up on.
	unavailable, unanswered, abandoned atomic.Int64
	done                               chan struct{}
	cancel                             context.CancelFunc
	// gate holds the notifications from gateAt on back until it is
	// closed, so the load outlasts the faults however long they take;
	// held is when the load reached it, zero if the gate was open by
	// then.
	gate   chan struct{}
	gateAt int
	held   atomic.Pointer[time.Time]
}

// open lets the notifications held at the gate go.
func (l *load) open() {
	select {
	case <-l.gate:
	default:
		close(l.gate)
	}
}

// heldSince returns when the load reached the closed gate, if it did.
func (l *load) heldSince() (time.Time, bool) {
	if p := l.held.Load(); p != nil {
		return *p, true
	}
	return time.Time{}, false
}

// body is notification i: an email part and a webhook part. One in
// scheduledEvery is scheduled a moment ahead (within the ttl backend's
// longest step), so scheduled copies wait in the wait queues whose
// leaders the test kills; the native backend cannot schedule.
// It returns the body and the delay asked for, zero if none.
func (r *rig) body(i int) (string, time.Duration) {
	var delay time.Duration
	field := ""
	if r.topo.Backend != retry.Native && i%scheduledEvery == 1 {
		delay = time.Duration(300+(i*37)%700) * time.Millisecond
		field = fmt.Sprintf(`,"delay":"%dms"`, delay.Milliseconds())
	}
	return fmt.Sprintf(`{"email":{"to":["user%d@example.com"],"subject":"cluster test %d","text":"hello"},`+
		`"webhook":{"url":%q,"payload":{"i":%d}}%s}`, i, i, r.hook, i, field), delay
}

// scheduledEvery is how often a notification of the load is scheduled.
const scheduledEvery = 10

// send posts n notifications from workers clients, at most perSecond a
// second, in the background, each until it is accepted or patience runs
// out. Notification gateAt and the ones after it wait for load.open.
func (r *rig) send(n, gateAt, workers, perSecond int, patience time.Duration) *load {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	l := &load{n: n, accepted: map[string]time.Time{}, due: map[string]time.Time{}, statuses: map[int]int{}, done: make(chan struct{}), cancel: cancel,
		gate: make(chan struct{}), gateAt: gateAt}
	r.t.Cleanup(func() {
		cancel()
		<-l.done
	})
	client := &http.Client{Timeout: clientTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	jobs := make(chan int)
	go func() {
		defer close(jobs)
		tk := time.NewTicker(time.Second / time.Duration(perSecond))
		defer tk.Stop()
		for i := range n {
			if i == gateAt {
				select {
				case <-l.gate:
				default:
					now := time.Now()
					l.held.Store(&now)
					select {
					case <-l.gate:
					case <-ctx.Done():
						return
					}
				}
			}
			select {
			case <-tk.C:
			case <-ctx.Done():
				return
			}
			select {
			case jobs <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				r.post(ctx, client, l, i)
			}
		})
	}
	go func() {
		wg.Wait()
		cancel()
		close(l.done)
	}()
	return l
}

// post sends notification i until the API accepts it.
func (r *rig) post(ctx context.Context, client *http.Client, l *load, i int) {
	key := fmt.Sprintf("%sn%d", r.prefix, i)
	body, delay := r.body(i)
	// A delay counts from the request that schedules the copies. A try
	// answered 503 or not at all may still have been published (at least
	// once), and a later try that is accepted schedules anew, so its
	// due_at can be later than the copies of an earlier try: the first
	// try's start plus the delay is the earliest any copy may go.
	first := time.Now()
	wait := 50 * time.Millisecond
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.api+"/v1/notifications", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Idempotency-Key", key)
		resp, err := client.Do(req)
		switch {
		case err != nil:
			l.unanswered.Add(1)
		case resp.StatusCode == http.StatusAccepted:
			var res struct {
				ID    string
				DueAt *time.Time `json:"due_at"`
			}
			err := json.NewDecoder(resp.Body).Decode(&res)
			resp.Body.Close()
			if err != nil || res.ID == "" {
				l.record(0)
				return
			}
			l.mu.Lock()
			if _, dup := l.accepted[res.ID]; !dup {
				l.accepted[res.ID] = time.Now()
			}
			if res.DueAt != nil {
				due := *res.DueAt
				if earliest := first.Add(delay); earliest.Before(due) {
					due = earliest
				}
				l.due[res.ID] = due
			}
			l.mu.Unlock()
			l.count.Add(1)
			return
		case resp.StatusCode == http.StatusServiceUnavailable:
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			l.unavailable.Add(1)
		default:
			resp.Body.Close()
			l.record(resp.StatusCode)
			return
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			l.abandoned.Add(1)
			return
		case <-timer.C:
		}
		wait = min(2*wait, time.Second)
	}
}

func (l *load) record(status int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.statuses[status]++
}

// ended reports whether every client has finished.
func (l *load) ended() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// waitAccepted waits until at least k notifications were accepted.
func (r *rig) waitAccepted(l *load, k int, timeout time.Duration) {
	r.t.Helper()
	if !poll(timeout, 20*time.Millisecond, func() bool { return l.ended() || l.count.Load() >= int64(k) }) {
		r.t.Fatalf("after %s: only %d of %d notifications accepted", timeout, l.count.Load(), k)
	}
}

// finish waits for the load to end and checks that every notification was
// accepted in the end.
func (r *rig) finish(l *load, timeout time.Duration) {
	r.t.Helper()
	if !poll(timeout, 100*time.Millisecond, l.ended) {
		l.cancel()
		<-l.done
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r.t.Logf("sent: %d/%d accepted, %d answers 503, %d requests unanswered, %d abandoned",
		l.count.Load(), l.n, l.unavailable.Load(), l.unanswered.Load(), l.abandoned.Load())
	if len(l.statuses) > 0 {
		r.t.Errorf("unexpected answers from the API (status: count): %v", l.statuses)
	}
	if int(l.count.Load()) != l.n {
		r.t.Errorf("the API accepted %d of %d notifications", l.count.Load(), l.n)
	}
}

// copyKey is one channel's copy of a notification.
type copyKey struct{ id, channel string }

// outcome is what became of the copies: when each was first delivered,
// how many extra deliveries it had, and the parked ones with their reason.
type outcome struct {
	delivered  map[copyKey]time.Time
	duplicates map[copyKey]int
	parked     map[copyKey]string
	// first is when each copy's first attempt reached its downstream.
	first map[copyKey]time.Time
}

// outcome reads the downstreams' records and the dead-letter queue. The
// downstreams record every attempt per id and decide each from the seed,
// id and attempt number alone, so the attempts that got through can be
// found again; their count is checked against the downstreams' own.
func (r *rig) outcome(ctx context.Context) (outcome, error) {
	o := outcome{delivered: map[copyKey]time.Time{}, duplicates: map[copyKey]int{}, parked: map[copyKey]string{}, first: map[copyKey]time.Time{}}
	rep := r.down.Stats().Report()
	for _, c := range []struct {
		ch    flaky.Channel
		stats flaky.ChannelStats
	}{{flaky.Email, rep.Email}, {flaky.Webhook, rep.Webhook}} {
		name := r.dcfg.WebhookScenario
		if c.ch == flaky.Email {
			name = r.dcfg.EmailScenario
		}
		sc := flaky.Scenario{Name: name, Channel: c.ch, Seed: r.dcfg.Seed, Rate: r.dcfg.Rate}
		ids, dups := 0, 0
		for id, ats := range c.stats.Attempts {
			k := copyKey{id, string(c.ch)}
			if len(ats) > 0 {
				o.first[k] = slices.MinFunc(ats, time.Time.Compare)
			}
			for i, at := range ats {
				if !sc.Decide(id, i+1, "", at).Accept {
					continue
				}
				if _, seen := o.delivered[k]; seen {
					o.duplicates[k]++
					dups++
					continue
				}
				o.delivered[k] = at
				ids++
			}
		}
		if ids != c.stats.Accepted || dups != c.stats.Duplicates {
			return o, fmt.Errorf("%s downstream: %d ids accepted and %d duplicates by its own count, %d and %d found from its attempts",
				c.ch, c.stats.Accepted, c.stats.Duplicates, ids, dups)
		}
	}
	conn, err := retry.DialAny(r.c.urls(), "relay cluster accounting")
	if err != nil {
		return o, err
	}
	defer conn.Close()
	list, err := retry.DeadLetters{Conn: conn, Topology: r.topo}.List(ctx, retry.Filter{}, 0)
	if err != nil {
		return o, err
	}
	for _, p := range list {
		o.parked[copyKey{p.ID, r.channelOf(p.Source)}] = p.Reason
	}
	return o, nil
}

// channelOf names the channel of a work queue.
func (r *rig) channelOf(queue string) string {
	for _, rt := range r.topo.WorkRoutes() {
		if rt.Queue == queue {
			return rt.Key
		}
	}
	return queue
}

// tally is what became of a set of accepted copies.
type tally struct {
	accepted, delivered, parked, lost, duplicates int
	missing                                       []copyKey
}

func (t tally) String() string {
	return fmt.Sprintf("accepted %d delivered %d parked %d lost %d duplicates %d",
		t.accepted, t.delivered, t.parked, t.lost, t.duplicates)
}

// count tallies the copies of the notifications ids.
func (o outcome) count(ids []string) tally {
	var t tally
	for _, id := range ids {
		for _, ch := range []string{channel.Email.Name(), channel.Webhook.Name()} {
			k := copyKey{id, ch}
			t.accepted++
			t.duplicates += o.duplicates[k]
			_, delivered := o.delivered[k]
			_, parked := o.parked[k]
			switch {
			case delivered:
				t.delivered++
			case parked:
				t.parked++
			default:
				t.lost++
				t.missing = append(t.missing, k)
			}
		}
	}
	return t
}

// ids returns the accepted notifications, sorted.
func (l *load) ids() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.accepted))
	for id := range l.accepted {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// settle waits until every accepted copy is delivered or parked and the
// pipeline's queues are empty, and returns the outcome.
func (r *rig) settle(l *load, timeout time.Duration) outcome {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout+time.Minute)
	defer cancel()
	ids := l.ids()
	var o outcome
	var err error
	last := time.Now()
	done, progress := -1, time.Now()
	settled := poll(timeout, time.Second, func() bool {
		o, err = r.outcome(ctx)
		if err != nil {
			return false
		}
		t := o.count(ids)
		if time.Since(last) > 10*time.Second {
			last = time.Now()
			r.t.Logf("settling: %s", t)
		}
		if d := t.delivered + t.parked; d != done {
			done, progress = d, time.Now()
		} else if t.lost > 0 && time.Since(progress) > stall {
			r.releaseHeld(time.Since(progress))
			progress = time.Now()
		}
		return t.lost == 0
	})
	if err != nil {
		r.t.Fatalf("count: %v", err)
	}
	if settled && !r.waitDrained(time.Minute) {
		qs, _ := r.c.queues(r.prefix)
		r.t.Errorf("the pipeline's queues did not drain: %v", qs)
	}
	// Read again once the queues are empty: a duplicate delivered late
	// still counts.
	if o2, err := r.outcome(ctx); err == nil {
		o = o2
	}
	return o
}

// stall is how long the settling copies may go without one delivered
// before the test looks for dead-lettered messages the broker holds.
const stall = 20 * time.Second

// releaseHeld moves the leader of each quorum queue that holds
// dead-lettered messages it does not forward. RabbitMQ 3.10's
// at-least-once dead-letter worker of a quorum queue can stop for good
// around a leader election: the messages stay in the queue, counted but
// neither ready nor unacknowledged, until the queue's next leader starts a
// worker of its own. docs/cluster.md gives operators the same remedy; the test
// applies it at most twice per queue and reports each time it did.
func (r *rig) releaseHeld(stalled time.Duration) {
	r.t.Helper()
	qs, err := r.c.queues(r.prefix)
	if err != nil {
		r.t.Logf("settling: %v", err)
		return
	}
	for _, q := range qs {
		if q.held() == 0 || q.Leader == "" {
			continue
		}
		tries := 0
		for _, x := range r.released {
			if x.queue == q.Name {
				tries++
			}
		}
		if tries >= 2 {
			continue
		}
		x := release{queue: q.Name, leader: q.Leader, held: q.held(), stalled: stalled}
		r.t.Logf("settling: %s holds %d dead-lettered messages it does not forward, and nothing was delivered for %s: moving its leader off %s",
			q.Name, x.held, stalled.Round(time.Second), q.Leader)
		if err := r.c.moveLeader(q.Name, q.Leader); err != nil {
			// The other way to a new leader: restart the node.
			r.t.Logf("settling: move the leader of %s: %v; restarting %s instead", q.Name, err, q.Leader)
			if err := r.c.restart(q.Leader); err != nil {
				r.t.Logf("settling: restart %s: %v", q.Leader, err)
				continue
			}
		}
		r.released = append(r.released, x)
	}
}

// waitDrained waits until the test's queues, dead-letter queue aside, hold
// no message, ready or unacknowledged.
func (r *rig) waitDrained(timeout time.Duration) bool {
	dead := r.topo.Name(retry.DeadQueue)
	return poll(timeout, time.Second, func() bool {
		qs, err := r.c.queues(r.prefix)
		if err != nil {
			return false
		}
		for _, q := range qs {
			if q.Name != dead && q.Messages > 0 {
				return false
			}
		}
		return true
	})
}

// early checks the scheduled notifications of l: none of their copies
// reached its downstream before the earliest it was due. It returns how many were
// scheduled and how many copies came early.
func (r *rig) early(l *load, o outcome) (scheduled, early int) {
	r.t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, due := range l.due {
		for _, ch := range []string{channel.Email.Name(), channel.Webhook.Name()} {
			if at, ok := o.first[copyKey{id, ch}]; ok && at.Before(due) {
				early++
				r.t.Errorf("scheduled %s %s reached its downstream at %s, %s before the earliest it was due", id, ch, at.Format(time.RFC3339Nano), due.Sub(at))
			}
		}
	}
	if r.topo.Backend != retry.Native && len(l.due) == 0 {
		r.t.Errorf("no scheduled notification was accepted: the 202s carried no due_at")
	}
	return len(l.due), early
}
