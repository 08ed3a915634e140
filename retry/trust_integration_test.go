//go:build integration

package retry_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// victim declares a queue that belongs to "another application" on the
// same broker, and deletes it when the test ends.
func victim(t *testing.T, conn *amqp.Connection) string {
	t.Helper()
	name := retrytest.Prefix(t) + "victim"
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := retry.Dial(retrytest.URL(t), "relay test cleanup")
		if err != nil {
			return
		}
		defer c.Close()
		if ch, err := c.Channel(); err == nil {
			_, _ = ch.QueueDelete(name, false, false, false)
			ch.Close()
		}
	})
	return name
}

// put publishes a message straight into a queue through the default
// exchange, as a hostile or careless client could, and waits for the
// confirm.
func put(t *testing.T, conn *amqp.Connection, exchange, key, id string, headers amqp.Table) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	dc, err := ch.PublishWithDeferredConfirm(exchange, key, true, false, amqp.Publishing{
		MessageId: id, DeliveryMode: amqp.Persistent, ContentType: "application/json", Body: []byte(`{"v":1}`), Headers: headers})
	if err != nil {
		t.Fatal(err)
	}
	if !dc.Wait() {
		t.Fatal("publish nacked")
	}
}

// TestForgedSourcesAreParkedOnce: whatever queue a message in error-queue
// or requeue-queue names, the stages send it only to a work queue of the
// topology; anything else is parked once as unknown-source, with the claim
// kept, and nothing reaches the named queue.
func TestForgedSourcesAreParkedOnce(t *testing.T) {
	conn, topo := pipeline(t, retry.Topology{Backend: retry.TTL, Policy: retry.Policy{Delays: []time.Duration{ms(50), ms(50)}}})
	target := victim(t, conn)
	internal := map[string]string{
		"a victim":          target,
		"requeue-queue":     topo.Name(retry.RequeueQueue),
		"a wait queue":      topo.WaitQueue(ms(50)),
		"error-queue":       topo.Name(retry.ErrorQueue),
		"dead-letter-queue": topo.Name(retry.DeadQueue),
		"unprefixed work":   "email-queue",
	}
	type tc struct {
		name, stage string
		headers     amqp.Table
		wantClaim   string
	}
	var cases []tc
	for what, q := range internal {
		cases = append(cases,
			tc{"error-queue names " + what, retry.ErrorQueue, amqp.Table{retry.HeaderOriginalQueue: q}, retry.HeaderOriginalQueue + ": " + q},
			tc{"requeue-queue names " + what, retry.RequeueQueue, amqp.Table{retry.HeaderOriginalQueue: q, retry.HeaderRetryCount: int32(1)}, retry.HeaderOriginalQueue + ": " + q})
	}
	cases = append(cases,
		tc{"forged x-death naming a victim", retry.ErrorQueue, amqp.Table{"x-death": []any{amqp.Table{"queue": target, "reason": "rejected", "count": int64(1)}},
			retry.HeaderOriginalQueue: topo.WorkRoutes()[0].Queue}, "x-death: " + target},
		tc{"error-queue names nothing", retry.ErrorQueue, nil, ""},
		tc{"requeue-queue names nothing", retry.RequeueQueue, nil, ""},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := strings.ReplaceAll(c.name, " ", "-")
			put(t, conn, "", topo.Name(c.stage), id, c.headers)
			d := parked(t, conn, topo, 5*time.Second)
			if d.MessageId != id {
				t.Fatalf("parked %q, want %q", d.MessageId, id)
			}
			if got := d.Headers[retry.HeaderDeadReason]; got != retry.ReasonNoSource {
				t.Errorf("reason = %v, want %s", got, retry.ReasonNoSource)
			}
			if got := d.Headers[retry.HeaderDeadSource]; got != topo.Name(c.stage) {
				t.Errorf("source = %v, want the stage that caught it, %s", got, topo.Name(c.stage))
			}
			if got, _ := d.Headers[retry.HeaderClaimedSource].(string); got != c.wantClaim {
				t.Errorf("%s = %q, want %q", retry.HeaderClaimedSource, got, c.wantClaim)
			}
			if e, _ := d.Headers[retry.HeaderLastError].(string); e == "" {
				t.Error("parked without a last error")
			}
		})
	}
	if n := depth(t, conn, target); n != 0 {
		t.Errorf("the victim queue holds %d messages", n)
	}
	for _, q := range []string{topo.Name(retry.ErrorQueue), topo.Name(retry.RequeueQueue), topo.WaitQueue(ms(50)), topo.Name(retry.DeadQueue)} {
		if n := depth(t, conn, q); n != 0 {
			t.Errorf("%s holds %d messages: something looped", q, n)
		}
	}
}

// TestProducerCannotSetItsCount: relay headers on a message published to
// the ingress exchange were not written by relay: the consumer ignores
// them, so the message gets its full schedule and goes nowhere else.
func TestProducerCannotSetItsCount(t *testing.T) {
	conn, topo := pipeline(t, retry.Topology{Backend: retry.TTL, Policy: retry.Policy{Delays: []time.Duration{ms(50), ms(50)}}})
	target := victim(t, conn)
	var seen attempts
	consume(t, conn, topo, func(ctx context.Context, m *retry.Message) error {
		if n := seen.add(m); m.Attempt != n {
			t.Errorf("delivery %d has Attempt %d", n, m.Attempt)
		}
		return errors.New("452 mailbox full")
	})
	publish(t, conn, topo, "email", "forged-count", amqp.Table{retry.HeaderRetryCount: int32(2), retry.HeaderOriginalQueue: target,
		retry.HeaderNotBefore: time.Now().Add(time.Hour).UnixMilli()})
	d := parked(t, conn, topo, 5*time.Second)
	assertParked(t, d, "forged-count", topo.WorkRoutes()[0].Queue, retry.ReasonMaxRetries, 2)
	if got := seen.count(); got != 3 {
		t.Errorf("%d attempts, want 3: the forged count was trusted", got)
	}
	if got := d.Headers[retry.HeaderLastError]; got != "452 mailbox full" {
		t.Errorf("%s = %v, want the worker's error", retry.HeaderLastError, got)
	}
	if n := depth(t, conn, target); n != 0 {
		t.Errorf("the victim queue holds %d messages", n)
	}
}

// TestWaitsAreBounded: a not-before far ahead (a forged one, or a
// downstream's hint beyond the TTL steps) makes the requeue stage wait
// again at most MaxWaits times.
func TestWaitsAreBounded(t *testing.T) {
	conn, topo := pipeline(t, retry.Topology{Backend: retry.TTL, Policy: retry.Policy{Delays: []time.Duration{ms(50)}, MaxRetries: 2}})
	var seen attempts
	consume(t, conn, topo, func(ctx context.Context, m *retry.Message) error {
		seen.add(m)
		return nil
	})
	put(t, conn, "", topo.Name(retry.RequeueQueue), "far-future", amqp.Table{retry.HeaderOriginalQueue: topo.WorkRoutes()[0].Queue,
		retry.HeaderNotBefore: time.Now().Add(23 * time.Hour).UnixMilli()})
	start := time.Now()
	retrytest.Eventually(t, 15*time.Second, func() bool { return seen.count() == 1 }, "never came back to its queue")
	if took, most := time.Since(start), time.Duration(retry.MaxWaits+1)*ms(50); took < most/2 {
		t.Errorf("back after %s: the waits were not served (at most %s)", took, most)
	}
	seen.mu.Lock()
	m := seen.list[0]
	seen.mu.Unlock()
	for _, h := range []string{retry.HeaderNotBefore, retry.HeaderWaits} {
		if _, ok := m.Headers[h]; ok {
			t.Errorf("%s leaked to the work queue", h)
		}
	}
}

// TestStagesDeclareTheirOwnSchedule: stages whose schedule has a step the
// declared topology lacks declare its wait queue themselves, and declare a
// wait queue deleted under them again, instead of looping on unroutable
// publishes.
func TestStagesDeclareTheirOwnSchedule(t *testing.T) {
	conn := retrytest.Conn(t)
	declared := retrytest.Declare(t, conn, retry.Topology{Backend: retry.TTL, Policy: retry.Policy{Delays: []time.Duration{ms(500)}}})
	topo := declared
	topo.Policy = retry.Policy{Delays: []time.Duration{ms(120)}}
	t.Cleanup(func() {
		c, err := retry.Dial(retrytest.URL(t), "relay test cleanup")
		if err == nil {
			_ = topo.Delete(c)
			c.Close()
		}
	})
	runStages(t, conn, topo)
	arrivals := nackAll(t, conn, topo.WorkRoutes()[0].Queue)
	publish(t, conn, topo, "email", "own-schedule", nil)
	assertSchedule(t, arrivals, []time.Duration{ms(120)})
	parked(t, conn, topo, 5*time.Second)

	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDelete(topo.WaitQueue(ms(120)), false, false, false); err != nil {
		t.Fatal(err)
	}
	ch.Close()
	publish(t, conn, topo, "email", "wait-queue-deleted", nil)
	assertSchedule(t, arrivals, []time.Duration{ms(120)})
	if d := parked(t, conn, topo, 5*time.Second); d.Headers[retry.HeaderDeadReason] != retry.ReasonMaxRetries {
		t.Errorf("parked as %v, want %s", d.Headers[retry.HeaderDeadReason], retry.ReasonMaxRetries)
	}
}

// TestOversizedHeadIsMovedAside: a message whose headers exceed the
// frame_max, put into error-queue over the management API, closes the
// stages' connection once; the quarantine parks it and the next message
// flows within seconds.
func TestOversizedHeadIsMovedAside(t *testing.T) {
	m := retrytest.Management(t)
	conn := retrytest.Conn(t)
	topo := retrytest.Declare(t, conn, retry.Topology{Backend: retry.TTL, Policy: retry.Policy{Delays: []time.Duration{ms(50)}}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	st := &retry.Stages{Topology: topo, Options: retry.Options{Management: m}}
	go func() {
		done <- retry.Supervise(ctx, retrytest.URL(t), "relay test stages", discard(), st.Run)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("stages: %v", err)
		}
	})
	work := topo.WorkRoutes()[0].Queue
	arrivals := nackAll(t, conn, work)
	retrytest.PublishHTTP(t, m, topo.Name(retry.ErrorQueue), "oversized", map[string]any{
		retry.HeaderOriginalQueue: work, "x-padding": strings.Repeat("p", 2*conn.Config.FrameSize)}, `{"v":1}`)
	start := time.Now()
	publish(t, conn, topo, "email", "healthy", nil)
	d := parked(t, conn, topo, 15*time.Second)
	assertParked(t, d, "oversized", work, retry.ReasonTooLarge, 0)
	if _, ok := d.Headers["x-padding"]; ok {
		t.Error("the oversized header was kept")
	}
	if e, _ := d.Headers[retry.HeaderLastError].(string); !strings.Contains(e, "frame") {
		t.Errorf("%s = %q, want it to explain the frame", retry.HeaderLastError, e)
	}
	// The healthy message fails, goes through both stages and is back.
	var got int
	for got < 2 {
		select {
		case <-arrivals:
			got++
		case <-time.After(15 * time.Second):
			t.Fatalf("the healthy message made %d of 2 attempts: the stage is stalled", got)
		}
	}
	t.Logf("the healthy message was retried %s after it was published", time.Since(start).Round(time.Millisecond))
	if n := depth(t, conn, topo.Name(retry.ErrorQueue)); n != 0 {
		t.Errorf("error-queue holds %d", n)
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
