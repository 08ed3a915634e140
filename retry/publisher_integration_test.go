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

// TestPublisherPublishAll sends more messages than the publisher has slots,
// to a queue that takes two and refuses the rest with a negative confirm
// and to a key no queue is bound to: each message gets its own outcome,
// and the call returns instead of waiting for a slot it holds itself.
func TestPublisherPublishAll(t *testing.T) {
	conn := retrytest.Conn(t)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	queue := retrytest.Prefix(t) + "publish-all"
	if _, err := ch.QueueDeclare(queue,
		false, // durable
		false, // autoDelete
		false, // exclusive
		false, // noWait
		amqp.Table{"x-max-length": int64(2), "x-overflow": "reject-publish"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := conn.Channel()
		if err != nil {
			t.Errorf("delete %s: %v", queue, err)
			return
		}
		defer c.Close()
		if _, err := c.QueueDelete(queue, false /* ifUnused */, false /* ifEmpty */, false /* noWait */); err != nil {
			t.Errorf("delete %s: %v", queue, err)
		}
	})
	pub, err := retry.NewPublisher(conn, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()

	var msgs []retry.Outgoing
	for i := range 8 {
		key := queue
		if i == 7 {
			key = "nowhere-" + queue
		}
		msgs = append(msgs, retry.Outgoing{Exchange: "", Key: key,
			Msg: amqp.Publishing{MessageId: fmt.Sprint("m-", i), Body: []byte("{}"), DeliveryMode: amqp.Persistent}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := pub.PublishAll(ctx, msgs)
	for i, err := range errs {
		switch {
		case i < 2 && err != nil:
			t.Errorf("message %d = %v, want it taken", i, err)
		case i >= 2 && i < 7 && !errors.Is(err, retry.ErrNacked):
			t.Errorf("message %d = %v, want ErrNacked", i, err)
		case i == 7 && !errors.Is(err, retry.ErrUnroutable):
			t.Errorf("message %d = %v, want ErrUnroutable", i, err)
		}
	}
	if got := depth(t, conn, queue); got != 2 {
		t.Errorf("queue holds %d, want 2", got)
	}
	// Every slot is free again.
	if err := pub.Publish(ctx, "", "nowhere-"+queue, amqp.Publishing{MessageId: "after"}); !errors.Is(err, retry.ErrUnroutable) {
		t.Errorf("publish after PublishAll = %v, want ErrUnroutable", err)
	}
}
