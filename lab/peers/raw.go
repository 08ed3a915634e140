package peers

import (
	"context"
	"errors"
	"fmt"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
)

// rawPeer is the plainest correct retry loop on amqp091-go, the floor of
// each of relay's backends. The DLX loop (classic or quorum queues): the
// work queue dead-letters a nacked message (requeue=false) into a wait
// queue whose x-message-ttl dead-letters it back; the retry count is the
// broker's x-death count. The native loop (RabbitMQ 4.3): one quorum queue
// with x-delayed-retry-*, as relay's native backend declares it; the
// consumer rejects a failure (requeue=true) and the queue redelivers it
// after the delay; the count is x-delivery-count. Past the last retry the
// worker publishes the message to a park queue, waits for the confirm, and
// acks.
type rawPeer struct {
	o                Options
	w                Workload
	kind             rawKind
	work, wait, park string
	conn             *amqp.Connection
	broker           string
}

// rawKind is the kind of loop a rawPeer runs.
type rawKind int

const (
	rawClassic rawKind = iota // DLX loop on classic queues
	rawQuorum                 // DLX loop on quorum queues, at-least-once dead-lettering
	rawNative                 // RabbitMQ 4.3's delayed retry on one quorum queue
)

func newRaw(o Options, w Workload) peer { return newRawKind(rawClassic)(o, w) }

func newRawKind(kind rawKind) func(Options, Workload) peer {
	return func(o Options, w Workload) peer {
		name := uniqueName()
		return &rawPeer{o: o, w: w, kind: kind, work: name + ".work", wait: name + ".wait", park: name + ".park"}
	}
}

// queues are the queues the loop declares, with their arguments. Quorum
// queues that dead-letter take the at-least-once strategy with
// reject-publish overflow, as relay's quorum queues do.
func (r *rawPeer) queues() []struct {
	name string
	args amqp.Table
} {
	type q = struct {
		name string
		args amqp.Table
	}
	quorum := func(t amqp.Table) amqp.Table {
		t["x-queue-type"] = "quorum"
		t["x-dead-letter-strategy"] = "at-least-once"
		t["x-overflow"] = "reject-publish"
		return t
	}
	switch r.kind {
	case rawQuorum:
		return []q{
			{r.work, quorum(amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": r.wait})},
			{r.wait, quorum(amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": r.work, "x-message-ttl": r.w.Delay.Milliseconds()})},
			{r.park, amqp.Table{"x-queue-type": "quorum"}},
		}
	case rawNative:
		// The delivery limit is the backstop, as relay's: past it the
		// queue dead-letters to the park queue.
		return []q{
			{r.work, quorum(amqp.Table{
				"x-dead-letter-exchange": "", "x-dead-letter-routing-key": r.park,
				"x-delayed-retry-type": "failed",
				"x-delayed-retry-min":  r.w.Delay.Milliseconds(),
				"x-delayed-retry-max":  r.w.Delay.Milliseconds(),
				"x-delivery-limit":     int64(r.w.MaxRetries),
			})},
			{r.park, amqp.Table{"x-queue-type": "quorum"}},
		}
	}
	return []q{
		{r.work, amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": r.wait}},
		{r.wait, amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": r.work, "x-message-ttl": r.w.Delay.Milliseconds()}},
		{r.park, nil},
	}
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
	for _, q := range r.queues() {
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
	var attempt int
	if r.kind == rawNative {
		attempt = deliveryCount(d.Headers) + 1
	} else {
		attempt = deaths(d.Headers, r.work, "rejected") + 1
	}
	if tr.Attempt(d.MessageId, attempt) == nil {
		return d.Ack(false)
	}
	if attempt <= r.w.MaxRetries {
		if r.kind == rawNative {
			return d.Reject(true /* requeue: the queue delays it */)
		}
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

// deliveryCount is the quorum queue's x-delivery-count: how often the
// message was returned to the queue before this delivery.
func deliveryCount(h amqp.Table) int {
	switch n := h["x-delivery-count"].(type) {
	case int64:
		return int(n)
	case int32:
		return int(n)
	case int16:
		return int(n)
	case int8:
		return int(n)
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
	switch r.kind {
	case rawQuorum:
		return []string{
			fmt.Sprintf("quorum queues (x-dead-letter-strategy at-least-once, x-overflow reject-publish, as relay's): work queue dead-lettering into a wait queue (x-message-ttl %d) dead-lettering back", r.w.Delay.Milliseconds()),
			fmt.Sprintf("one channel, prefetch %d, %d goroutines acking; nack(requeue=false) to retry; the count is x-death's", 2*r.w.Concurrency, r.w.Concurrency),
			"parked: a park queue, published with a confirm before the ack",
		}
	case rawNative:
		return []string{
			fmt.Sprintf("one quorum queue with x-delayed-retry-type failed, x-delayed-retry-min and -max %d, x-delivery-limit %d, at-least-once dead-lettering to the park queue as the backstop (relay's native work queue's arguments)", r.w.Delay.Milliseconds(), r.w.MaxRetries),
			fmt.Sprintf("one channel, prefetch %d, %d goroutines acking; reject(requeue=true) to retry, the queue redelivers after the delay; the count is x-delivery-count", 2*r.w.Concurrency, r.w.Concurrency),
			"parked: a park queue, published with a confirm before the ack",
		}
	}
	return []string{
		fmt.Sprintf("classic queues: work queue dead-lettering into a wait queue (x-message-ttl %d) dead-lettering back", r.w.Delay.Milliseconds()),
		fmt.Sprintf("one channel, prefetch %d, %d goroutines acking; nack(requeue=false) to retry; the count is x-death's", 2*r.w.Concurrency, r.w.Concurrency),
		"parked: a park queue, published with a confirm before the ack",
	}
}
