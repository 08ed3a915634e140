//go:build integration

package retry_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// The conformance suite: the same promises, asserted on every delay
// backend, with every queue type and hand-off the backend allows, on the
// broker at hand, the way one Pub/Sub suite runs against every
// implementation. A cell is one backend × queue type × hand-off. The
// promises a backend makes are its Features; each is asserted here:
//
//   - schedule: a message that fails three times comes back after each
//     delay of the policy, never early and late by at most the backend's
//     Tolerance, its retry count rising by one each time (what a handler
//     rotates providers on), and is delivered on the fourth attempt;
//   - park: one that always fails is parked after the last retry with the
//     reason, its last error, its count and the time it first failed;
//   - permanent: one whose handler says no retry can help is parked at
//     once;
//   - deferral: one deferred twice (a Retry-After, then a rate-limit slot
//     at an odd time that no step of the schedule matches) comes back
//     exactly when asked each time, without spending a retry;
//   - scheduled: a first delivery published to wait comes after its delay
//     exactly (Features.FirstDelivery);
//   - cancelled: a copy cancelled while it waits (a scheduled send, and a
//     retry) comes back when due, is never attempted again and is neither
//     retried nor parked: the handler learns of the cancellation as
//     relay's worker does, when the copy comes back;
//   - too large: a message whose headers leave no room for relay's in a
//     frame is moved aside (parked as headers-too-large, its large
//     headers dropped) without an attempt, and the queue goes on;
//   - aside: messages whose headers exceed the frame itself, put in the
//     work queue over the management API (no AMQP client can publish
//     them), close the connection each is delivered to; each is moved
//     aside over the management API and parked, and a message behind them
//     is still delivered (runAside);
//   - types: a message follows its type's delays and retry count, and
//     one past its type's expiry, or whose next retry would come back
//     past it, is parked as expired (Features.Types; a backend without
//     it refuses per-type schedules: runTypes);
//   - nothing is lost and nothing is handled twice.
//
// The count across a broker restart is the same promise on a broker that
// stops: lab/faults runs it on these cells (TestCountAcrossRestart).
//
// Which cells run depends on the broker: a backend runs where its
// versions and needs are met. RELAY_EXPECT_BACKENDS (a space- or
// comma-separated list, set by make test-compat for each node) names the
// backends that must run on this broker: one that cannot fails the test,
// so a node that came up as the wrong version, or without the plugin,
// never turns its cells into quiet skips.
func TestConformance(t *testing.T) {
	url := retrytest.URL(t)
	for _, c := range retrytest.Cells(t, url) {
		t.Run(c.Name(), func(t *testing.T) {
			t.Parallel()
			t.Run("promises", func(t *testing.T) {
				t.Parallel()
				runCell(t, url, c.Topology(), c.Features)
			})
			t.Run("aside", func(t *testing.T) {
				t.Parallel()
				runAside(t, url, c.Topology())
			})
			t.Run("types", func(t *testing.T) {
				t.Parallel()
				runTypes(t, url, c.Topology(), c.Features)
			})
		})
	}
}

// call is one handler call: when it began, when it returned, and what the
// message said of itself.
type call struct {
	attempt, retries int
	start, end       time.Time
	// asked is the wait the handler asked for, if it deferred.
	asked time.Duration
}

// The suite's schedule: linear, so the native backend can follow it, and
// none of its steps matches a deferral below.
var conformanceDelays = []time.Duration{300 * time.Millisecond, 600 * time.Millisecond, 900 * time.Millisecond}

const (
	retryAfter = 700 * time.Millisecond
	slotIn     = 1234 * time.Millisecond
	scheduleIn = 1300 * time.Millisecond
)

func runCell(t *testing.T, url string, topo retry.Topology, f retry.Features) {
	topo.Prefix = retrytest.Prefix(t)
	topo.Routes = []retry.Route{{Queue: "work", Key: "work"}}
	topo.Policy = retry.Policy{Delays: conformanceDelays}
	topo.CopyHeader = "x-copy"
	if err := topo.Validate(); err != nil {
		t.Fatalf("a cell the backend declares it supports is refused: %v", err)
	}

	var mu sync.Mutex
	calls := map[string][]call{}
	// cancelled is what a client took back, as relay's history store
	// keeps it; outcomes is the pipeline's last word on each message.
	cancelled := map[string]bool{}
	outcomes := map[string][]retry.Outcome{}
	// deferred is, for each retry scheduled, whether the pipeline said it
	// was a deferral, by message and attempt.
	deferred := map[string]map[int]bool{}
	observe := func(e retry.Event) {
		mu.Lock()
		defer mu.Unlock()
		if e.Outcome.Terminal() {
			outcomes[e.MessageID] = append(outcomes[e.MessageID], e.Outcome)
		}
		if e.Outcome == retry.Retrying {
			if deferred[e.MessageID] == nil {
				deferred[e.MessageID] = map[int]bool{}
			}
			deferred[e.MessageID][e.Attempt] = e.Deferred
		}
	}
	p := retry.New(retry.Config{Topology: topo, Options: retry.Options{Concurrency: 8, Observe: observe}})
	p.Handle("work", "work", retry.HandlerFunc(func(ctx context.Context, m *retry.Message) error {
		c := call{attempt: m.Attempt, retries: m.Retries, start: time.Now()}
		mu.Lock()
		stop := cancelled[m.ID]
		mu.Unlock()
		var err error
		switch kind, _, _ := strings.Cut(m.ID, "."); {
		case stop:
			// What relay's worker does for a copy taken back.
			err = retry.Cancel(errors.New("cancelled by the client"))
		case kind == "retrying":
			err = fmt.Errorf("attempt %d of %s failed", m.Attempt, m.ID)
		case kind == "schedule" || kind == "scheduled":
			if m.Attempt <= len(conformanceDelays) && kind == "schedule" {
				err = fmt.Errorf("attempt %d of %s failed", m.Attempt, m.ID)
			}
		case kind == "park" || kind == "big":
			err = fmt.Errorf("downstream refused %s, attempt %d", m.ID, m.Attempt)
		case kind == "permanent":
			err = retry.Permanent(fmt.Errorf("%s can never be delivered", m.ID))
		case kind == "mixed":
			switch m.Attempt {
			case 1, 3:
				err = fmt.Errorf("attempt %d of %s failed", m.Attempt, m.ID)
			case 2:
				c.asked = retryAfter
				err = retry.After(errors.New("429: retry after 700ms"), c.asked)
			}
		case kind == "deferral":
			switch m.Attempt {
			case 1:
				c.asked = retryAfter
				err = retry.After(errors.New("429: retry after 700ms"), c.asked)
			case 2:
				// A rate limit's slot, due at an odd moment: the copy
				// must come back for it, not after it.
				c.asked = slotIn
				err = retry.After(errors.New("over the rate limit: slot in 1234ms"), c.asked)
			}
		}
		c.end = time.Now()
		mu.Lock()
		calls[m.ID] = append(calls[m.ID], c)
		mu.Unlock()
		return err
	}))
	p.ServeStages()
	conn, pub := serveCell(t, p, topo, url)
	work := topo.WorkRoutes()[0].Queue
	bg := context.Background()
	msg := func(id string) amqp.Publishing {
		return amqp.Publishing{MessageId: id, DeliveryMode: amqp.Persistent, Timestamp: time.Now(), Body: []byte(id),
			Headers: amqp.Table{"x-copy": "copy-of-" + id}}
	}
	// big.1's headers fit in a frame, with less room than relay needs
	// for its own and the broker's x-death.
	big := msg("big.1")
	big.Headers["x-padding"] = strings.Repeat("p", conn.Config.FrameSize-2048)
	for _, m := range []amqp.Publishing{msg("schedule.1"), msg("park.1"), msg("permanent.1"), msg("deferral.1"), msg("mixed.1"), msg("retrying.1"), big} {
		if err := pub.Publish(bg, topo.Ingress(), "work", m); err != nil {
			t.Fatalf("publish %s: %v", m.MessageId, err)
		}
	}
	var scheduledAt time.Time
	if f.FirstDelivery {
		d, err := topo.Delay(work, scheduleIn)
		if err != nil {
			t.Fatalf("the backend declares it delays a first delivery: %v", err)
		}
		scheduledAt = time.Now()
		for _, id := range []string{"scheduled.1", "scheduled.2"} {
			if err := pub.PublishDelayed(bg, d, msg(id)); err != nil {
				t.Fatalf("publish %s: %v", id, err)
			}
		}
		// Taken back while it waits.
		mu.Lock()
		cancelled["scheduled.2"] = true
		mu.Unlock()
	}
	// retrying.1 is taken back once its first attempt failed, while it
	// waits for its retry.
	retrytest.Eventually(t, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		if len(calls["retrying.1"]) > 0 {
			cancelled["retrying.1"] = true
			return true
		}
		return false
	}, "retrying.1 was never attempted")

	parked := map[string]amqp.Delivery{}
	want := map[string]int{"schedule.1": len(conformanceDelays) + 1, "park.1": len(conformanceDelays) + 1, "permanent.1": 1, "deferral.1": 3, "mixed.1": 4,
		"retrying.1": 2, "big.1": 0}
	if f.FirstDelivery {
		want["scheduled.1"], want["scheduled.2"] = 1, 1
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	retrytest.Eventually(t, 60*time.Second, func() bool {
		retrytest.TakeParked(ch, topo, parked)
		mu.Lock()
		defer mu.Unlock()
		for id, n := range want {
			if len(calls[id]) < n {
				return false
			}
		}
		// A consumer that waits a retry itself tells of it once the
		// broker has it back: the attempt after may come first.
		if len(deferred["deferral.1"]) < 2 || len(deferred["mixed.1"]) < 3 || len(deferred["schedule.1"]) < len(conformanceDelays) {
			return false
		}
		return len(parked) >= 3 && len(outcomes["retrying.1"]) > 0 && (!f.FirstDelivery || len(outcomes["scheduled.2"]) > 0)
	}, "not every message was handled or parked as it should be")
	mu.Lock()
	got := make(map[string][]call, len(calls))
	for id, cs := range calls {
		got[id] = slices.Clone(cs)
	}
	// The pipeline names each wait for what it is: a deferral when the
	// handler asked for it within the budget, a retry otherwise.
	for id, want := range map[string]map[int]bool{
		"deferral.1": {1: true, 2: true},
		"mixed.1":    {1: false, 2: true, 3: false},
		"schedule.1": {1: false, 2: false, 3: false},
	} {
		if diff := cmp.Diff(want, deferred[id]); diff != "" {
			t.Errorf("%s: the Deferred of its Retrying events by attempt (-want +got):\n%s", id, diff)
		}
	}
	ends := make(map[string][]retry.Outcome, len(outcomes))
	for id, o := range outcomes {
		ends[id] = slices.Clone(o)
	}
	mu.Unlock()

	tol := f.Tolerance
	// onTime checks a wait: never early, late by at most the tolerance.
	onTime := func(what string, from, to time.Time, wait time.Duration) {
		t.Helper()
		took := to.Sub(from)
		switch {
		case took < wait:
			t.Errorf("%s: came back after %s, %s early (waited for %s)", what, took.Round(time.Millisecond), (wait - took).Round(time.Millisecond), wait)
		case took > wait+tol:
			t.Errorf("%s: came back after %s, %s late (waited for %s, tolerance %s)", what, took.Round(time.Millisecond), (took - wait).Round(time.Millisecond), wait, tol)
		default:
			t.Logf("%s: waited %s for %s", what, took.Round(time.Millisecond), wait)
		}
	}

	// Nothing handled more often than the scenario asks.
	for id, n := range want {
		if len(got[id]) != n {
			t.Errorf("%s handled %d times, want %d", id, len(got[id]), n)
		}
	}

	// schedule: each delay of the policy, never early; the count rises
	// by one a retry.
	s := got["schedule.1"]
	for i, c := range s {
		if c.attempt != i+1 || c.retries != i {
			t.Errorf("schedule.1 call %d: attempt %d, retries %d; want %d, %d", i+1, c.attempt, c.retries, i+1, i)
		}
		if i > 0 {
			onTime(fmt.Sprintf("schedule.1 retry %d", i), s[i-1].end, c.start, conformanceDelays[i-1])
		}
	}

	// park: after the last retry, with the reason, the last error, the
	// count and when it first failed.
	pk := got["park.1"]
	if d, ok := parked["park.1"]; !ok {
		t.Errorf("park.1 was not parked")
	} else if len(pk) > 0 {
		checkParked(t, d, retry.ReasonMaxRetries, len(conformanceDelays), fmt.Sprintf("downstream refused park.1, attempt %d", len(pk)), work)
		first, err := time.Parse(time.RFC3339Nano, fmt.Sprint(d.Headers[retry.HeaderFirstFailedAt]))
		parkedAt, perr := time.Parse(time.RFC3339Nano, fmt.Sprint(d.Headers[retry.HeaderParkedAt]))
		switch {
		case err != nil || perr != nil:
			t.Errorf("park.1: %s %v, %s %v: want two times", retry.HeaderFirstFailedAt, d.Headers[retry.HeaderFirstFailedAt], retry.HeaderParkedAt, d.Headers[retry.HeaderParkedAt])
		case first.Before(pk[0].start.Add(-10*time.Millisecond)) || first.After(pk[0].end.Add(tol)):
			t.Errorf("park.1 first failed at %s by its headers; its first attempt ended at %s", first.Format(time.StampMilli), pk[0].end.Format(time.StampMilli))
		case !first.Before(parkedAt):
			t.Errorf("park.1 first failed at %s, parked at %s: the first failure must be kept", first.Format(time.StampMilli), parkedAt.Format(time.StampMilli))
		}
	}

	// permanent: at once.
	if d, ok := parked["permanent.1"]; !ok {
		t.Errorf("permanent.1 was not parked")
	} else {
		checkParked(t, d, retry.ReasonPermanent, 0, "permanent.1 can never be delivered", work)
	}

	// deferral: exactly when asked, twice, without spending a retry.
	df := got["deferral.1"]
	for i, c := range df {
		if c.retries != 0 || c.attempt != i+1 {
			t.Errorf("deferral.1 call %d: attempt %d, retries %d; want %d, 0: a deferral spends no retry", i+1, c.attempt, c.retries, i+1)
		}
		if i > 0 {
			onTime(fmt.Sprintf("deferral.1 wait %d", i), df[i-1].end, c.start, df[i-1].asked)
		}
	}

	// mixed: a failure, a deferral, a failure: retries 0, 1, 1, 2, and
	// each wait as the policy or the downstream said.
	mx := got["mixed.1"]
	mixedWaits := []time.Duration{conformanceDelays[0], retryAfter, conformanceDelays[1]}
	for i, c := range mx {
		if want := []int{0, 1, 1, 2}[i]; c.attempt != i+1 || c.retries != want {
			t.Errorf("mixed.1 call %d: attempt %d, retries %d; want %d, %d", i+1, c.attempt, c.retries, i+1, want)
		}
		if i > 0 {
			onTime(fmt.Sprintf("mixed.1 wait %d", i), mx[i-1].end, c.start, mixedWaits[i-1])
		}
	}

	// scheduled: a first delivery, after its delay.
	if sc := got["scheduled.1"]; f.FirstDelivery && len(sc) == 1 {
		onTime("scheduled.1", scheduledAt, sc[0].start, scheduleIn)
	}

	// cancelled: back when due, then acked unsent, never again.
	if f.FirstDelivery {
		if sc := got["scheduled.2"]; len(sc) == 1 {
			onTime("scheduled.2 (cancelled)", scheduledAt, sc[0].start, scheduleIn)
		}
	}
	if r := got["retrying.1"]; len(r) == 2 {
		onTime("retrying.1 (cancelled in its wait)", r[0].end, r[1].start, conformanceDelays[0])
	}
	for _, id := range []string{"retrying.1", "scheduled.2"} {
		if id == "scheduled.2" && !f.FirstDelivery {
			continue
		}
		if o := ends[id]; !slices.Equal(o, []retry.Outcome{retry.Cancelled}) {
			t.Errorf("%s, cancelled while it waited, ended %v; want once %s", id, o, retry.Cancelled)
		}
	}

	// too large: moved aside unattempted, its large header dropped.
	if d, ok := parked["big.1"]; !ok {
		t.Errorf("big.1, whose headers leave relay no room, was not parked")
	} else {
		if d.Headers[retry.HeaderDeadReason] != retry.ReasonTooLarge {
			t.Errorf("big.1 parked as %v, want %s", d.Headers[retry.HeaderDeadReason], retry.ReasonTooLarge)
		}
		if _, kept := d.Headers["x-padding"]; kept {
			t.Error("big.1 was parked with its oversized header")
		}
		if d.Headers[retry.HeaderDeadSource] != work || string(d.Body) != "big.1" {
			t.Errorf("big.1 parked from %v with body %q", d.Headers[retry.HeaderDeadSource], d.Body)
		}
	}

	for id := range parked {
		if id != "park.1" && id != "permanent.1" && id != "big.1" {
			t.Errorf("%s was parked: %v", id, parked[id].Headers[retry.HeaderDeadReason])
		}
	}
}

// checkParked checks a parked message's headers: the reason, the count,
// the last error (the handler's own text) and where it came from.
func checkParked(t *testing.T, d amqp.Delivery, reason string, retries int, lastErr, work string) {
	t.Helper()
	h := d.Headers
	if h[retry.HeaderDeadReason] != reason {
		t.Errorf("%s parked as %v, want %s", d.MessageId, h[retry.HeaderDeadReason], reason)
	}
	if n := retry.RetryCount(h); n != retries {
		t.Errorf("%s parked with %s %d, want %d", d.MessageId, retry.HeaderRetryCount, n, retries)
	}
	if e := fmt.Sprint(h[retry.HeaderLastError]); e != lastErr {
		t.Errorf("%s parked with last error %q, want the last attempt's, %q", d.MessageId, e, lastErr)
	}
	if h[retry.HeaderDeadSource] != work {
		t.Errorf("%s parked from %v, want %s", d.MessageId, h[retry.HeaderDeadSource], work)
	}
	if h["x-copy"] != "copy-of-"+d.MessageId {
		t.Errorf("%s parked without its copy header: %v", d.MessageId, h["x-copy"])
	}
	if string(d.Body) != d.MessageId {
		t.Errorf("%s parked with body %q", d.MessageId, d.Body)
	}
}

// runAside puts two messages whose headers exceed the AMQP frame into the
// cell's work queue over the management API, then a normal one behind
// them: both must be parked as headers-too-large, and the normal one
// delivered, whatever the queue type, hand-off and backend.
func runAside(t *testing.T, url string, topo retry.Topology) {
	mgmt := retrytest.Management(t)
	conn := retrytest.Conn(t)
	topo.Routes = []retry.Route{{Queue: "work", Key: "work"}}
	topo.Policy = retry.Policy{Delays: conformanceDelays}
	// Declared first, so the oversized messages wait in the work queue
	// before the consumer starts.
	topo = retrytest.Declare(t, conn, topo)
	work := topo.WorkRoutes()[0].Queue
	var mu sync.Mutex
	handled := map[string]int{}
	p := retry.New(retry.Config{Topology: topo, Options: retry.Options{Concurrency: 4, Management: mgmt}})
	p.Handle("work", "work", retry.HandlerFunc(func(ctx context.Context, m *retry.Message) error {
		mu.Lock()
		handled[m.ID]++
		mu.Unlock()
		return nil
	}))
	p.ServeStages()
	ids := []string{"huge.1", "huge.2"}
	for _, id := range ids {
		retrytest.PublishHTTP(t, mgmt, work, id, map[string]any{"x-padding": strings.Repeat("p", 2*conn.Config.FrameSize)}, id)
	}
	retrytest.PublishHTTP(t, mgmt, work, "normal.1", map[string]any{}, "normal.1")

	runPipeline(t, p, url)

	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	parked := map[string]amqp.Delivery{}
	retrytest.Eventually(t, 60*time.Second, func() bool {
		retrytest.TakeParked(ch, topo, parked)
		mu.Lock()
		defer mu.Unlock()
		return len(parked) >= len(ids) && handled["normal.1"] > 0
	}, "the oversized messages were not moved aside, or the message behind them not delivered")
	for _, id := range ids {
		d, ok := parked[id]
		switch {
		case !ok:
			t.Errorf("%s was not parked", id)
		case d.Headers[retry.HeaderDeadReason] != retry.ReasonTooLarge:
			t.Errorf("%s parked as %v, want %s", id, d.Headers[retry.HeaderDeadReason], retry.ReasonTooLarge)
		case d.Headers["x-padding"] != nil:
			t.Errorf("%s parked with its oversized header", id)
		case string(d.Body) != id:
			t.Errorf("%s parked with body %q", id, d.Body)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for id, n := range handled {
		if id != "normal.1" || n != 1 {
			t.Errorf("%s handled %d times; only normal.1, once, should be", id, n)
		}
	}
}

// serveCell runs p, which serves topo's stages and its one work queue,
// until the test ends, then deletes topo; it returns once the work queue
// has a consumer, with a connection and a confirming publisher of the
// test's own.
func serveCell(t *testing.T, p *retry.Pipeline, topo retry.Topology, url string) (*amqp.Connection, *retry.Publisher) {
	t.Helper()
	// Cleanups run last registered first: this one once the pipeline
	// stopped.
	t.Cleanup(func() {
		if c, err := retry.Dial(url, "relay test cleanup"); err == nil {
			_ = topo.Delete(c)
			c.Close()
		}
	})
	runPipeline(t, p, url)
	conn := retrytest.Conn(t)
	work := topo.WorkRoutes()[0].Queue
	retrytest.Eventually(t, 30*time.Second, func() bool {
		ch, err := conn.Channel()
		if err != nil {
			return false
		}
		defer ch.Close()
		q, err := ch.QueueDeclarePassive(work, true, false, false, false, nil)
		return err == nil && q.Consumers > 0
	}, "the pipeline never consumed %s", work)
	pub, err := retry.NewPublisher(conn, 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	return conn, pub
}

// runPipeline runs p against the broker at url until the test ends, and
// then stops it.
func runPipeline(t *testing.T, p *retry.Pipeline, url string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, url) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the pipeline did not stop within 30 s")
		}
	})
}
