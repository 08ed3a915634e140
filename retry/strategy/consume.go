package strategy

import (
	"context"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
)

// consume runs fn on each delivery of queue, n deliveries at a time, until
// ctx is done or the channel closes. fn settles (acks, nacks) the delivery
// itself. Deliveries in hand when ctx ends are finished; those prefetched
// but not started go back to the queue when the channel closes.
func consume(ctx context.Context, conn *amqp.Connection, queue string, o Options, fn func(context.Context, *amqp.Delivery)) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open consume channel: %w", err)
	}
	defer ch.Close()
	if err := ch.Qos(o.prefetch(), 0, false /* global */); err != nil {
		return fmt.Errorf("set prefetch on %q: %w", queue, err)
	}
	tag := "relay-strategy-" + queue
	deliveries, err := ch.Consume(queue, tag,
		false, // autoAck: every strategy settles by hand
		false, // exclusive
		false, // noLocal
		false, // noWait
		nil)
	if err != nil {
		return fmt.Errorf("consume %q: %w", queue, err)
	}
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	// The work in hand finishes even when ctx ends: a handler cut off
	// halfway would leave its delivery neither acked nor nacked.
	work := context.WithoutCancel(ctx)
	var wg sync.WaitGroup
	for range o.concurrency() {
		wg.Go(func() {
			for d := range deliveries {
				if ctx.Err() != nil {
					_ = d.Nack(false, true /* requeue */)
					continue
				}
				fn(work, &d)
			}
		})
	}
	select {
	case <-ctx.Done():
		err = nil
		_ = ch.Cancel(tag, false /* noWait */)
	case e := <-closed:
		err = fmt.Errorf("%w: consuming %q: %v", retry.ErrConnectionLost, queue, e)
	}
	wg.Wait()
	return err
}

// sourceOf is the queue a failed message goes back to: the strategy's own
// work queue when the message claims it, else "" — a message that names
// any other queue is parked as unknown-source, never sent there.
func sourceOf(h amqp.Table, work string) string {
	if q, _ := retry.Claim(h); q == work {
		return q
	}
	return ""
}

// message is the handler's view of a delivery on the work queue.
func message(queue string, d *amqp.Delivery, attempt int) *retry.Message {
	return &retry.Message{
		ID: d.MessageId, Queue: queue, Attempt: attempt, ContentType: d.ContentType,
		Headers: d.Headers, Body: d.Body, Redelivered: d.Redelivered,
	}
}

// handle runs h on a work-queue delivery: nil acks it, an error is passed to
// fail, which settles it the strategy's way.
func handle(ctx context.Context, h retry.Handler, queue string, d *amqp.Delivery, attempt int, fail func(error)) {
	if err := call(ctx, h, message(queue, d, attempt)); err != nil {
		fail(err)
		return
	}
	_ = d.Ack(false)
}

// call runs the handler and turns a panic into a failure.
func call(ctx context.Context, h retry.Handler, m *retry.Message) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panic: %v", r)
		}
	}()
	return h.Handle(ctx, m)
}

// perHop are headers the broker sets for one dead-lettering; they must not
// travel on when a client publishes the message again (RabbitMQ 4 ignores
// them anyway, and a stale x-death confuses the reader).
var perHop = []string{
	"x-death", "x-first-death-queue", "x-first-death-reason", "x-first-death-exchange",
	"x-last-death-queue", "x-last-death-reason", "x-last-death-exchange", "x-delivery-count",
}

// carry copies h without the per-hop headers, ready for a few more.
func carry(h amqp.Table) amqp.Table {
	out := make(amqp.Table, len(h)+4)
	for k, v := range h {
		out[k] = v
	}
	for _, k := range perHop {
		delete(out, k)
	}
	return out
}

// copyOf is the publishing that carries d on: its body and properties,
// persistent, with headers h.
func copyOf(d *amqp.Delivery, h amqp.Table) amqp.Publishing {
	return amqp.Publishing{
		Headers: h, ContentType: d.ContentType, ContentEncoding: d.ContentEncoding,
		DeliveryMode: amqp.Persistent, Priority: d.Priority, CorrelationId: d.CorrelationId,
		ReplyTo: d.ReplyTo, MessageId: d.MessageId, Timestamp: d.Timestamp, Type: d.Type,
		AppId: d.AppId, Body: d.Body,
	}
}

// handOn publishes msg and acks d once the broker has confirmed it. If the
// publish fails, d goes back to its queue instead: the copy and the
// original are never both gone.
func handOn(ctx context.Context, pub *retry.Publisher, d *amqp.Delivery, exchange, key string, msg amqp.Publishing) error {
	if err := pub.Publish(ctx, exchange, key, msg); err != nil {
		_ = d.Nack(false, true /* requeue */)
		return err
	}
	return d.Ack(false)
}

// parkCopy is d as the dead-letter exchange receives it: its headers, the
// queue it failed on and why it was given up on.
func parkCopy(d *amqp.Delivery, h amqp.Table, source, reason string) amqp.Publishing {
	h = carry(h)
	h[retry.HeaderDeadSource] = source
	h[retry.HeaderDeadReason] = reason
	h[retry.HeaderParkedAt] = time.Now().UTC().Format(time.RFC3339Nano)
	return copyOf(d, h)
}

// tell reports e to observe, if there is one.
func tell(observe func(Event), e Event) {
	if observe != nil {
		observe(e)
	}
}
