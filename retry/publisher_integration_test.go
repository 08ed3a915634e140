//go:build integration

package retry_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// TestPublisherConcurrent publishes from many goroutines at once, half to a
// bound key and half to an unbound one: every routed message arrives, and
// exactly the unbound ones come back as ErrUnroutable.
func TestPublisherConcurrent(t *testing.T) {
	conn := retrytest.Conn(t)
	topo := retrytest.Declare(t, conn, retry.Topology{Backend: retry.TTL})
	pub, err := retry.NewPublisher(conn, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()

	const n = 200
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := "email"
			if i%2 == 1 {
				key = "nowhere"
			}
			errs[i] = pub.Publish(context.Background(), topo.Ingress(), key, amqp.Publishing{
				MessageId: fmt.Sprint("m-", i), Body: []byte("{}"), DeliveryMode: amqp.Persistent})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if i%2 == 0 && err != nil {
			t.Errorf("routed publish %d: %v", i, err)
		}
		if i%2 == 1 && !errors.Is(err, retry.ErrUnroutable) {
			t.Errorf("unroutable publish %d = %v, want ErrUnroutable", i, err)
		}
	}
	if got := depth(t, conn, topo.WorkRoutes()[0].Queue); got != n/2 {
		t.Errorf("email queue holds %d, want %d", got, n/2)
	}
}

func TestPublisherAfterClose(t *testing.T) {
	conn := retrytest.Conn(t)
	pub, err := retry.NewPublisher(conn, 0)
	if err != nil {
		t.Fatal(err)
	}
	pub.Close()
	err = pub.Publish(context.Background(), "", "x", amqp.Publishing{})
	if !errors.Is(err, retry.ErrClosed) {
		t.Fatalf("publish after close = %v, want ErrClosed", err)
	}
}

// TestPublisherChannelClosedByBroker: a publish the broker answers by
// closing the channel (here, to an exchange that does not exist) returns
// an error instead of hanging.
func TestPublisherChannelClosedByBroker(t *testing.T) {
	conn := retrytest.Conn(t)
	pub, err := retry.NewPublisher(conn, 0)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- pub.Publish(context.Background(), "no-such-exchange-"+retrytest.Prefix(t), "k", amqp.Publishing{MessageId: "m1"})
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("publish to a missing exchange succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("publish hung after the broker closed the channel")
	}
	if !pub.Closed() {
		t.Error("publisher does not report its closed channel")
	}
}
