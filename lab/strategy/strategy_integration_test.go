//go:build integration

package strategy_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/testenv"
	"github.com/relay-demo/relay/lab/strategy"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// tiny keeps the suite fast: two retries, tens of milliseconds apart.
var tiny = retry.Policy{Delays: []time.Duration{20 * time.Millisecond, 40 * time.Millisecond}}

// always marks a row whose every attempt fails.
const always = -1

// row is one message and where it must end up.
type row struct {
	name string
	// fail is how many attempts fail before one succeeds; always: all.
	fail    int
	headers amqp.Table
	// wantAttempts is the exact number of attempts the handler sees; for a
	// message that never settles, wantAtLeast is checked instead.
	wantDelivered, wantParked bool
	wantAttempts              int
	wantAtLeast               int
}

// downstream fails each message's first attempts as its row says and
// records every attempt.
type downstream struct {
	mu        sync.Mutex
	fail      map[string]int
	attempts  map[string]int
	delivered map[string]int
}

func (d *downstream) Handle(_ context.Context, m *retry.Message) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.attempts[m.ID]++
	if f := d.fail[m.ID]; f == always || d.attempts[m.ID] <= f {
		return fmt.Errorf("attempt %d of %s fails on purpose", d.attempts[m.ID], m.ID)
	}
	d.delivered[m.ID]++
	return nil
}

func (d *downstream) snapshot() (attempts, delivered map[string]int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	attempts, delivered = map[string]int{}, map[string]int{}
	for k, v := range d.attempts {
		attempts[k] = v
	}
	for k, v := range d.delivered {
		delivered[k] = v
	}
	return attempts, delivered
}

// started is a strategy declared under a private prefix and running until
// the test ends.
type started struct {
	prefix string
	s      strategy.Strategy
	conn   *amqp.Connection
	down   *downstream
}

// start declares the strategy, runs it, and removes it when the test ends.
// A broker that cannot run the strategy ends the test with the reason
// (testenv.Lacks: a failure where RELAY_EXPECT_BACKENDS names the backend
// the strategy needs, a skip elsewhere).
func start(t *testing.T, name string, policy retry.Policy) *started {
	t.Helper()
	down := &downstream{fail: map[string]int{}, attempts: map[string]int{}, delivered: map[string]int{}}
	return startWith(t, name, policy, down, nil)
}

// startWith is start with the handler and observer given.
func startWith(t *testing.T, name string, policy retry.Policy, h retry.Handler, observe func(strategy.Event)) *started {
	t.Helper()
	prefix := retrytest.Prefix(t)
	s, err := strategy.New(name, strategy.Options{Prefix: prefix, URL: retrytest.URL(t), Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	conn := retrytest.Conn(t)
	if err := s.Declare(context.Background(), conn); err != nil {
		if errors.Is(err, strategy.ErrUnsupported) {
			testenv.Lacks(t, needs(name), "%s cannot run on this broker: %v", name, err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Delete(conn); err != nil {
			t.Errorf("delete %s: %v", name, err)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, conn, h, observe) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run %s: %v", name, err)
		}
	})
	ready(t, conn, s.Layout().Consumed)
	down, _ := h.(*downstream)
	return &started{prefix: prefix, s: s, conn: conn, down: down}
}

// needs is the delay backend a strategy that a broker may lack runs on,
// as RELAY_EXPECT_BACKENDS names it.
func needs(name string) string {
	switch strings.TrimSuffix(name, strategy.DirectSuffix) {
	case "delayed-exchange":
		return string(retry.Plugin)
	case "native-delayed-retry":
		return string(retry.Native)
	}
	return name
}

// ready waits until every queue has a consumer: relay's stages declare
// their topology before they consume, and a retry that reached a stage
// before it was up would wait for it, not for its delay.
func ready(t *testing.T, conn *amqp.Connection, queues []string) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	retrytest.Eventually(t, 10*time.Second, func() bool {
		for _, name := range queues {
			q, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
			if err != nil {
				t.Fatalf("inspect %s: %v", name, err)
			}
			if q.Consumers == 0 {
				return false
			}
		}
		return true
	}, "the strategy's consumers did not start on %v", queues)
}

func (st *started) publish(t *testing.T, id string, headers amqp.Table) {
	t.Helper()
	pub, err := retry.NewPublisher(st.conn, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	l := st.s.Layout()
	if err := pub.Publish(context.Background(), l.Exchange, l.Key, amqp.Publishing{
		MessageId: id, Headers: headers, ContentType: "application/json", DeliveryMode: amqp.Persistent,
		Timestamp: time.Now(), Body: []byte(`{"n":1}`),
	}); err != nil {
		t.Fatalf("publish %s: %v", id, err)
	}
}

// take removes every message now in queue and returns them by id.
func take(t *testing.T, conn *amqp.Connection, queue string) map[string]amqp.Delivery {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	out := map[string]amqp.Delivery{}
	for {
		d, ok, err := ch.Get(queue, true /* autoAck */)
		if err != nil {
			t.Fatalf("get from %s: %v", queue, err)
		}
		if !ok {
			return out
		}
		out[d.MessageId] = d
	}
}

// check publishes every row, waits until each has settled as its row says,
// and compares where each message ended up. It returns the parked copies.
func (st *started) check(t *testing.T, rows []row) map[string]amqp.Delivery {
	t.Helper()
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = fmt.Sprintf("%s-%d", r.name, i)
		st.down.mu.Lock()
		st.down.fail[ids[i]] = r.fail
		st.down.mu.Unlock()
	}
	for i, r := range rows {
		st.publish(t, ids[i], r.headers)
	}
	parked := map[string]amqp.Delivery{}
	dead := st.s.Layout().DeadQueue
	retrytest.Eventually(t, 15*time.Second, func() bool {
		if dead != "" {
			for id, d := range take(t, st.conn, dead) {
				parked[id] = d
			}
		}
		attempts, delivered := st.down.snapshot()
		for i, r := range rows {
			_, isParked := parked[ids[i]]
			switch {
			case r.wantDelivered && delivered[ids[i]] == 0,
				r.wantParked && !isParked,
				r.wantAtLeast > 0 && attempts[ids[i]] < r.wantAtLeast:
				return false
			}
		}
		return true
	}, "%s: messages did not settle as the table says", st.s.Name())
	// A delivered or parked message gets no further attempt: the counts
	// are final.

	attempts, delivered := st.down.snapshot()
	for i, r := range rows {
		_, isParked := parked[ids[i]]
		got := row{name: r.name, fail: r.fail, headers: r.headers,
			wantDelivered: delivered[ids[i]] > 0, wantParked: isParked, wantAttempts: attempts[ids[i]], wantAtLeast: r.wantAtLeast}
		want := r
		if r.wantAtLeast > 0 {
			got.wantAttempts = 0 // still going: only the lower bound holds
		}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(row{})); diff != "" {
			t.Errorf("%s, message %s (-want +got):\n%s", st.s.Name(), ids[i], diff)
		}
		if delivered[ids[i]] > 1 {
			t.Errorf("%s, message %s delivered %d times", st.s.Name(), ids[i], delivered[ids[i]])
		}
	}
	return parked
}

// retrying is the table every strategy with a retry limit of two passes.
var retrying = []row{
	{name: "healthy", fail: 0, wantDelivered: true, wantAttempts: 1},
	{name: "recovers", fail: 2, wantDelivered: true, wantAttempts: 3},
	{name: "poison", fail: always, wantParked: true, wantAttempts: 3},
}

func TestNaiveRequeue(t *testing.T) {
	t.Parallel()
	start(t, "naive-requeue", tiny).check(t, []row{
		{name: "healthy", fail: 0, wantDelivered: true, wantAttempts: 1},
		{name: "recovers", fail: 5, wantDelivered: true, wantAttempts: 6},
		// Nothing ever stops it: it is still being retried when the test ends.
		{name: "poison", fail: always, wantAtLeast: 50},
	})
}

func TestNaiveRequeueOnce(t *testing.T) {
	t.Parallel()
	parked := start(t, "naive-requeue-once", tiny).check(t, []row{
		{name: "healthy", fail: 0, wantDelivered: true, wantAttempts: 1},
		{name: "recovers", fail: 1, wantDelivered: true, wantAttempts: 2},
		{name: "poison", fail: always, wantParked: true, wantAttempts: 2},
	})
	// The broker parked it: its own record says why.
	for _, d := range parked {
		if got := d.Headers["x-first-death-reason"]; got != "rejected" {
			t.Errorf("parked %s: x-first-death-reason %v, want rejected", d.MessageId, got)
		}
	}
}

func TestDLXRequeue(t *testing.T) {
	t.Parallel()
	start(t, "dlx-requeue", tiny).check(t, retrying)
}

func TestDelayedExchange(t *testing.T) {
	t.Parallel()
	start(t, "delayed-exchange", tiny).check(t, retrying)
}

func TestTTLWaitQueue(t *testing.T) {
	t.Parallel()
	parked := start(t, "ttl-wait-queue", tiny).check(t, retrying)
	for _, d := range parked {
		if got := retry.RetryCount(d.Headers); got != 2 {
			t.Errorf("parked %s: x-retry-count %d, want 2", d.MessageId, got)
		}
	}
}

func TestPerMessageTTL(t *testing.T) {
	t.Parallel()
	start(t, "per-message-ttl", tiny).check(t, retrying)
}

func TestTTLTiers(t *testing.T) {
	t.Parallel()
	parked := start(t, "ttl-tiers", tiny).check(t, retrying)
	for _, d := range parked {
		if got := d.Headers[retry.HeaderDeadReason]; got != retry.ReasonMaxRetries {
			t.Errorf("parked %s: %s %v, want %s", d.MessageId, retry.HeaderDeadReason, got, retry.ReasonMaxRetries)
		}
	}
}

func TestQuorumDeliveryLimit(t *testing.T) {
	t.Parallel()
	parked := start(t, "quorum-delivery-limit", tiny).check(t, retrying)
	for _, d := range parked {
		if got := d.Headers["x-first-death-reason"]; got != "delivery_limit" {
			t.Errorf("parked %s: x-first-death-reason %v, want delivery_limit", d.MessageId, got)
		}
	}
}

func TestRetryAwareDLX(t *testing.T) {
	t.Parallel()
	st := start(t, "retry-aware-dlx", tiny)
	parked := st.check(t, []row{
		{name: "healthy", fail: 0, wantDelivered: true, wantAttempts: 1},
		{name: "recovers", fail: 2, wantDelivered: true, wantAttempts: 3},
		// Two retries by default: three failed deliveries per cycle.
		{name: "poison", fail: always, wantParked: true, wantAttempts: 3},
		// The message's own limit wins over the policy, both ways.
		{name: "impatient", fail: always, headers: amqp.Table{strategy.HeaderRetryMax: int32(1)}, wantParked: true, wantAttempts: 1},
		{name: "patient", fail: 4, headers: amqp.Table{strategy.HeaderRetryMax: int32(6)}, wantDelivered: true, wantAttempts: 5},
		{name: "urgent", fail: always, headers: amqp.Table{"priority": "high"}, wantParked: true, wantAttempts: 3},
	})
	urgent := take(t, st.conn, st.s.Layout().Copies[0])
	var got []string
	for id := range urgent {
		got = append(got, id)
	}
	if diff := cmp.Diff([]string{"urgent-5"}, got); diff != "" {
		t.Errorf("dead-letter-queue.urgent holds (-want +got):\n%s", diff)
	}
	if d, ok := parked["urgent-5"]; ok && d.Headers[retry.HeaderDeadSource] != st.s.Layout().WorkQueue {
		t.Errorf("parked urgent-5: x-dead-source %v, want %s", d.Headers[retry.HeaderDeadSource], st.s.Layout().WorkQueue)
	}
}

// TestRetryAwareDLXReplayStartsAFreshCycle replays a parked message with
// relay's own dead-letter replay: its total count survives, and the modulo
// gives it a full new cycle before it parks again.
func TestRetryAwareDLXReplayStartsAFreshCycle(t *testing.T) {
	t.Parallel()
	st := start(t, "retry-aware-dlx", tiny)
	const id = "cycle"
	st.down.mu.Lock()
	st.down.fail[id] = always
	st.down.mu.Unlock()
	st.publish(t, id, amqp.Table{strategy.HeaderRetryMax: int32(2)})

	// The strategy parks where relay's own pipeline does, so relay's
	// dead-letter tools work on it.
	dl := retry.DeadLetters{Conn: st.conn, Topology: retry.Topology{Prefix: st.prefix,
		Routes: []retry.Route{{Queue: strategy.WorkQueue, Key: strategy.RoutingKey}}}}
	var totals []any
	for cycle := 1; cycle <= 2; cycle++ {
		var parked []retry.DeadLetter
		retrytest.Eventually(t, 10*time.Second, func() bool {
			var err error
			parked, err = dl.List(context.Background(), retry.Filter{ID: id}, 0)
			if err != nil {
				t.Fatal(err)
			}
			return len(parked) == 1
		}, "cycle %d: message not parked", cycle)
		totals = append(totals, parked[0].Headers[strategy.HeaderRetryTotal])
		if attempts, _ := st.down.snapshot(); attempts[id] != 2*cycle {
			t.Fatalf("cycle %d: %d attempts, want %d", cycle, attempts[id], 2*cycle)
		}
		if cycle == 1 {
			if n, err := dl.Replay(context.Background(), retry.Filter{ID: id}); err != nil || n != 1 {
				t.Fatalf("replay: %d, %v", n, err)
			}
		}
	}
	if diff := cmp.Diff([]any{int32(2), int32(4)}, totals); diff != "" {
		t.Errorf("x-retry-total when parked, per cycle (-want +got):\n%s", diff)
	}
}

// TestDelayLevels runs the retry table on binary delay levels, with the
// stages and with the direct hand-off: both park where relay parks, with the
// reason, the count and the last error.
func TestDelayLevels(t *testing.T) {
	for _, name := range []string{"delay-levels", "delay-levels/direct"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			parked := start(t, name, tiny).check(t, retrying)
			for _, d := range parked {
				if got := d.Headers[retry.HeaderDeadReason]; got != retry.ReasonMaxRetries {
					t.Errorf("parked %s: %s %v, want %s", d.MessageId, retry.HeaderDeadReason, got, retry.ReasonMaxRetries)
				}
				if got := retry.RetryCount(d.Headers); got != 2 {
					t.Errorf("parked %s: x-retry-count %d, want 2", d.MessageId, got)
				}
				if got, _ := d.Headers[retry.HeaderLastError].(string); !strings.Contains(got, "fails on purpose") {
					t.Errorf("parked %s: %s %q, want the handler's error", d.MessageId, retry.HeaderLastError, got)
				}
			}
		})
	}
}

// TestTTLTiersDirect runs the retry table on the TTL backend with the direct
// hand-off, whose wait queues dead-letter straight into the work queue.
func TestTTLTiersDirect(t *testing.T) {
	t.Parallel()
	start(t, "ttl-tiers/direct", tiny).check(t, retrying)
}

// clocked is a downstream that fails every attempt and notes when each
// began, and the waits the strategy scheduled, by message id.
type clocked struct {
	mu        sync.Mutex
	at        map[string][]time.Time
	scheduled map[string][]time.Duration
}

func (c *clocked) Handle(_ context.Context, m *retry.Message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at[m.ID] = append(c.at[m.ID], time.Now())
	return errors.New("503 on purpose")
}

func (c *clocked) observe(e strategy.Event) {
	if e.Outcome != retry.Retrying {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.scheduled[e.ID] = append(c.scheduled[e.ID], e.Delay)
}

// TestDelayLevelsKeepEachDelay runs binary delay levels against the
// broker: with jitter, every retry gets a delay of its own, and each message
// waits at least that delay, to the millisecond. How much longer (the hops)
// is logged, never held to a bound: make test shares the cores with every
// other package's tests (make test-timing measures it, one package at a
// time).
func TestDelayLevelsKeepEachDelay(t *testing.T) {
	// Delays with many bits set: 37ms is 100101 in binary, three levels.
	policy := retry.Policy{Delays: []time.Duration{37 * time.Millisecond, 150 * time.Millisecond, 300 * time.Millisecond}, Jitter: 0.5}
	for _, name := range []string{"delay-levels", "delay-levels/direct"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := &clocked{at: map[string][]time.Time{}, scheduled: map[string][]time.Duration{}}
			st := startWith(t, name, policy, c, c.observe)
			ids := []string{"a", "b", "c"}
			for _, id := range ids {
				st.publish(t, id, nil)
			}
			parked := map[string]amqp.Delivery{}
			retrytest.Eventually(t, 15*time.Second, func() bool {
				for id, d := range take(t, st.conn, st.s.Layout().DeadQueue) {
					parked[id] = d
				}
				return len(parked) == len(ids)
			}, "%s: not every message was parked", name)

			c.mu.Lock()
			defer c.mu.Unlock()
			distinct := map[time.Duration]bool{}
			for _, id := range ids {
				at, sched := c.at[id], c.scheduled[id]
				if len(at) != 4 || len(sched) != 3 {
					t.Fatalf("%s: %d attempts and %d scheduled waits, want 4 and 3", id, len(at), len(sched))
				}
				for i, want := range sched {
					base := policy.Delay(i + 1)
					if want < base/2 || want > base*3/2 {
						t.Errorf("%s retry %d: scheduled %s, outside %s ± 50%%", id, i+1, want, base)
					}
					distinct[want] = true
					gap := at[i+1].Sub(at[i])
					// The levels wait whole milliseconds: the scheduled delay
					// truncated.
					if floor := want.Truncate(time.Millisecond); gap < floor {
						t.Errorf("%s retry %d: waited %s, scheduled %s (want at least %s)", id, i+1, gap, want, floor)
					}
					t.Logf("%s retry %d: scheduled %s, measured %s", id, i+1, want.Round(time.Microsecond), gap.Round(time.Microsecond))
				}
				if got := parked[id].Headers[retry.HeaderDeadReason]; got != retry.ReasonMaxRetries {
					t.Errorf("parked %s: %s %v", id, retry.HeaderDeadReason, got)
				}
			}
			// Nine jittered delays drawn from a continuous spread: equal
			// ones would mean the jitter was not applied.
			if len(distinct) < 8 {
				t.Errorf("%d distinct delays of 9: jitter not applied", len(distinct))
			}
		})
	}
}

// TestNativeDelayedRetry runs the retry table on RabbitMQ 4.3's delayed
// retry; older brokers skip it (see the next test).
func TestNativeDelayedRetry(t *testing.T) {
	t.Parallel()
	parked := start(t, "native-delayed-retry", tiny).check(t, retrying)
	for _, d := range parked {
		if got := d.Headers[retry.HeaderDeadReason]; got != retry.ReasonMaxRetries {
			t.Errorf("parked %s: %s %v, want %s", d.MessageId, retry.HeaderDeadReason, got, retry.ReasonMaxRetries)
		}
	}
}

// TestNativeDelayedRetryIsNotRunnableBefore43 checks, on a broker older
// than 4.3, that the strategy names the version its connection reports and
// declares nothing.
func TestNativeDelayedRetryIsNotRunnableBefore43(t *testing.T) {
	t.Parallel()
	conn := retrytest.Conn(t)
	version, _ := conn.Properties["version"].(string)
	if strategy.NativeSupport(version) == nil {
		t.Skipf("RabbitMQ %s runs native-delayed-retry: TestNativeDelayedRetry covers it", version)
	}
	prefix := retrytest.Prefix(t)
	s, err := strategy.New("native-delayed-retry", strategy.Options{Prefix: prefix, Policy: tiny})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Declare(context.Background(), conn)
	t.Cleanup(func() { _ = s.Delete(conn) })
	want := "not runnable on RabbitMQ " + version + ": needs 4.3 with quorum queues"
	if !errors.Is(err, strategy.ErrUnsupported) || err.Error() != want {
		t.Fatalf("Declare = %v, want %q", err, want)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if _, err := ch.QueueDeclarePassive(s.Layout().WorkQueue, true, false, false, false, nil); err == nil {
		t.Errorf("%s exists: the refusal came after declaring", s.Layout().WorkQueue)
	}
}
