//go:build integration

package retry_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// TestPublishers publishes a large batch and, while it is in flight,
// single messages from other goroutines, some unroutable, on a pool of
// three channels: every routed message arrives once and exactly the
// unbound ones come back as ErrUnroutable, as on one Publisher.
func TestPublishers(t *testing.T) {
	conn := retrytest.Conn(t)
	topo := retrytest.Declare(t, conn, retry.Topology{Backend: retry.TTL})
	ps, err := retry.NewPublishers(conn, 3, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	if ps.User() == "" {
		t.Errorf("User() = %q", ps.User())
	}
	batch := make([]retry.Outgoing, 2000)
	for i := range batch {
		batch[i] = retry.Outgoing{Exchange: topo.Ingress(), Key: "email",
			Msg: amqp.Publishing{MessageId: fmt.Sprint("b-", i), Body: []byte("{}"), DeliveryMode: amqp.Persistent}}
	}
	var wg sync.WaitGroup
	var batchErrs []error
	wg.Go(func() { batchErrs = ps.PublishAll(context.Background(), batch) })
	const n = 100
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			key := "email"
			if i%2 == 1 {
				key = "nowhere"
			}
			errs[i] = ps.Publish(context.Background(), topo.Ingress(), key, amqp.Publishing{
				MessageId: fmt.Sprint("m-", i), Body: []byte("{}"), DeliveryMode: amqp.Persistent})
		})
	}
	wg.Wait()
	for i, err := range batchErrs {
		if err != nil {
			t.Fatalf("batch message %d: %v", i, err)
		}
	}
	for i, err := range errs {
		if i%2 == 0 && err != nil {
			t.Errorf("routed publish %d: %v", i, err)
		}
		if i%2 == 1 && !errors.Is(err, retry.ErrUnroutable) {
			t.Errorf("unroutable publish %d = %v, want ErrUnroutable", i, err)
		}
	}
	if got := depth(t, conn, topo.WorkRoutes()[0].Queue); got != len(batch)+n/2 {
		t.Errorf("email queue holds %d, want %d", got, len(batch)+n/2)
	}
	if ps.Closed() {
		t.Error("Closed() with every channel open")
	}
	_ = ps.Close()
	if !ps.Closed() {
		t.Error("Closed() = false after Close")
	}
}
