package retry_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/relay-demo/relay/retry"
)

// DeadLetters lists, replays and purges what the pipeline parked. Each
// parked message says where it came from (x-dead-source), why
// (ReasonPermanent, ReasonMaxRetries, ...), after how many retries, and its
// last error. A replay sends it back to that queue with a fresh retry
// count and its history kept; the parked copy goes once the broker has
// confirmed the new one.
func ExampleDeadLetters() {
	ctx := context.Background()
	topo := retry.Topology{Routes: []retry.Route{{Queue: "invoices", Key: "invoice.created"}}}
	conn, err := retry.Dial("amqp://guest:guest@localhost:5672/", "dead letters example")
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	dl := retry.DeadLetters{Conn: conn, Topology: topo}

	parked, err := dl.List(ctx, retry.Filter{Source: topo.Name("invoices")}, 20)
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range parked {
		fmt.Printf("%s from %s: %s after %d retries: %s\n", p.ID, p.Source, p.Reason, p.Retries, p.LastError)
	}

	// The bug is fixed: try invoice inv-42 again.
	if _, err := dl.Replay(ctx, retry.Filter{ID: "inv-42"}); err != nil {
		log.Fatal(err) // retry.ErrNotParked if it is not there
	}
}

// Bulk replays every parked message a filter selects, as a long job does:
// first a dry run (Count), then one pass over the queue that keeps counts,
// never the messages. With a Journal kept somewhere that outlives the
// process, a pass that resumes a job after a crash skips the copies the
// journal says went already.
func ExampleDeadLetters_Bulk() {
	ctx := context.Background()
	topo := retry.Topology{Routes: []retry.Route{{Queue: "invoices", Key: "invoice.created"}}}
	conn, err := retry.Dial("amqp://guest:guest@localhost:5672/", "bulk replay example")
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	dl := retry.DeadLetters{Conn: conn, Topology: topo}

	// The provider was down yesterday morning: its timeouts are worth
	// another round, nothing else is.
	f := retry.Filter{Route: "invoice.created", Reason: retry.ReasonMaxRetries, Error: "timeout",
		Since: time.Date(2026, 3, 14, 6, 0, 0, 0, time.UTC), Until: time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)}
	n, err := dl.Count(ctx, f)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d to replay\n", n)
	p, err := dl.Bulk(ctx, retry.Bulk{Filter: f, Progress: func(p retry.Progress) {
		if p.Matched%1000 == 0 {
			fmt.Printf("%d of %d replayed\n", p.Done, n)
		}
	}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("replayed %d, %d left parked: %s\n", p.Done, p.Failed, p.LastError)
}
