//go:build integration

package strategy_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
	"github.com/relay-demo/relay/retry/strategy"
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
// A broker that cannot run the strategy skips the test with the reason.
func start(t *testing.T, name string, policy retry.Policy) *started {
	t.Helper()
	prefix := retrytest.Prefix(t)
	s, err := strategy.New(name, strategy.Options{Prefix: prefix, URL: retrytest.URL(t), Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	conn := retrytest.Conn(t)
	if err := s.Declare(context.Background(), conn); err != nil {
		if errors.Is(err, strategy.ErrUnsupported) {
			t.Skipf("%s cannot run on this broker: %v", name, err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Delete(conn); err != nil {
			t.Errorf("delete %s: %v", name, err)
		}
	})
	down := &downstream{fail: map[string]int{}, attempts: map[string]int{}, delivered: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, conn, down, nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run %s: %v", name, err)
		}
	})
	return &started{prefix: prefix, s: s, conn: conn, down: down}
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
