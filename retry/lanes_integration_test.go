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

// TestLanesRun runs a pipeline whose route has three lanes, on the real
// broker, on every cell it runs (backend, queue type, hand-off): a
// backlog in one lane, every handler of it held, does not hold up a
// message in another lane, and a message that fails is retried in the
// lane it came from.
func TestLanesRun(t *testing.T) {
	url := retrytest.URL(t)
	for _, cell := range retrytest.Cells(t, url) {
		t.Run(cell.Name(), func(t *testing.T) { lanesCell(t, url, cell) })
	}
}

func lanesCell(t *testing.T, url string, cell retrytest.Cell) {
	topo := cell.Topology()
	topo.Prefix = retrytest.Prefix(t)
	topo.Policy = retry.Policy{Delays: []time.Duration{ms(50)}}
	topo.Routes = []retry.Route{{Queue: "jobs", Key: "job", Lanes: 3}}
	// Two receivers in different lanes.
	slow := topo.Lane("job", "slow receiver")
	var fast retry.Route
	for i := 0; ; i++ {
		fast = topo.Lane("job", fmt.Sprintf("fast receiver %d", i))
		if fast.Lane != slow.Lane {
			break
		}
	}
	release := make(chan struct{})
	var mu sync.Mutex
	queues := map[string][]string{} // message id: the queue of each attempt
	handledFast := make(chan struct{})
	p := retry.New(retry.Config{Topology: topo, Options: retry.Options{Concurrency: 2, Observe: func(e retry.Event) {
		mu.Lock()
		queues[e.MessageID] = append(queues[e.MessageID], e.Queue)
		mu.Unlock()
	}}})
	p.Handle("jobs", "job", retry.HandlerFunc(func(ctx context.Context, m *retry.Message) error {
		switch {
		case strings.HasPrefix(m.ID, "slow-"):
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		case m.ID == "fast":
			close(handledFast)
		case m.ID == "again" && m.Attempt == 1:
			return errors.New("try again")
		}
		return nil
	}))
	p.ServeStages()
	t.Cleanup(func() {
		if c, err := retry.Dial(url, "relay test cleanup"); err == nil {
			_ = topo.Delete(c)
			c.Close()
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, url) }()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(40 * time.Second):
			t.Error("Run did not return after its context was cancelled")
		}
	}()
	conn := retrytest.Conn(t)
	for _, r := range topo.WorkRoutes() {
		retrytest.Eventually(t, 10*time.Second, func() bool { return consumersOr0(conn, r.Queue) > 0 }, r.Queue+" never consumed")
	}

	// The slow receiver's backlog: every handler of its lane held.
	for i := range 20 {
		publish(t, conn, topo, slow.Key, fmt.Sprintf("slow-%d", i), nil)
	}
	publish(t, conn, topo, fast.Key, "fast", nil)
	select {
	case <-handledFast:
	case <-time.After(10 * time.Second):
		t.Fatalf("a message in lane %d waited behind lane %d's backlog", fast.Lane, slow.Lane)
	}
	// Lane by lane, a retry comes back where it failed.
	publish(t, conn, topo, fast.Key, "again", nil)
	retrytest.Eventually(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(queues["again"]) == 2
	}, "again was never retried")
	close(release)
	retrytest.Eventually(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for id := range queues {
			if strings.HasPrefix(id, "slow-") {
				n++
			}
		}
		return n == 20
	}, "the slow lane's backlog never ended")
	mu.Lock()
	defer mu.Unlock()
	for _, q := range queues["again"] {
		if q != fast.Queue {
			t.Errorf("again's attempts were in %v, want every one in %s", queues["again"], fast.Queue)
			break
		}
	}
	for i := range 20 {
		if q := queues[fmt.Sprintf("slow-%d", i)]; len(q) != 1 || q[0] != slow.Queue {
			t.Errorf("slow-%d handled in %v, want once in %s", i, q, slow.Queue)
		}
	}
}

// TestStrayLanes: a process with fewer lanes than the broker has queues
// for finds the first lane past its own.
func TestStrayLanes(t *testing.T) {
	prefix := retrytest.Prefix(t)
	wide := retry.Topology{Prefix: prefix, Backend: retry.Levels, Policy: retry.Policy{Delays: []time.Duration{ms(50)}},
		Routes: []retry.Route{{Queue: "jobs", Key: "job", Lanes: 4}}}
	narrow := wide
	narrow.Routes = []retry.Route{{Queue: "jobs", Key: "job", Lanes: 2}}
	conn := retrytest.Conn(t)
	t.Cleanup(func() { _ = wide.Delete(conn) })
	if err := narrow.Declare(context.Background(), conn); err != nil {
		t.Fatal(err)
	}
	if got := narrow.StrayLanes(conn); len(got) != 0 {
		t.Fatalf("StrayLanes = %v before any wider process declared", got)
	}
	if err := wide.Declare(context.Background(), conn); err != nil {
		t.Fatal(err)
	}
	if got := narrow.StrayLanes(conn); len(got) != 1 || got[0] != prefix+"jobs.lane-2" {
		t.Fatalf("StrayLanes = %v, want [%sjobs.lane-2]", got, prefix)
	}
	if got := wide.StrayLanes(conn); len(got) != 0 {
		t.Fatalf("the wide topology's StrayLanes = %v", got)
	}
}

// consumersOr0 is how many consumers queue has; 0 when it cannot be read
// (not declared yet).
func consumersOr0(conn *amqp.Connection, queue string) int {
	ch, err := conn.Channel()
	if err != nil {
		return 0
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		return 0
	}
	return q.Consumers
}
