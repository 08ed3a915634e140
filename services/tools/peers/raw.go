package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
)

// rawPeer is the plainest correct DLX retry loop on amqp091-go: the work
// queue dead-letters a nacked message (requeue=false) into a wait queue
// whose x-message-ttl dead-letters it back; the retry count is the
// broker's x-death count; past the last retry the worker publishes the
// message to a park queue, waits for the confirm, and acks.
type rawPeer struct {
	o                Options
	w                Workload
	work, wait, park string
	conn             *amqp.Connection
	broker           string
}

func newRaw(o Options, w Workload) peer {
	name := uniqueName()
	return &rawPeer{o: o, w: w, work: name + ".work", wait: name + ".wait", park: name + ".park"}
}

func (r *rawPeer) Setup(ctx context.Context) error {
	conn, err := retry.Dial(r.o.AMQPURL, "bench-peers raw")
	if err != nil {
		return err
	}
	r.conn, r.broker = conn, brokerName(conn)
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open channel: %w", err)
	}
	defer ch.Close()
	queues := []struct {
		name string
		args amqp.Table
	}{
		{r.work, amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": r.wait}},
		{r.wait, amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": r.work, "x-message-ttl": r.w.Delay.Milliseconds()}},
		{r.park, nil},
	}
	for _, q := range queues {
		if _, err := ch.QueueDeclare(q.name,
			true,  // durable
			false, // autoDelete
			false, // exclusive
			false, // noWait
			q.args); err != nil {
			return fmt.Errorf("declare queue %q: %w", q.name, err)
		}
	}
	return nil
}

func (r *rawPeer) Enqueue(ctx context.Context, ids []string) error {
	return enqueueConfirmed(ctx, r.conn, "", r.work, ids)
}

func (r *rawPeer) Work(ctx context.Context, tr *tracker) error {
	conn, err := retry.Dial(r.o.AMQPURL, "bench-peers raw worker")
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open channel: %w", err)
	}
	if err := ch.Qos(2*r.w.Concurrency, 0, false /* global */); err != nil {
		return fmt.Errorf("set prefetch: %w", err)
	}
	// Parking publishes on a channel of its own in confirm mode.
	pch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open channel: %w", err)
	}
	if err := pch.Confirm(false /* noWait */); err != nil {
		return fmt.Errorf("enable publisher confirms: %w", err)
	}
	deliveries, err := ch.ConsumeWithContext(ctx, r.work, "bench-peers-raw",
		false, // autoAck
		false, // exclusive
		false, // noLocal
		false, // noWait
		nil)
	if err != nil {
		return fmt.Errorf("consume %q: %w", r.work, err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, r.w.Concurrency)
	for range r.w.Concurrency {
		wg.Go(func() {
			for d := range deliveries {
				if err := r.handle(ctx, pch, tr, &d); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait() // the deliveries end when ctx is done and the consumer is cancelled
	close(errs)
	return errors.Join(collect(errs)...)
}

func (r *rawPeer) handle(ctx context.Context, pch *amqp.Channel, tr *tracker, d *amqp.Delivery) error {
	attempt := deaths(d.Headers, r.work, "rejected") + 1
	if tr.Attempt(d.MessageId, attempt) == nil {
		return d.Ack(false)
	}
	if attempt <= r.w.MaxRetries {
		return d.Nack(false /* multiple */, false /* requeue */)
	}
	// The last retry failed: park it, confirmed, then ack.
	dc, err := pch.PublishWithDeferredConfirmWithContext(context.WithoutCancel(ctx), "", r.park,
		false, // mandatory
		false, // immediate
		amqp.Publishing{MessageId: d.MessageId, DeliveryMode: amqp.Persistent, Headers: d.Headers, ContentType: d.ContentType, Body: d.Body})
	if err != nil {
		return fmt.Errorf("park %s: %w", d.MessageId, err)
	}
	if ok, err := dc.WaitContext(context.WithoutCancel(ctx)); err != nil || !ok {
		return fmt.Errorf("park %s: not confirmed (%v)", d.MessageId, err)
	}
	return d.Ack(false)
}

// deaths is the count of the x-death entry for queue and reason: how often
// the broker dead-lettered the message from queue for that reason.
func deaths(h amqp.Table, queue, reason string) int {
	list, _ := h["x-death"].([]any)
	for _, e := range list {
		t, ok := e.(amqp.Table)
		if !ok || t["queue"] != queue || t["reason"] != reason {
			continue
		}
		if n, ok := t["count"].(int64); ok {
			return int(n)
		}
	}
	return 0
}

func collect(errs <-chan error) []error {
	var out []error
	for err := range errs {
		out = append(out, err)
	}
	return out
}

func (r *rawPeer) Parked(context.Context) (int, error) { return queueDepth(r.conn, r.park) }

func (r *rawPeer) Cleanup(context.Context) error {
	if r.conn == nil {
		return nil
	}
	defer r.conn.Close()
	return deleteQueues(r.conn, r.work, r.wait, r.park)
}

func (r *rawPeer) Server() string { return r.broker }

func (r *rawPeer) Settings() []string {
	return []string{
		fmt.Sprintf("classic queues: work queue dead-lettering into a wait queue (x-message-ttl %d) dead-lettering back", r.w.Delay.Milliseconds()),
		fmt.Sprintf("one channel, prefetch %d, %d goroutines acking; nack(requeue=false) to retry; the count is x-death's", 2*r.w.Concurrency, r.w.Concurrency),
		"parked: a park queue, published with a confirm before the ack",
	}
}
