//go:build integration

package retry_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// pipeline declares a private topology and runs the stages until the test
// ends.
func pipeline(t *testing.T, topo retry.Topology) (*amqp.Connection, retry.Topology) {
	t.Helper()
	conn := retrytest.Conn(t)
	topo = retrytest.Declare(t, conn, topo)
	runStages(t, conn, topo)
	return conn, topo
}

func runStages(t *testing.T, conn *amqp.Connection, topo retry.Topology) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	st := &retry.Stages{Topology: topo}
	go func() { done <- st.Run(ctx, conn) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("stages: %v", err)
		}
	})
	// The stages declare their topology before they consume: wait until
	// both consume, so a test that changes the topology races nothing.
	retrytest.Eventually(t, 10*time.Second, func() bool {
		return consumers(t, conn, topo.Name(retry.ErrorQueue)) > 0 &&
			(!topo.HasRequeueStage() || consumers(t, conn, topo.Name(retry.RequeueQueue)) > 0)
	}, "the stages never started consuming")
}

// consumers returns the number of consumers of a queue.
func consumers(t *testing.T, conn *amqp.Connection, queue string) int {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q.Consumers
}

func publish(t *testing.T, conn *amqp.Connection, topo retry.Topology, key, id string, headers amqp.Table) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	dc, err := ch.PublishWithDeferredConfirm(topo.Ingress(), key, true, false, amqp.Publishing{
		MessageId: id, DeliveryMode: amqp.Persistent, ContentType: "application/json",
		Body: []byte(`{"v":1}`), Headers: headers,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !dc.Wait() {
		t.Fatal("publish nacked")
	}
}

// parked polls the dead-letter queue until a message arrives.
func parked(t *testing.T, conn *amqp.Connection, topo retry.Topology, timeout time.Duration) amqp.Delivery {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	var got amqp.Delivery
	retrytest.Eventually(t, timeout, func() bool {
		d, ok, err := ch.Get(topo.Name(retry.DeadQueue), false)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			got = d
			_ = d.Ack(false)
		}
		return ok
	}, "nothing parked in %s", topo.Name(retry.DeadQueue))
	return got
}

// depth returns the number of ready messages in a queue.
func depth(t *testing.T, conn *amqp.Connection, queue string) int {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q.Messages
}

// nackAll consumes queue, nacks every delivery without requeue, and
// reports the arrival times.
func nackAll(t *testing.T, conn *amqp.Connection, queue string) <-chan time.Time {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	ds, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	arrivals := make(chan time.Time, 100)
	go func() {
		for d := range ds {
			arrivals <- time.Now()
			_ = d.Nack(false, false)
		}
	}()
	return arrivals
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// TestScheduleThenPark is the pipeline's main promise: a message that keeps
// failing comes back after each scheduled delay, then is parked with its
// history.
func TestScheduleThenPark(t *testing.T) {
	for _, qt := range []retry.QueueType{retry.Classic, retry.Quorum} {
		t.Run(string(qt), func(t *testing.T) {
			schedule := []time.Duration{ms(200), ms(400), ms(800)}
			conn, topo := pipeline(t, retry.Topology{Backend: retry.TTL, QueueType: qt, Policy: retry.Policy{Delays: schedule}})
			emailQueue := topo.WorkRoutes()[0].Queue
			arrivals := nackAll(t, conn, emailQueue)
			publish(t, conn, topo, "email", "n-1", nil)

			assertSchedule(t, arrivals, schedule)
			d := parked(t, conn, topo, 5*time.Second)
			assertParked(t, d, "n-1", emailQueue, retry.ReasonMaxRetries, 3)
			select {
			case at := <-arrivals:
				t.Fatalf("a fifth delivery at %s after parking", at)
			default:
			}
		})
	}
}

func assertSchedule(t *testing.T, arrivals <-chan time.Time, schedule []time.Duration) {
	t.Helper()
	var times []time.Time
	for len(times) < len(schedule)+1 {
		select {
		case at := <-arrivals:
			times = append(times, at)
		case <-time.After(10 * time.Second):
			t.Fatalf("got %d deliveries, want %d", len(times), len(schedule)+1)
		}
	}
	for i, want := range schedule {
		gap := times[i+1].Sub(times[i])
		// Never early; late by the broker's TTL sweep and two hops, and by
		// whatever else make test runs on the same cores: logged, never
		// held to a bound.
		if gap < want-ms(10) {
			t.Errorf("gap before retry %d = %s, want at least %s", i+1, gap, want)
		}
		t.Logf("retry %d: scheduled %s, measured %s", i+1, want, gap.Round(time.Millisecond))
	}
}

func assertParked(t *testing.T, d amqp.Delivery, id, source, reason string, retries int) {
	t.Helper()
	if d.MessageId != id {
		t.Errorf("parked message-id = %q, want %q", d.MessageId, id)
	}
	if got := d.Headers[retry.HeaderDeadSource]; got != source {
		t.Errorf("%s = %v, want %q", retry.HeaderDeadSource, got, source)
	}
	if got := d.Headers[retry.HeaderDeadReason]; got != reason {
		t.Errorf("%s = %v, want %q", retry.HeaderDeadReason, got, reason)
	}
	if got := retry.RetryCount(d.Headers); got != retries {
		t.Errorf("%s = %d, want %d", retry.HeaderRetryCount, got, retries)
	}
	if _, ok := d.Headers["x-death"]; ok {
		t.Error("parked message still carries x-death")
	}
	for _, h := range []string{retry.HeaderParkedAt, retry.HeaderFirstFailedAt} {
		if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(d.Headers[h])); err != nil {
			t.Errorf("%s = %v: %v", h, d.Headers[h], err)
		}
	}
	if d.DeliveryMode != amqp.Persistent || string(d.Body) != `{"v":1}` || d.ContentType != "application/json" {
		t.Errorf("parked message lost its body or properties: mode %d body %q type %q", d.DeliveryMode, d.Body, d.ContentType)
	}
}

// consume runs a retry.Consumer with h on the email queue.
func consume(t *testing.T, conn *amqp.Connection, topo retry.Topology, h retry.HandlerFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	c := &retry.Consumer{Topology: topo, Queue: topo.WorkRoutes()[0].Queue, Handler: h}
	go func() { done <- c.Run(ctx, conn) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("consumer: %v", err)
		}
	})
}

type attempts struct {
	mu   sync.Mutex
	list []*retry.Message
	at   []time.Time
}

func (a *attempts) add(m *retry.Message) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.list = append(a.list, m)
	a.at = append(a.at, time.Now())
	return len(a.list)
}

func (a *attempts) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.list)
}

func TestConsumerOutcomes(t *testing.T) {
	tests := []struct {
		name         string
		fail         func(n int) error // the error for delivery n (from 1)
		wantAttempts int
		wantParked   string // reason, or "" when delivered
	}{
		{"success first time", func(int) error { return nil }, 1, ""},
		{"transient twice then success", func(n int) error {
			if n < 3 {
				return errors.New("smtp 451")
			}
			return nil
		}, 3, ""},
		{"permanent parks at once", func(int) error { return retry.Permanent(errors.New("550 no such user")) }, 1, retry.ReasonPermanent},
		{"panic is transient", func(n int) error {
			if n == 1 {
				panic("handler bug")
			}
			return nil
		}, 2, ""},
		{"always failing parks after the last retry", func(int) error { return errors.New("503") }, 3, retry.ReasonMaxRetries},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, topo := pipeline(t, retry.Topology{Backend: retry.TTL,
				Policy: retry.Policy{Delays: []time.Duration{ms(50), ms(50)}}})
			var seen attempts
			consume(t, conn, topo, func(ctx context.Context, m *retry.Message) error {
				n := seen.add(m)
				if m.Attempt != n {
					t.Errorf("delivery %d has Attempt %d", n, m.Attempt)
				}
				return tt.fail(n)
			})
			publish(t, conn, topo, "email", "n-2", nil)
			if tt.wantParked != "" {
				d := parked(t, conn, topo, 5*time.Second)
				assertParked(t, d, "n-2", topo.WorkRoutes()[0].Queue, tt.wantParked, tt.wantAttempts-1)
				// Every parked copy carries the error that ended it.
				if want := tt.fail(tt.wantAttempts).Error(); d.Headers[retry.HeaderLastError] != want {
					t.Errorf("%s = %v, want %q", retry.HeaderLastError, d.Headers[retry.HeaderLastError], want)
				}
			} else {
				retrytest.Eventually(t, 5*time.Second, func() bool { return seen.count() >= tt.wantAttempts },
					"want %d attempts", tt.wantAttempts)
			}
			// Let any stray extra delivery surface before counting: the
			// pipeline is idle once every queue is empty.
			retrytest.Eventually(t, 5*time.Second, func() bool {
				return depth(t, conn, topo.Name(retry.ErrorQueue))+depth(t, conn, topo.Name(retry.RequeueQueue))+
					depth(t, conn, topo.WaitQueue(ms(50)))+depth(t, conn, topo.Name(retry.DeadQueue)) == 0
			}, "pipeline did not drain")
			if got := seen.count(); got != tt.wantAttempts {
				t.Errorf("attempts = %d, want %d", got, tt.wantAttempts)
			}
		})
	}
}

// TestRetryAfterOutlastsLongestStep: a downstream's Retry-After longer than
// any TTL step is honoured, waiting exactly in the delay levels the TTL
// backend declares beside its steps.
func TestRetryAfterOutlastsLongestStep(t *testing.T) {
	conn, topo := pipeline(t, retry.Topology{Backend: retry.TTL,
		Policy: retry.Policy{Delays: []time.Duration{ms(100)}}})
	var seen attempts
	consume(t, conn, topo, func(ctx context.Context, m *retry.Message) error {
		if seen.add(m) == 1 {
			return retry.After(errors.New("429 slow down"), ms(700))
		}
		return nil
	})
	publish(t, conn, topo, "email", "n-3", nil)
	retrytest.Eventually(t, 5*time.Second, func() bool { return seen.count() == 2 }, "no second attempt")
	seen.mu.Lock()
	gap := seen.at[1].Sub(seen.at[0])
	last := seen.list[1]
	seen.mu.Unlock()
	// At least the 700ms asked for, not the 100ms step: never early.
	if gap < ms(700) {
		t.Errorf("gap = %s, want at least the 700ms asked for", gap)
	}
	t.Logf("Retry-After 700ms: the second attempt came %s later", gap.Round(time.Millisecond))
	if _, ok := last.Headers[retry.HeaderNotBefore]; ok {
		t.Errorf("%s leaked to the work queue", retry.HeaderNotBefore)
	}
	if last.Headers[retry.HeaderLastError] != "429 slow down" {
		t.Errorf("%s = %v", retry.HeaderLastError, last.Headers[retry.HeaderLastError])
	}
}

// TestRequeueToMissingQueueParks: a message whose work queue is gone is
// parked with the reason, not dropped by the default exchange.
func TestRequeueToMissingQueueParks(t *testing.T) {
	conn, topo := pipeline(t, retry.Topology{Backend: retry.TTL, Policy: retry.Policy{Delays: []time.Duration{ms(50)}}})
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	missing := topo.WorkRoutes()[1].Queue
	if _, err := ch.QueueDelete(missing, false, false, false); err != nil {
		t.Fatal(err)
	}
	if err := ch.Publish("", topo.Name(retry.RequeueQueue), false, false, amqp.Publishing{
		MessageId: "n-4", Body: []byte(`{"v":1}`), ContentType: "application/json", DeliveryMode: amqp.Persistent,
		Headers: amqp.Table{retry.HeaderOriginalQueue: missing, retry.HeaderRetryCount: int32(1)},
	}); err != nil {
		t.Fatal(err)
	}
	d := parked(t, conn, topo, 5*time.Second)
	assertParked(t, d, "n-4", missing, retry.ReasonNoQueue, 1)
	if e, _ := d.Headers[retry.HeaderLastError].(string); !strings.Contains(e, "no longer exists") {
		t.Errorf("%s = %q", retry.HeaderLastError, e)
	}
}

// TestErrorWithoutSourceParks: a message in error-queue that nobody can
// trace to a work queue is parked, not looped.
func TestErrorWithoutSourceParks(t *testing.T) {
	conn, topo := pipeline(t, retry.Topology{Backend: retry.TTL, Policy: retry.Policy{Delays: []time.Duration{ms(50)}}})
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Publish(topo.Name(retry.ErrorExchange), "", false, false, amqp.Publishing{
		MessageId: "n-5", Body: []byte(`{"v":1}`), ContentType: "application/json", DeliveryMode: amqp.Persistent,
	}); err != nil {
		t.Fatal(err)
	}
	d := parked(t, conn, topo, 5*time.Second)
	assertParked(t, d, "n-5", topo.Name(retry.ErrorQueue), retry.ReasonNoSource, 0)
}

// TestPluginBackend runs the schedule through the delayed-message exchange,
// on brokers that have the plugin (retrytest.PluginURL).
func TestPluginBackend(t *testing.T) {
	retrytest.PluginURL(t)
	schedule := []time.Duration{ms(200), ms(400), ms(800)}
	conn, topo := pipeline(t, retry.Topology{Backend: retry.Plugin, Policy: retry.Policy{Delays: schedule}})
	arrivals := nackAll(t, conn, topo.WorkRoutes()[0].Queue)
	publish(t, conn, topo, "email", "n-6", nil)
	assertSchedule(t, arrivals, schedule)
	d := parked(t, conn, topo, 5*time.Second)
	assertParked(t, d, "n-6", topo.WorkRoutes()[0].Queue, retry.ReasonMaxRetries, 3)
	if _, ok := d.Headers[retry.HeaderDelay]; ok {
		t.Error("parked message still carries x-delay")
	}
}

// TestAutoChoosesPlugin asks Choose and Resolve for the backend of
// DELAY_BACKEND=auto on a broker with the plugin: plugin, before 4.3 and,
// with classic queues, on any version.
func TestAutoChoosesPlugin(t *testing.T) {
	url := retrytest.PluginURL(t)
	topo := retry.Topology{Backend: retry.Auto, Routes: retrytest.Routes, Policy: retry.Policy{Delays: []time.Duration{ms(200), ms(400)}}}
	got, why, err := retry.Choose(url, topo)
	if err != nil {
		t.Fatal(err)
	}
	version, err := retrytest.Version(url)
	if err != nil {
		t.Fatal(err)
	}
	if got != retry.Plugin || !strings.Contains(why, "plugin") || !strings.Contains(why, version) {
		t.Errorf("Choose = %s (%s), want plugin, and the version in the reason", got, why)
	}
	resolved, err := retry.Resolve(context.Background(), topo, []string{url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resolved.Backend != retry.Plugin {
		t.Errorf("Resolve chose %s, want plugin", resolved.Backend)
	}
}

// TestDeclareIsIdempotentAndNamesConflicts declares twice, then asks for a
// quorum topology over the classic one.
func TestDeclareIsIdempotentAndNamesConflicts(t *testing.T) {
	conn := retrytest.Conn(t)
	topo := retrytest.Declare(t, conn, retry.Topology{Backend: retry.TTL})
	if err := topo.Declare(context.Background(), conn); err != nil {
		t.Fatalf("second declare: %v", err)
	}
	topo.QueueType = retry.Quorum
	err := topo.Declare(context.Background(), conn)
	if !errors.Is(err, retry.ErrConflict) {
		t.Fatalf("declare over a different queue type = %v, want ErrConflict", err)
	}
}

// TestStagesParkHeadersThatFillTheFrame: a message whose headers leave no
// room for the stage's own, put straight into error-queue, is parked
// instead of closing the connection on every hand-off.
func TestStagesParkHeadersThatFillTheFrame(t *testing.T) {
	conn, topo := pipeline(t, retry.Topology{Backend: retry.TTL, Policy: retry.Policy{Delays: []time.Duration{ms(50)}}})
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	pad := strings.Repeat("p", conn.Config.FrameSize-1000)
	if err := ch.Publish(topo.Name(retry.ErrorExchange), "", false, false, amqp.Publishing{
		MessageId: "big", Body: []byte(`{"v":1}`), ContentType: "application/json", DeliveryMode: amqp.Persistent,
		Headers: amqp.Table{retry.HeaderOriginalQueue: topo.WorkRoutes()[0].Queue, "x-padding": pad},
	}); err != nil {
		t.Fatal(err)
	}
	d := parked(t, conn, topo, 5*time.Second)
	assertParked(t, d, "big", topo.WorkRoutes()[0].Queue, retry.ReasonTooLarge, 0)
	if _, ok := d.Headers["x-padding"]; ok {
		t.Error("the oversized header was kept")
	}
}

// TestPluginWithoutPluginFailsFast asks for the plugin backend on a broker
// without the plugin: Resolve must end at once with ErrNoPlugin, not wait
// and reconnect for ever. RabbitMQ 3.x and 4.x refuse the unknown exchange
// type with different codes (503, 406); the probe must read both as "no
// plugin".
func TestPluginWithoutPluginFailsFast(t *testing.T) {
	url := retrytest.URL(t)
	plugin, err := retry.HasPlugin(url)
	if err != nil {
		t.Fatalf("probe: %v (want true or false, never an error on a broker that answers)", err)
	}
	if plugin {
		t.Skip("broker has the delayed-message plugin: nothing to refuse")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	_, err = retry.Resolve(ctx, retry.Topology{Backend: retry.Plugin}, []string{url}, nil)
	if !errors.Is(err, retry.ErrNoPlugin) {
		t.Fatalf("Resolve(plugin) = %v, want ErrNoPlugin", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Resolve took %s to refuse, want at once", took)
	}
	if !strings.Contains(err.Error(), "levels") {
		t.Errorf("error %q does not say what to choose instead", err)
	}
}

// TestDeferralTimedFromTheWorker: a wait a downstream asked for ends when
// the worker reckoned, however long the failure sat in error-queue before
// the error stage took it (a burst of failures, a retrier restarting): a
// rate-limited copy must come back for its slot, not that much later.
func TestDeferralTimedFromTheWorker(t *testing.T) {
	conn := retrytest.Conn(t)
	topo := retrytest.Declare(t, conn, retry.Topology{Backend: retry.TTL, Policy: retry.Policy{Delays: []time.Duration{ms(100)}}})
	const asked, lag = 2500 * time.Millisecond, 2 * time.Second
	var seen attempts
	var failedAt time.Time
	consume(t, conn, topo, func(ctx context.Context, m *retry.Message) error {
		if seen.add(m) == 1 {
			seen.mu.Lock()
			failedAt = time.Now()
			seen.mu.Unlock()
			return retry.After(errors.New("over the rate limit"), asked)
		}
		return nil
	})
	publish(t, conn, topo, "email", "slot-1", nil)
	retrytest.Eventually(t, 10*time.Second, func() bool { return seen.count() == 1 }, "no first attempt")
	// The error stage starts only a while after the failure.
	retrytest.Eventually(t, 10*time.Second, func() bool {
		seen.mu.Lock()
		defer seen.mu.Unlock()
		return !failedAt.IsZero() && time.Since(failedAt) >= lag
	}, "the failure was never recorded")
	runStages(t, conn, topo)
	retrytest.Eventually(t, 20*time.Second, func() bool { return seen.count() == 2 }, "no second attempt")
	seen.mu.Lock()
	gap := seen.at[1].Sub(failedAt)
	retries := retry.RetryCount(seen.list[1].Headers)
	seen.mu.Unlock()
	if gap < asked {
		t.Errorf("back %s after the failure, before the %s asked", gap.Round(time.Millisecond), asked)
	}
	// Timed from the error stage's clock it would be back after asked +
	// lag at the earliest.
	if gap >= asked+lag {
		t.Errorf("back %s after the failure: the %s the failure sat in error-queue were added to the %s asked", gap.Round(time.Millisecond), lag, asked)
	}
	if retries != 0 {
		t.Errorf("the deferral spent a retry: %s %d", retry.HeaderRetryCount, retries)
	}
	t.Logf("asked %s, the error stage took the failure %s later, back after %s", asked, lag, gap.Round(time.Millisecond))
}
