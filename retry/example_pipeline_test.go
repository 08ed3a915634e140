package retry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
)

// Use wraps every handler of the pipeline in middleware, the way net/http
// middleware wraps a handler: here, a body that is not JSON can never be
// handled, so it is parked at once rather than retried. The middleware is
// a plain function of a Handler, so it is called here on its own too.
func ExamplePipeline_Use() {
	jsonOnly := func(next retry.Handler) retry.Handler {
		return retry.HandlerFunc(func(ctx context.Context, m *retry.Message) error {
			if !json.Valid(m.Body) {
				return retry.Permanent(errors.New("body is not JSON"))
			}
			return next.Handle(ctx, m)
		})
	}
	invoices := retry.HandlerFunc(func(_ context.Context, m *retry.Message) error {
		fmt.Printf("invoice %s handled\n", m.ID)
		return nil
	})

	p := retry.New(retry.Config{})
	p.Use(jsonOnly) // around every handler, the first outermost
	p.Handle("invoices", "invoice.created", invoices)

	h := jsonOnly(invoices)
	for _, m := range []*retry.Message{{ID: "inv-1", Body: []byte(`{"total": 12}`)}, {ID: "inv-2", Body: []byte("<xml/>")}} {
		if err := h.Handle(context.Background(), m); err != nil {
			fmt.Printf("invoice %s: %v (permanent: %t)\n", m.ID, err, retry.IsPermanent(err))
		}
	}
	// Output:
	// invoice inv-1 handled
	// invoice inv-2: body is not JSON (permanent: true)
}

// A Producer publishes to the pipeline's ingress exchange, so a service
// sends with the same value it consumes with. It declares the topology
// first: a message published before Run starts waits in its queue.
func ExamplePipeline_Producer() {
	ctx := context.Background()
	url := "amqp://guest:guest@localhost:5672/"
	p := retry.New(retry.Config{Topology: retry.Topology{Exchange: "billing"}})
	p.Handle("invoices", "invoice.created", retry.HandlerFunc(func(_ context.Context, m *retry.Message) error {
		fmt.Printf("invoice %s: %s\n", m.ID, m.Body)
		return nil
	}))
	p.ServeStages()

	pub, err := p.Producer(ctx, url)
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	err = pub.Publish(ctx, "invoice.created", amqp.Publishing{
		MessageId: "inv-42", Timestamp: time.Now(), ContentType: "application/json", Body: []byte(`{"total": 12}`)})
	if err != nil {
		log.Fatal(err) // the broker did not take it: ErrUnroutable, ErrNacked, ErrNotConnected while it reconnects
	}
	if err := p.Run(ctx, url); err != nil {
		log.Fatal(err)
	}
}
