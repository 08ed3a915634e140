//go:build faults

package faults_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/demo/all"
	"github.com/relay-demo/relay/demo/flaky"
	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/events"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// token is the API token every fault test's relay accepts.
const token = "faults-token-0123456789abcdef"

// clientTimeout is how long a client waits for the API's answer: the API's
// publish timeout (10s) with room to spare.
const clientTimeout = 20 * time.Second

// options shape one fault test's pipeline and downstreams.
type options struct {
	queueType string // QUEUE_TYPE
	delays    string // RETRY_DELAYS
	max       int    // RETRY_MAX
	// rate is the share of attempts the flaky downstreams fail.
	rate float64
	// emailScenario and webhookScenario default to flaky.
	emailScenario, webhookScenario string
	// retryAfter and rateLimitAttempts shape the rate-limited scenario;
	// zero keeps flaky's defaults.
	retryAfter        time.Duration
	rateLimitAttempts int
}

// defaults are the options of the accounting tests: a short schedule and
// enough retries that a transient failure practically always ends
// delivered (a copy is parked only after 11 failures in a row, 0.3^11).
func defaults() options {
	return options{queueType: "quorum", delays: "200ms,500ms,1s", max: 10, rate: 0.3}
}

// rig is one fault test's world: a private topology on the broker, the
// fake downstreams running in the test process (so they outlive any relay
// process the test kills), and the environment relay runs with.
type rig struct {
	t      *testing.T
	url    string // the broker, reached directly
	prefix string
	topo   retry.Topology
	down   *flaky.Server
	dcfg   flaky.Config
	env    map[string]string
	hook   string // the webhook URL every notification targets
	api    string // the API's base URL, once relay has said where it listens
	logs   string // the file relay logs to
	// unreachable counts the unreachable webhooks made, each to a host
	// of its own (unreachableWebhook).
	unreachable int
}

func newRig(t *testing.T, o options) *rig {
	t.Helper()
	if o.emailScenario == "" {
		o.emailScenario = flaky.Flaky
	}
	if o.webhookScenario == "" {
		o.webhookScenario = flaky.Flaky
	}
	needBrokerControl(t)
	r := &rig{t: t, url: retrytest.URL(t), prefix: retrytest.Prefix(t)}
	// Whatever a test did to the broker, it is running again before the
	// test's other cleanups need it (cleanups run last registered first).
	t.Cleanup(func() { ensureBroker(t, r.url) })

	secret := "whsec_" + base64.StdEncoding.EncodeToString(random(32))
	denv := map[string]string{
		"FLAKY_HTTP_ADDR": "127.0.0.1:0", "FLAKY_SMTP_ADDR": "127.0.0.1:0",
		"FLAKY_EMAIL_SCENARIO": o.emailScenario, "FLAKY_WEBHOOK_SCENARIO": o.webhookScenario,
		"FLAKY_RATE": fmt.Sprint(o.rate), "FLAKY_SEED": "7", "FLAKY_OUTAGE": "1h",
		"WEBHOOK_SECRET": secret,
	}
	if o.retryAfter > 0 {
		denv["FLAKY_RETRY_AFTER"] = o.retryAfter.String()
	}
	if o.rateLimitAttempts > 0 {
		denv["FLAKY_RATE_LIMIT_ATTEMPTS"] = fmt.Sprint(o.rateLimitAttempts)
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
	r.hook = "http://" + down.HTTPAddr() + "/webhooks/faults"

	delays, err := retry.ParseDelays(o.delays)
	if err != nil {
		t.Fatal(err)
	}
	r.topo = retry.Topology{Prefix: r.prefix, Routes: channel.Routes(), QueueType: retry.QueueType(o.queueType),
		Backend: retry.TTL, Policy: retry.Policy{Delays: delays, MaxRetries: o.max}}
	t.Cleanup(r.deleteTopology)

	_, smtpPort, _ := net.SplitHostPort(down.SMTPAddr())
	r.env = map[string]string{
		"AMQP_URL": r.url, "TOPOLOGY_PREFIX": r.prefix, "QUEUE_TYPE": o.queueType, "DELAY_BACKEND": "ttl",
		"RETRY_DELAYS": o.delays, "RETRY_MAX": fmt.Sprint(o.max),
		// The first run's API listens on a port the system chooses, and
		// every later run on the same (waitReady).
		"API_TOKENS": token, "HTTP_ADDR": "127.0.0.1:0", "SHUTDOWN_TIMEOUT": "5s", "DATA_DIR": t.TempDir(),
		// relay all runs downstreams of its own; they listen on spare
		// ports and nothing is sent to them.
		"FLAKY_HTTP_ADDR": "127.0.0.1:0", "FLAKY_SMTP_ADDR": "127.0.0.1:0",
		"FLAKY_EMAIL_SCENARIO": flaky.Healthy, "FLAKY_WEBHOOK_SCENARIO": flaky.Healthy,
		"SMTP_HOST": "127.0.0.1", "SMTP_PORT": smtpPort, "SMTP_TLS": "none", "SMTP_TIMEOUT": "5s",
		"EMAIL_FROM":     "relay@faults.test",
		"WEBHOOK_SECRET": secret, "WEBHOOK_ALLOW_CIDRS": "127.0.0.0/8,::1/128", "WEBHOOK_TIMEOUT": "5s",
	}
	// The management API relay would derive (port 15672 of the broker's
	// host) is another broker's when the tests run on a node of their
	// own: name the node's.
	if v := os.Getenv("MANAGEMENT_URL"); v != "" {
		r.env["MANAGEMENT_URL"] = v
	}
	r.logs = filepath.Join(t.TempDir(), "relay.log")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("end of the relay log %s:\n%s", r.logs, tail(r.logs, 24<<10))
		}
	})
	return r
}

// deleteTopology removes everything the test declared, the events
// exchange included, on a connection of its own.
func (r *rig) deleteTopology() {
	conn, err := retry.Dial(r.url, "relay faults cleanup")
	if err != nil {
		r.t.Errorf("cleanup: %v", err)
		return
	}
	defer conn.Close()
	if err := r.topo.Delete(conn); err != nil {
		r.t.Errorf("cleanup: %v", err)
	}
	if ch, err := conn.Channel(); err == nil {
		_, _ = ch.QueueDelete(r.topo.Name(events.HistoryQueue), false, false, false)
		_ = ch.ExchangeDelete(events.ExchangeName(r.topo), false, false)
		ch.Close()
	}
}

func random(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// logTail is the end of the log at path, read when it is printed.
type logTail string

func (l logTail) String() string { return tail(string(l), 8<<10) }

// tail returns at most the last n bytes of a file.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// logFile opens the relay log for appending: every run of relay in a test
// writes to the same file.
func (r *rig) logFile() *os.File {
	f, err := os.OpenFile(r.logs, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		r.t.Fatal(err)
	}
	return f
}

// inProcess is `relay all` running inside the test process.
type inProcess struct {
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// startInProcess runs `relay all` with env in the test process and waits
// until its API is ready.
func (r *rig) startInProcess(env map[string]string) *inProcess {
	r.t.Helper()
	logs := r.logFile()
	ctx, cancel := context.WithCancel(context.Background())
	p := &inProcess{cancel: cancel, done: make(chan error, 1)}
	go func() {
		p.done <- all.Run(ctx, func(k string) string { return env[k] }, logs)
		logs.Close()
	}()
	r.t.Cleanup(func() { p.stop(r.t) })
	r.waitReady(30 * time.Second)
	return p
}

// stop ends relay and waits for it, at most a minute.
func (p *inProcess) stop(t *testing.T) {
	p.once.Do(func() {
		p.cancel()
		select {
		case err := <-p.done:
			if err != nil {
				t.Errorf("relay all: %v", err)
			}
		case <-time.After(time.Minute):
			t.Errorf("relay all did not stop within a minute")
		}
	})
}

// waitReady polls the API's /readyz until it answers 200. After the first
// run of relay, which listens on a port the system chooses, it reads the
// API's address from the log and keeps it in r.env, so that every run
// after binds the same, as a restarted deployment would, and the load's
// clients reach it (through r.api).
func (r *rig) waitReady(timeout time.Duration) {
	r.t.Helper()
	if r.api == "" {
		var addrs all.Addrs
		retrytest.Eventually(r.t, timeout, func() bool {
			log, _ := os.ReadFile(r.logs)
			a, ok := all.Listening(string(log))
			addrs = a
			return ok
		}, "relay never said where it listens; log:\n%s", logTail(r.logs))
		r.api = "http://" + addrs.API
		// A copy: the running relay may read the map it was given.
		env := maps.Clone(r.env)
		env["HTTP_ADDR"] = addrs.API
		r.env = env
	}
	retrytest.Eventually(r.t, timeout, func() bool {
		resp, err := http.Get(r.api + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "the API at %s never became ready; log:\n%s", r.api, logTail(r.logs))
}

// load is a run of clients posting notifications to the API. A client
// that gets a 503, a 409 (its key still held by a request a killed API
// never finished: "try again shortly") or no answer at all tries again
// with the same Idempotency-Key, as a real client would; only 202 answers
// count as accepted.
type load struct {
	n        int
	mu       sync.Mutex
	ids      map[string]bool
	statuses map[int]int // unexpected answers
	firstErr error       // the first request that got no answer
	accepted atomic.Int64
	// unavailable counts 503 answers; inUse, 409 answers; unanswered,
	// requests that got no answer (relay was down); abandoned,
	// notifications given up on.
	unavailable, inUse, unanswered, abandoned atomic.Int64
	done                                      chan struct{}
	cancel                                    context.CancelFunc
}

// body is notification i: an email part and a webhook part.
func (r *rig) body(i int) string {
	return fmt.Sprintf(`{"email":{"to":["user%d@example.com"],"subject":"fault test %d","text":"hello"},`+
		`"webhook":{"url":%q,"payload":{"i":%d}}}`, i, i, r.hook, i)
}

// send posts n notifications from workers clients, at most perSecond a
// second (0: as fast as the API answers), in the background. Every
// notification is tried until it is accepted or patience runs out.
func (r *rig) send(n, workers, perSecond int, patience time.Duration) *load {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	l := &load{n: n, ids: map[string]bool{}, statuses: map[int]int{}, done: make(chan struct{}), cancel: cancel}
	progressed := make(chan struct{})
	r.t.Cleanup(func() {
		cancel()
		<-l.done
		<-progressed
	})
	client := &http.Client{Timeout: clientTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	jobs := make(chan int)
	go func() {
		defer close(jobs)
		var tick <-chan time.Time
		if perSecond > 0 {
			tk := time.NewTicker(time.Second / time.Duration(perSecond))
			defer tk.Stop()
			tick = tk.C
		}
		for i := range n {
			if tick != nil {
				select {
				case <-tick:
				case <-ctx.Done():
					return
				}
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
	go func() {
		defer close(progressed)
		r.progress(l)
	}()
	return l
}

// post sends notification i until the API accepts it.
func (r *rig) post(ctx context.Context, client *http.Client, l *load, i int) {
	key := fmt.Sprintf("%sn%d", r.prefix, i)
	body := r.body(i)
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
			l.mu.Lock()
			if l.firstErr == nil {
				l.firstErr = err
			}
			l.mu.Unlock()
		case resp.StatusCode == http.StatusAccepted:
			var res struct{ ID string }
			err := json.NewDecoder(resp.Body).Decode(&res)
			resp.Body.Close()
			if err != nil || res.ID == "" {
				l.record(0)
				return
			}
			l.mu.Lock()
			l.ids[res.ID] = true
			l.mu.Unlock()
			l.accepted.Add(1)
			return
		case resp.StatusCode == http.StatusServiceUnavailable:
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			l.unavailable.Add(1)
		case resp.StatusCode == http.StatusConflict:
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			l.inUse.Add(1)
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

// progress logs the load's state every five seconds until it ends.
func (r *rig) progress(l *load) {
	tk := time.NewTicker(5 * time.Second)
	defer tk.Stop()
	for {
		select {
		case <-l.done:
			return
		case <-tk.C:
			r.t.Logf("sending: %d/%d accepted, %d answers 503, %d requests unanswered",
				l.accepted.Load(), l.n, l.unavailable.Load(), l.unanswered.Load())
		}
	}
}

// waitAccepted waits until at least k notifications were accepted, or the
// load ended.
func (r *rig) waitAccepted(l *load, k int, timeout time.Duration) {
	r.t.Helper()
	if !poll(timeout, 10*time.Millisecond, func() bool {
		select {
		case <-l.done:
			return true
		default:
			return l.accepted.Load() >= int64(k)
		}
	}) {
		r.t.Fatalf("after %s: only %d of %d notifications accepted", timeout, l.accepted.Load(), k)
	}
}

// finish waits for the load to end and checks that every notification was
// accepted in the end. With answered, it also checks that the API answered
// every request, if only with a 503: a relay that stays up must never leave
// a client waiting past its publish timeout, whatever the broker does.
func (r *rig) finish(l *load, answered bool, timeout time.Duration) {
	r.t.Helper()
	select {
	case <-l.done:
	case <-time.After(timeout):
		l.cancel()
		<-l.done
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r.t.Logf("sent: %d/%d accepted, %d answers 503, %d answers 409, %d requests unanswered, %d abandoned",
		l.accepted.Load(), l.n, l.unavailable.Load(), l.inUse.Load(), l.unanswered.Load(), l.abandoned.Load())
	if l.firstErr != nil {
		r.t.Logf("first request without an answer: %v", l.firstErr)
	}
	if answered && l.unanswered.Load() > 0 {
		r.t.Errorf("the API left %d requests without an answer for %s (the first: %v); it should answer 503 within its publish timeout",
			l.unanswered.Load(), clientTimeout, l.firstErr)
	}
	if len(l.statuses) > 0 {
		r.t.Errorf("unexpected answers from the API (status: count): %v", l.statuses)
	}
	if int(l.accepted.Load()) != l.n {
		r.t.Errorf("the API accepted %d of %d notifications", l.accepted.Load(), l.n)
	}
}

// copyKey is one channel's copy of a notification.
type copyKey struct{ id, channel string }

// tally is what became of the accepted copies.
type tally struct {
	accepted, delivered, parked, lost, duplicates int
	missing                                       []copyKey
	reasons                                       map[string]int
	// unasked counts copies delivered or parked that the API never
	// accepted (a client gave up after its copy reached the broker).
	unasked int
}

func (t tally) String() string {
	return fmt.Sprintf("accepted %d delivered %d parked %d lost %d duplicates %d",
		t.accepted, t.delivered, t.parked, t.lost, t.duplicates)
}

// scenario rebuilds the scenario a downstream channel plays, to tell which
// of its recorded attempts it accepted.
func (r *rig) scenario(ch flaky.Channel) flaky.Scenario {
	name := r.dcfg.WebhookScenario
	if ch == flaky.Email {
		name = r.dcfg.EmailScenario
	}
	return flaky.Scenario{Name: name, Channel: ch, Seed: r.dcfg.Seed, Rate: r.dcfg.Rate,
		RetryAfter: r.dcfg.RetryAfter, RateLimitAttempts: r.dcfg.RateLimitAttempts, PermanentMatch: r.dcfg.PermanentMatch}
}

// delivered lists the copies the downstreams accepted. The downstreams
// record every attempt per id and decide each one from the seed, id and
// attempt number alone, so the attempt that got through can be found
// again; the count is checked against the downstreams' own.
func (r *rig) delivered() (map[copyKey]bool, flaky.StatsReport, error) {
	rep := r.down.Stats().Report()
	out := map[copyKey]bool{}
	for _, c := range []struct {
		ch    flaky.Channel
		stats flaky.ChannelStats
	}{{flaky.Email, rep.Email}, {flaky.Webhook, rep.Webhook}} {
		sc := r.scenario(c.ch)
		n := 0
		for id, ats := range c.stats.Attempts {
			for k, at := range ats {
				if sc.Decide(id, k+1, "", at).Accept {
					out[copyKey{id, string(c.ch)}] = true
					n++
					break
				}
			}
		}
		if n != c.stats.Accepted {
			return out, rep, fmt.Errorf("%s downstream: %d ids accepted by its own count, %d found from its attempts", c.ch, c.stats.Accepted, n)
		}
	}
	return out, rep, nil
}

// parked lists the copies in the dead-letter queue, with their reasons.
func (r *rig) parked(ctx context.Context) ([]retry.DeadLetter, error) {
	conn, err := retry.Dial(r.url, "relay faults accounting")
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return retry.DeadLetters{Conn: conn, Topology: r.topo}.List(ctx, retry.Filter{}, 0)
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

// count tallies the accepted copies: delivered, parked, or neither.
func (r *rig) count(ctx context.Context, l *load) (tally, error) {
	l.mu.Lock()
	ids := make([]string, 0, len(l.ids))
	for id := range l.ids {
		ids = append(ids, id)
	}
	l.mu.Unlock()
	slices.Sort(ids)
	got, rep, err := r.delivered()
	if err != nil {
		return tally{}, err
	}
	list, err := r.parked(ctx)
	if err != nil {
		return tally{}, err
	}
	parked := map[copyKey]string{}
	for _, p := range list {
		parked[copyKey{p.ID, r.channelOf(p.Source)}] = p.Reason
	}
	t := tally{reasons: map[string]int{}, duplicates: rep.Email.Duplicates + rep.Webhook.Duplicates}
	wanted := map[copyKey]bool{}
	for _, id := range ids {
		for _, ch := range []string{channel.Email.Name(), channel.Webhook.Name()} {
			k := copyKey{id, ch}
			wanted[k] = true
			t.accepted++
			switch reason, isParked := parked[k]; {
			case got[k]:
				t.delivered++
			case isParked:
				t.parked++
				t.reasons[reason]++
			default:
				t.lost++
				t.missing = append(t.missing, k)
			}
		}
	}
	for k := range got {
		if !wanted[k] {
			t.unasked++
		}
	}
	for k := range parked {
		if !wanted[k] && !got[k] {
			t.unasked++
		}
	}
	return t, nil
}

// settle waits until every accepted copy is delivered or parked and the
// pipeline's queues are empty, then prints the test's summary line and
// fails the test if any accepted copy was lost.
func (r *rig) settle(name string, l *load, timeout time.Duration) tally {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout+time.Minute)
	defer cancel()
	var t tally
	var err error
	last := time.Now()
	settled := poll(timeout, 500*time.Millisecond, func() bool {
		t, err = r.count(ctx, l)
		if err == nil && time.Since(last) > 5*time.Second {
			last = time.Now()
			r.t.Logf("settling: %s", t)
		}
		return err == nil && t.lost == 0
	})
	if err != nil {
		r.t.Fatalf("count: %v", err)
	}
	drained := settled && r.waitDrained(time.Minute)
	// Read again once the queues are empty: a duplicate delivered late
	// still counts.
	if t2, err := r.count(ctx, l); err == nil {
		t = t2
	}
	r.t.Logf("%s: %s", name, t)
	if len(t.reasons) > 0 || t.unasked > 0 {
		r.t.Logf("%s: parked by reason %v; copies delivered or parked that the API never accepted: %d", name, t.reasons, t.unasked)
	}
	if t.lost > 0 {
		rep := r.down.Stats().Report()
		for _, k := range t.missing[:min(len(t.missing), 10)] {
			at := rep.Email.Attempts[k.id]
			if k.channel == channel.Webhook.Name() {
				at = rep.Webhook.Attempts[k.id]
			}
			r.t.Logf("lost: %s copy of %s, %d attempts seen downstream", k.channel, k.id, len(at))
		}
		depths, _ := queueDepths(r.prefix)
		r.t.Errorf("%s: %d of %d accepted copies were neither delivered nor parked after %s; queues: %v", name, t.lost, t.accepted, timeout, depths)
	} else if !drained {
		depths, _ := queueDepths(r.prefix)
		r.t.Errorf("%s: the pipeline's queues did not drain: %v", name, depths)
	}
	return t
}

// waitDrained waits until the test's queues, dead-letter queue aside, hold
// no message, ready or unacknowledged.
func (r *rig) waitDrained(timeout time.Duration) bool {
	dead := r.topo.Name(retry.DeadQueue)
	return poll(timeout, time.Second, func() bool {
		depths, err := queueDepths(r.prefix)
		if err != nil {
			return false
		}
		for q, n := range depths {
			if q != dead && n > 0 {
				return false
			}
		}
		return true
	})
}

// poll checks cond every interval until it holds (true) or timeout passes
// (false).
func poll(timeout, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	tk := time.NewTicker(interval)
	defer tk.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tk.C
	}
	return true
}

// hold keeps a fault in place for d.
func hold(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	<-t.C
}

// rawConn opens a connection straight to the broker, closed when the test
// ends.
func (r *rig) rawConn() *amqp.Connection {
	r.t.Helper()
	conn, err := retry.Dial(r.url, "relay faults "+r.t.Name())
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { conn.Close() })
	return conn
}

// short formats a value for a log line, cut at n bytes.
func short(v any, n int) string {
	s := fmt.Sprint(v)
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
