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

// The native delay backend is RabbitMQ 4.3's delayed retry for quorum
// queues: the work queue itself holds a rejected message for
// min(first delay × delivery count, last delay) and dead-letters it past
// x-delivery-limit. Only a 4.3 broker can show that, so these tests run on
// one (retrytest.NativeURL: a 4.3 broker at hand, or a container) and are
// skipped, saying why, where there is none. Nothing here imitates the
// broker: the delays measured are the broker's.

// nativeEarly is how much earlier than scheduled a retry may arrive: the
// clocks of a timer on the broker and of the test, nothing more. How much
// later is logged, never held to a bound: the broker holds the message in
// the queue's delayed set and releases it on a timer after a Raft round
// (published measurements on RabbitMQ 4.3.5 overshoot by 50 to 200 ms), and
// make test shares the cores with every other package's tests. A delay
// that ignored the growing schedule (a fixed one, as a nack instead of a
// reject would give) brings a later retry early.
const nativeEarly = 20 * time.Millisecond

type arrival struct {
	attempt int
	at      time.Time
}

// TestNativeRetriesThenParks runs a whole Pipeline on the native backend:
// a message that fails twice and then succeeds, and one that always
// fails. Each comes back after the broker's delay for its attempt; the one
// that always fails is dead-lettered by the broker past the delivery limit
// and parked by the error stage.
func TestNativeRetriesThenParks(t *testing.T) {
	url := retrytest.NativeURL(t)
	conn := nativeConn(t, url)
	schedule := []time.Duration{ms(200), ms(400), ms(600)} // linear: min(200ms × n, 600ms)
	const failures = 2                                     // "recovers" fails this often, then succeeds

	var mu sync.Mutex
	arrivals := map[string][]arrival{}
	var events []retry.Event
	p := retry.New(retry.Config{
		Topology: retry.Topology{Prefix: retrytest.Prefix(t), Backend: retry.Native, QueueType: retry.Quorum,
			Policy: retry.Policy{Delays: schedule}},
		Options: retry.Options{Observe: func(e retry.Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}},
	})
	p.Handle("jobs", "job", retry.HandlerFunc(func(ctx context.Context, m *retry.Message) error {
		mu.Lock()
		arrivals[m.ID] = append(arrivals[m.ID], arrival{attempt: m.Attempt, at: time.Now()})
		n := len(arrivals[m.ID])
		mu.Unlock()
		if m.ID == "recovers" && n > failures {
			return nil
		}
		return fmt.Errorf("503 from downstream, delivery %d", n)
	}))
	p.ServeStages()
	topo := p.Topology()
	jobs := topo.Name("jobs")
	t.Cleanup(func() {
		if c, err := retry.Dial(url, "relay test cleanup"); err == nil {
			_ = topo.Delete(c)
			c.Close()
		}
	})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, url) }()
	retrytest.Eventually(t, 30*time.Second, func() bool {
		return live(conn, jobs) && live(conn, topo.Name(retry.ErrorQueue))
	}, "the pipeline never consumed %s and its error queue", jobs)

	publish(t, conn, topo, "job", "recovers", nil)
	publish(t, conn, topo, "job", "gives-up", nil)

	d := parked(t, conn, topo, 20*time.Second)
	retrytest.Eventually(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(arrivals["recovers"]) == failures+1
	}, "recovers was never delivered")
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}

	// Parked on its last attempt by the consumer itself, which knows the
	// attempt (the broker's x-delivery-count) and the error: the copy
	// carries both, as on every other backend.
	if d.MessageId != "gives-up" {
		t.Errorf("parked %q, want gives-up", d.MessageId)
	}
	if got := d.Headers[retry.HeaderDeadSource]; got != jobs {
		t.Errorf("%s = %v, want %q", retry.HeaderDeadSource, got, jobs)
	}
	if got := d.Headers[retry.HeaderDeadReason]; got != retry.ReasonMaxRetries {
		t.Errorf("%s = %v, want %q (the broker's delivery_limit)", retry.HeaderDeadReason, got, retry.ReasonMaxRetries)
	}
	if _, ok := d.Headers["x-death"]; ok {
		t.Error("parked message still carries x-death")
	}
	if d.DeliveryMode != amqp.Persistent || string(d.Body) != `{"v":1}` || d.ContentType != "application/json" {
		t.Errorf("parked message lost its body or properties: mode %d body %q type %q", d.DeliveryMode, d.Body, d.ContentType)
	}
	if got := d.Headers[retry.HeaderRetryCount]; fmt.Sprint(got) != fmt.Sprint(len(schedule)) {
		t.Errorf("%s = %v, want %d: the retries the broker made", retry.HeaderRetryCount, got, len(schedule))
	}
	if got, _ := d.Headers[retry.HeaderLastError].(string); !strings.Contains(got, "delivery 4") {
		t.Errorf("%s = %q, want the last attempt's error", retry.HeaderLastError, got)
	}

	mu.Lock()
	defer mu.Unlock()
	// x-delivery-limit is the number of retries: one delivery, then one
	// per retry, then the broker dead-letters it.
	for id, want := range map[string]int{"recovers": failures + 1, "gives-up": len(schedule) + 1} {
		got := arrivals[id]
		if len(got) != want {
			t.Errorf("%s: %d deliveries, want %d", id, len(got), want)
			continue
		}
		for i, a := range got {
			// The consumer reads the attempt from the broker's
			// x-delivery-count.
			if a.attempt != i+1 {
				t.Errorf("%s: delivery %d reported attempt %d", id, i+1, a.attempt)
			}
			if i == 0 {
				continue
			}
			gap, wait := a.at.Sub(got[i-1].at), schedule[i-1]
			if gap < wait-nativeEarly {
				t.Errorf("%s: retry %d came %s after the attempt before, want at least %s (-%s)",
					id, i, gap.Round(time.Millisecond), wait, nativeEarly)
			}
			t.Logf("%s: retry %d: scheduled %s, measured %s", id, i, wait, gap.Round(time.Millisecond))
		}
	}
	var delivered, retrying, parkedN int
	for _, e := range events {
		switch e.Outcome {
		case retry.Delivered:
			delivered++
		case retry.Retrying:
			retrying++
		case retry.Parked:
			parkedN++
			if e.Reason != retry.ReasonMaxRetries || e.Attempt != len(schedule)+1 || !strings.Contains(e.Err, "delivery 4") {
				t.Errorf("parked event: attempt %d reason %q error %q; want attempt %d, %q, the last error",
					e.Attempt, e.Reason, e.Err, len(schedule)+1, retry.ReasonMaxRetries)
			}
		case retry.Failed:
			if e.MessageID == "gives-up" && e.Attempt > len(schedule) {
				t.Errorf("attempt %d of gives-up reported failed, want it parked (the last attempt)", e.Attempt)
			}
		}
	}
	if delivered != 1 || retrying != failures+len(schedule) || parkedN != 1 {
		t.Errorf("observed %d delivered, %d retrying, %d parked; want 1, %d, 1", delivered, retrying, parkedN, failures+len(schedule))
	}

	// The broker's hop to error-exchange is the at-least-once one: the
	// work queue holds x-dead-letter-strategy at-least-once, which the
	// broker proves by refusing a declaration that says otherwise.
	assertDeadLetterStrategy(t, conn, topo, jobs, "at-least-once")
}

// assertDeadLetterStrategy redeclares queue with every argument of the
// plan but the other dead-letter strategy, and expects the broker to
// refuse it because it holds want.
func assertDeadLetterStrategy(t *testing.T, conn *amqp.Connection, topo retry.Topology, queue, want string) {
	t.Helper()
	var args amqp.Table
	for _, q := range topo.Plan().Queues {
		if q.Name == queue {
			args = amqp.Table{}
			for k, v := range q.Args {
				args[k] = v
			}
		}
	}
	if args["x-dead-letter-strategy"] != want {
		t.Fatalf("the plan declares %s with x-dead-letter-strategy %v, want %s", queue, args["x-dead-letter-strategy"], want)
	}
	args["x-dead-letter-strategy"] = "at-most-once"
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	_, err = ch.QueueDeclare(queue,
		true,  // durable
		false, // autoDelete
		false, // exclusive
		false, // noWait
		args)
	var aerr *amqp.Error
	if !errors.As(err, &aerr) || aerr.Code != amqp.PreconditionFailed || !strings.Contains(aerr.Reason, "x-dead-letter-strategy") {
		t.Errorf("declaring %s at-most-once = %v, want PRECONDITION_FAILED on x-dead-letter-strategy: the broker does not hold %s", queue, err, want)
	}
}

// TestNativeChosenOn43 asks Choose, and Resolve, for the backend on a
// RabbitMQ 4.3 broker: native with quorum queues and a linear schedule,
// something else wherever the broker's delayed retry cannot follow.
func TestNativeChosenOn43(t *testing.T) {
	url := retrytest.NativeURL(t)
	linear := retry.Policy{Delays: []time.Duration{ms(200), ms(400), ms(600)}}
	tests := []struct {
		name       string
		queueType  retry.QueueType
		policy     retry.Policy
		wantNative bool
	}{
		{"quorum, linear schedule", retry.Quorum, linear, true},
		{"classic queues", retry.Classic, linear, false},
		{"quorum, schedule not linear", retry.Quorum, retry.Policy{Delays: []time.Duration{ms(200), ms(5000)}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topo := retry.Topology{Backend: retry.Auto, QueueType: tt.queueType, Policy: tt.policy, Routes: retrytest.Routes}
			got, why, err := retry.Choose(url, topo)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("Choose = %s: %s", got, why)
			if (got == retry.Native) != tt.wantNative {
				t.Errorf("Choose = %s (%s), want native: %v", got, why, tt.wantNative)
			}
			resolved, err := retry.Resolve(context.Background(), topo, []string{url}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resolved.Backend != got {
				t.Errorf("Resolve chose %s, Choose %s", resolved.Backend, got)
			}
		})
	}
}

// TestNativeNotChosenBefore43 runs on the ordinary test broker: on one
// older than RabbitMQ 4.3, quorum queues and a linear schedule are not
// enough for Choose to pick native.
func TestNativeNotChosenBefore43(t *testing.T) {
	url := retrytest.URL(t)
	version, err := retrytest.Version(url)
	if err != nil {
		t.Fatal(err)
	}
	if retry.VersionAtLeast(version, 4, 3) {
		t.Skipf("the test broker is RabbitMQ %s; TestNativeChosenOn43 covers it", version)
	}
	topo := retry.Topology{Backend: retry.Auto, QueueType: retry.Quorum, Routes: retrytest.Routes,
		Policy: retry.Policy{Delays: []time.Duration{ms(200), ms(400), ms(600)}}}
	got, why, err := retry.Choose(url, topo)
	if err != nil {
		t.Fatal(err)
	}
	if got == retry.Native || !strings.Contains(why, version) {
		t.Errorf("Choose on RabbitMQ %s = %s (%s), want plugin or levels, and the version in the reason", version, got, why)
	}
	t.Logf("RabbitMQ %s: Choose = %s: %s", version, got, why)
}

// TestNativeRefusedBefore43 checks that an explicit DELAY_BACKEND=native
// on an older broker is an error at start, naming the version: such a
// broker accepts the delayed-retry arguments and ignores them, so every
// retry would come at once.
func TestNativeRefusedBefore43(t *testing.T) {
	url := retrytest.URL(t)
	version, err := retrytest.Version(url)
	if err != nil {
		t.Fatal(err)
	}
	if retry.VersionAtLeast(version, 4, 3) {
		t.Skipf("the test broker is RabbitMQ %s; TestNativeChosenOn43 covers it", version)
	}
	topo := retry.Topology{Backend: retry.Native, QueueType: retry.Quorum, Routes: retrytest.Routes,
		Policy: retry.Policy{Delays: []time.Duration{ms(200), ms(400), ms(600)}}}
	_, err = retry.Resolve(context.Background(), topo, []string{url}, nil)
	if !errors.Is(err, retry.ErrBrokerTooOld) || !strings.Contains(err.Error(), version) {
		t.Errorf("Resolve(native) on RabbitMQ %s = %v, want ErrBrokerTooOld naming the version", version, err)
	}
	p := retry.New(retry.Config{Topology: retry.Topology{Backend: retry.Native, QueueType: retry.Quorum, Policy: topo.Policy}})
	p.Handle("native-refused", "native-refused", retry.HandlerFunc(func(context.Context, *retry.Message) error { return nil }))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Run(ctx, url); !errors.Is(err, retry.ErrBrokerTooOld) {
		t.Errorf("Pipeline.Run(native) on RabbitMQ %s = %v, want ErrBrokerTooOld at once", version, err)
	}
}

// nativeConn opens a connection to the 4.3 broker, closed when the test
// ends. (retrytest.Conn connects to the ordinary test broker.)
func nativeConn(t *testing.T, url string) *amqp.Connection {
	t.Helper()
	conn, err := retry.Dial(url, "relay test "+t.Name())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// live reports whether queue exists and has a consumer.
func live(conn *amqp.Connection, queue string) bool {
	ch, err := conn.Channel()
	if err != nil {
		return false
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	return err == nil && q.Consumers > 0
}
