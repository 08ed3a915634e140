package retry_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"time"

	"github.com/relay-demo/relay/retry"
)

// This example is a whole retrying service: invoices published to the
// "billing" exchange with key "invoice.created" are handled; a failure
// waits 1s, 10s, then 1m, and is parked in dead-letter-queue after that,
// with its last error; an invoice that can never be processed is parked at
// once. Run reconnects whenever the broker goes away and, on Ctrl-C, lets
// the invoices in hand finish.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	p := retry.New(retry.Config{
		Topology: retry.Topology{
			Exchange:  "billing",
			QueueType: retry.Quorum,
			Policy:    retry.Policy{Delays: []time.Duration{time.Second, 10 * time.Second, time.Minute}},
		},
		Options: retry.Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))},
	})
	p.Handle("invoices", "invoice.created", retry.HandlerFunc(func(ctx context.Context, m *retry.Message) error {
		if len(m.Body) == 0 {
			return retry.Permanent(errors.New("empty invoice")) // parked at once
		}
		fmt.Printf("invoice %s, attempt %d\n", m.ID, m.Attempt)
		return nil // acked; any other error is retried
	}))
	p.ServeStages() // this process also moves failures through their waits
	if err := p.Run(ctx, "amqp://guest:guest@localhost:5672/"); err != nil {
		log.Fatal(err)
	}
}
