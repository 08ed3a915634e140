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

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
)

// This example puts the retry pipeline in front of one queue of your own,
// "invoices", and runs a handler on it: failures wait 1s, 10s, then 1m,
// and are parked in dead-letter-queue after that; an invoice that can never
// be processed is parked at once.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	url := "amqp://guest:guest@localhost:5672/"
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))

	policy := retry.Policy{Delays: []time.Duration{time.Second, 10 * time.Second, time.Minute}}
	backend, err := retry.DetectBackend(url, retry.Auto) // the plugin if the broker has it, else TTL queues
	if err != nil {
		log.Fatal(err)
	}
	topo := retry.Topology{
		Exchange:  "billing",
		Routes:    []retry.Route{{Queue: "invoices", Key: "invoice.created"}},
		QueueType: retry.Quorum,
		Backend:   backend,
		Policy:    policy,
	}

	handle := retry.HandlerFunc(func(ctx context.Context, m *retry.Message) error {
		if len(m.Body) == 0 {
			return retry.Permanent(errors.New("empty invoice")) // parked at once
		}
		fmt.Printf("invoice %s, attempt %d\n", m.ID, m.Attempt)
		return nil // ack; any other error is retried
	})

	// Supervise reconnects whenever the broker goes away; each connection
	// declares the topology (idempotent) and runs both sides until it drops.
	err = retry.Supervise(ctx, url, "billing worker", logger, func(ctx context.Context, conn *amqp.Connection) error {
		if err := topo.Declare(ctx, conn); err != nil {
			return err
		}
		stages := &retry.Stages{Topology: topo, Logger: logger}
		consumer := &retry.Consumer{Topology: topo, Queue: topo.WorkRoutes()[0].Queue, Handler: handle, Logger: logger}
		errs := make(chan error, 2)
		go func() { errs <- stages.Run(ctx, conn) }()
		go func() { errs <- consumer.Run(ctx, conn) }()
		return errors.Join(<-errs, <-errs)
	})
	if err != nil {
		log.Fatal(err)
	}
}
