//go:build integration

package retry_test

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
)

// memJournal is a Journal in memory; failAt makes its nth Record write
// and then fail, as a process that dies right after the write would.
type memJournal struct {
	mu     sync.Mutex
	done   map[retry.ReplayKey]bool
	writes int
	failAt int
}

func (j *memJournal) Replayed(_ context.Context, k retry.ReplayKey) (bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.done[k], nil
}

func (j *memJournal) Record(_ context.Context, k retry.ReplayKey) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.done == nil {
		j.done = map[retry.ReplayKey]bool{}
	}
	j.done[k] = true
	j.writes++
	if j.writes == j.failAt {
		return errors.New("the process died")
	}
	return nil
}

// parkMany parks n messages from queue: the even ones for max-retries,
// the odd ones permanent.
func parkMany(t *testing.T, conn *amqp.Connection, topo retry.Topology, queue string, n int) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	for i := range n {
		reason := retry.ReasonMaxRetries
		if i%2 == 1 {
			reason = retry.ReasonPermanent
		}
		if err := ch.Publish(topo.Name(retry.DeadExchange), "", false, false, amqp.Publishing{
			MessageId: fmt.Sprintf("m%03d", i), Body: []byte(`{}`), DeliveryMode: amqp.Persistent,
			Headers: amqp.Table{retry.HeaderDeadSource: queue, retry.HeaderDeadReason: reason,
				retry.HeaderParkedAt: time.Now().UTC().Format(time.RFC3339Nano), retry.HeaderLastError: "503 busy"},
		}); err != nil {
			t.Fatal(err)
		}
	}
	retrytest.Eventually(t, 10*time.Second, func() bool { return depth(t, conn, topo.Name(retry.DeadQueue)) == n }, "not parked")
}

// evenIDs are the ids parkMany parks for max-retries, each once.
func evenIDs(n int) map[string]int {
	out := map[string]int{}
	for i := 0; i < n; i += 2 {
		out[fmt.Sprintf("m%03d", i)] = 1
	}
	return out
}

func TestBulkReplayByFilter(t *testing.T) {
	conn := retrytest.Conn(t)
	topo := retrytest.Declare(t, conn, retry.Topology{Backend: retry.TTL})
	email := topo.WorkRoutes()[0].Queue
	const n = 300
	parkMany(t, conn, topo, email, n)
	dl := retry.DeadLetters{Conn: conn, Topology: topo}
	f := retry.Filter{Reason: retry.ReasonMaxRetries, Error: "BUSY"}
	ctx := context.Background()

	count, err := dl.Count(ctx, f)
	if err != nil || count != n/2 {
		t.Fatalf("Count = %d, %v; want %d", count, err, n/2)
	}
	var seen []retry.Progress
	p, err := dl.Bulk(ctx, retry.Bulk{Filter: f, Journal: &memJournal{}, Progress: func(p retry.Progress) { seen = append(seen, p) }})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(retry.Progress{Matched: n / 2, Done: n / 2}, p); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
	if len(seen) != n/2 || seen[9].Done != 10 {
		t.Errorf("progress was told %d times (want %d), the tenth %+v", len(seen), n/2, seen[min(9, len(seen)-1)])
	}
	if diff := cmp.Diff(evenIDs(n), retrytest.TakeAll(t, conn, email)); diff != "" {
		t.Errorf("arrivals on the work queue (-want +got):\n%s", diff)
	}
	retrytest.Eventually(t, 5*time.Second, func() bool { return depth(t, conn, topo.Name(retry.DeadQueue)) == n/2 }, "the permanent ones are not all parked")
	if left, err := dl.Count(ctx, retry.Filter{Reason: retry.ReasonPermanent}); err != nil || left != n/2 {
		t.Errorf("permanent ones parked: %d, %v; want %d", left, err, n/2)
	}
}

// TestBulkReplayResumes stops a replay twice, once by its context and
// once right after a journal write (before the ack of the original), and
// checks a resumed pass replays each selected copy exactly once.
func TestBulkReplayResumes(t *testing.T) {
	conn := retrytest.Conn(t)
	topo := retrytest.Declare(t, conn, retry.Topology{Backend: retry.TTL})
	email := topo.WorkRoutes()[0].Queue
	const n = 300
	parkMany(t, conn, topo, email, n)
	dl := retry.DeadLetters{Conn: conn, Topology: topo}
	f := retry.Filter{Reason: retry.ReasonMaxRetries}
	j := &memJournal{failAt: 40}

	// The first pass dies right after its 40th journal write.
	first, err := dl.Bulk(context.Background(), retry.Bulk{Filter: f, Journal: j})
	if err == nil || first.Done != 39 {
		t.Fatalf("first pass: %+v, %v; want 39 done and an error", first, err)
	}
	// The second is cancelled after 50 more.
	ctx, cancel := context.WithCancel(context.Background())
	second, err := dl.Bulk(ctx, retry.Bulk{Filter: f, Journal: j, Progress: func(p retry.Progress) {
		if p.Done == 50 {
			cancel()
		}
	}})
	cancel()
	if !errors.Is(err, context.Canceled) || second.Journaled != 1 {
		t.Fatalf("second pass: %+v, %v; want one journaled and cancelled", second, err)
	}
	// A cancelled pass waits (a while) for the broker to take back what
	// it held; the test makes sure.
	left := n - first.Done - second.Done - second.Journaled
	retrytest.Eventually(t, 5*time.Second, func() bool { return depth(t, conn, topo.Name(retry.DeadQueue)) == left }, "the held ones are not back")
	third, err := dl.Bulk(context.Background(), retry.Bulk{Filter: f, Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	if got := first.Done + second.Done + third.Done; got != n/2-1 {
		t.Errorf("replayed %d in all (%+v, %+v, %+v); want %d and one journaled", got, first, second, third, n/2-1)
	}
	if diff := cmp.Diff(evenIDs(n), retrytest.TakeAll(t, conn, email)); diff != "" {
		t.Errorf("arrivals on the work queue (-want +got):\n%s", diff)
	}
	retrytest.Eventually(t, 5*time.Second, func() bool { return depth(t, conn, topo.Name(retry.DeadQueue)) == n/2 }, "the permanent ones are not all parked")
}

// TestBulkByRouteAcrossLanes: a filter by route takes the copies parked
// from every lane of it, and a replay sends each back to its own lane.
func TestBulkByRouteAcrossLanes(t *testing.T) {
	conn := retrytest.Conn(t)
	topo := retrytest.Declare(t, conn, retry.Topology{Backend: retry.TTL,
		Routes: []retry.Route{{Queue: "email-queue", Key: "email", Lanes: 3}, {Queue: "webhook-queue", Key: "webhook"}}})
	lanes := []string{topo.Name("email-queue"), topo.Name("email-queue") + ".lane-1", topo.Name("email-queue") + ".lane-2", topo.Name("webhook-queue")}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	for i, q := range lanes {
		if err := ch.Publish(topo.Name(retry.DeadExchange), "", false, false, amqp.Publishing{MessageId: fmt.Sprintf("m%d", i),
			Headers: amqp.Table{retry.HeaderDeadSource: q, retry.HeaderDeadReason: retry.ReasonMaxRetries}}); err != nil {
			t.Fatal(err)
		}
	}
	retrytest.Eventually(t, 5*time.Second, func() bool { return depth(t, conn, topo.Name(retry.DeadQueue)) == len(lanes) }, "not parked")
	dl := retry.DeadLetters{Conn: conn, Topology: topo}
	p, err := dl.Bulk(context.Background(), retry.Bulk{Filter: retry.Filter{Route: "email"}})
	if err != nil || p.Done != 3 {
		t.Fatalf("Bulk = %+v, %v; want the three email lanes' copies", p, err)
	}
	for i, q := range lanes[:3] {
		if got := retrytest.TakeAll(t, conn, q); !cmp.Equal(got, map[string]int{fmt.Sprintf("m%d", i): 1}) {
			t.Errorf("%s holds %v", q, got)
		}
	}
	retrytest.Eventually(t, 5*time.Second, func() bool { return depth(t, conn, topo.Name(retry.DeadQueue)) == 1 }, "the webhook copy is not parked")
}
