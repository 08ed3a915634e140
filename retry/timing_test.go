//go:build integration && timing

package retry_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// The timing tests measure how late a wait ends. They run alone (make
// test-timing, -p 1), after the other tests: on two cores, other tests
// loading the same broker would measure those tests, not relay. They
// assert only what holds however loaded the machine (no wait ends early,
// none is lost, a deferral spends no retry) and log how late the waits
// ended: lateness is a figure, reported, never a bound a test holds.

// TestLevelsAccuracy keeps thousands of messages waiting in the binary
// delay levels (deferred for a minute), then defers probes, a few dozen a
// second, for 137ms, 1.7s or 3.3s each, through a direct hand-off, and
// measures each probe's arrival against the wait it asked for: none may
// come back early, every one must come back, and the lateness p50, p99
// and maximum are logged. A deferral spends no retry. LEVELS_PENDING sets
// how many wait (default 10,000).
func TestLevelsAccuracy(t *testing.T) {
	pending := 10000
	if v, err := strconv.Atoi(os.Getenv("LEVELS_PENDING")); err == nil && v >= 0 {
		pending = v
	}
	for _, qt := range []retry.QueueType{retry.Classic, retry.Quorum} {
		t.Run(string(qt), func(t *testing.T) { levelsRun(t, qt, pending) })
	}
}

// levelsRun declares a levels topology, keeps pending messages waiting in
// it, times probes through it, fails the test for a probe early or lost,
// and logs their lateness; it deletes the topology before it returns.
func levelsRun(t *testing.T, qt retry.QueueType, pending int) {
	t.Helper()
	const probes = 240
	delays := []time.Duration{ms(137), ms(1700), ms(3300)}
	conn := retrytest.Conn(t)
	topo := retry.Topology{Prefix: retrytest.Prefix(t), Backend: retry.Levels, Handoff: retry.Direct, QueueType: qt,
		Policy: retry.Policy{Delays: []time.Duration{time.Second}, Deferrals: 5},
		Routes: []retry.Route{{Queue: "jobs", Key: "job"}}}
	if err := topo.Declare(context.Background(), conn); err != nil {
		t.Fatalf("declare topology: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 2)
	defer func() {
		cancel()
		for range 2 {
			if err := <-stopped; err != nil {
				t.Errorf("stages or consumer: %v", err)
			}
		}
		if err := topo.Delete(conn); err != nil {
			t.Errorf("delete the topology: %v", err)
		}
	}()
	st := &retry.Stages{Topology: topo}
	go func() { stopped <- st.Run(ctx, conn) }()

	var mu sync.Mutex
	failedAt := map[string]time.Time{}
	var late []time.Duration
	var early []string
	waiting := 0
	done := make(chan struct{})
	c := &retry.Consumer{Topology: topo, Queue: topo.WorkRoutes()[0].Queue, Options: retry.Options{Concurrency: 32, Prefetch: 256},
		Handler: retry.HandlerFunc(func(ctx context.Context, m *retry.Message) error {
			now := time.Now()
			mu.Lock()
			defer mu.Unlock()
			if m.Headers["probe"] == nil {
				waiting++
				return retry.After(errors.New("come back in a minute"), time.Minute)
			}
			i, _ := strconv.Atoi(m.ID)
			want := delays[i%len(delays)]
			at, again := failedAt[m.ID]
			if !again {
				failedAt[m.ID] = now
				return retry.After(errors.New("come back later"), want)
			}
			if m.Attempt != 2 || retry.RetryCount(m.Headers) != 0 {
				t.Errorf("%s: attempt %d, %s %v: a deferral must not spend a retry", m.ID, m.Attempt, retry.HeaderRetryCount, m.Headers[retry.HeaderRetryCount])
			}
			l := now.Sub(at) - want
			if l < 0 {
				early = append(early, fmt.Sprintf("%s %s early", m.ID, -l))
			}
			late = append(late, l)
			if len(late) == probes {
				close(done)
			}
			return nil
		})}
	go func() { stopped <- c.Run(ctx, conn) }()
	publishMany(t, conn, topo, "job", pending, nil, 0)
	retrytest.Eventually(t, 2*time.Minute, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return waiting == pending
	}, "only %d of %d messages were sent to wait", waiting, pending)
	publishMany(t, conn, topo, "job", probes, amqp.Table{"probe": true}, 25*time.Millisecond)
	select {
	case <-done:
	case <-time.After(time.Minute):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("%d of %d probes came back", len(late), probes)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(late)
	p50, p99, worst := late[len(late)/2], late[len(late)*99/100], late[len(late)-1]
	t.Logf("%s queues, %d messages waiting: %d probes late by p50 %s, p99 %s, at most %s", qt, pending, probes,
		p50.Round(100*time.Microsecond), p99.Round(100*time.Microsecond), worst.Round(100*time.Microsecond))
	if len(early) > 0 {
		t.Errorf("%d came back early: %v", len(early), early[:min(len(early), 5)])
	}
}
