package strategy

import (
	"context"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
)

// consume runs fn on each delivery of queue with retry.Serve, the loop
// relay's own pipeline runs on: o.Concurrency deliveries at a time, each
// worker with a Hop of its own, the work in hand finished (within the
// shutdown limit) when ctx ends. fn settles (acks, nacks) the delivery
// itself; an error it returns is a failed hand-off, and makes the worker's
// Hop be replaced if it broke.
func consume(ctx context.Context, conn *amqp.Connection, queue string, o Options,
	fn func(ctx context.Context, hop *retry.Hop, d *amqp.Delivery) error) error {
	return retry.Serve(ctx, conn, queue, retry.ServeOptions{Prefetch: o.prefetch(), Concurrency: o.concurrency(),
		Tag: "relay-strategy-" + queue}, fn)
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

// handle runs h on a work-queue delivery (retry.Call: a panic is a
// failure): nil acks it, an error is passed to fail, which settles it the
// strategy's way.
func handle(ctx context.Context, h retry.Handler, queue string, d *amqp.Delivery, attempt int, fail func(error) error) error {
	if err := retry.Call(ctx, h, message(queue, d, attempt)); err != nil {
		return fail(err)
	}
	return d.Ack(false)
}

// handOn publishes msg and acks d once the broker has confirmed it. If the
// publish fails, d goes back to its queue instead: the copy and the
// original are never both gone.
func handOn(ctx context.Context, hop *retry.Hop, d *amqp.Delivery, exchange, key string, msg amqp.Publishing) error {
	if err := hop.Publish(ctx, exchange, key, true /* mandatory */, msg); err != nil {
		_ = d.Nack(false, true /* requeue */)
		return err
	}
	return d.Ack(false)
}

// park parks d, with headers h, from source in the strategy's dead-letter
// queue (retry.Park) and acks it once the broker has confirmed the copy;
// if parking fails, d goes back to its queue.
func park(ctx context.Context, hop *retry.Hop, prefix string, d *amqp.Delivery, h amqp.Table, source, reason string, retries int) error {
	c := *d
	c.Headers = h
	if err := retry.Park(ctx, hop, retry.Topology{Prefix: prefix}, &c, source, reason, "", retries); err != nil {
		_ = d.Nack(false, true /* requeue */)
		return err
	}
	return d.Ack(false)
}

// tell reports e to observe, if there is one.
func tell(observe func(Event), e Event) {
	if observe != nil {
		observe(e)
	}
}
