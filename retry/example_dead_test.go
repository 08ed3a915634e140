package retry_test

import (
	"context"
	"fmt"
	"log"

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
