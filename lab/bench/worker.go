package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

// preloadWindow is the confirms outstanding while queues are filled
// before a timed run.
const preloadWindow = 256

// workerRows measures relay's consumer with a handler that does nothing
// against a raw consume-and-ack loop at the same prefetch, each draining a
// queue that was filled before the clock started.
func (b *bench) workerRows(ctx context.Context, qt retry.QueueType) ([]Row, error) {
	relay, raw, err := b.pair(ctx, "worker", qt,
		func(ctx context.Context) (side, error) { return b.workerRaw(ctx, qt) },
		func(ctx context.Context) (side, error) { return b.workerRelay(ctx, qt) })
	if err != nil {
		return nil, err
	}
	return []Row{{Queue: string(qt), Figure: FigWorkerRate, Unit: UnitRate, Relay: ptr(relay.Rate()), Raw: ptr(raw.Rate()),
		Target: &Target{Kind: RatioAtLeast, Value: 0.8}, RelayCost: &relay.Cost, RawCost: &raw.Cost}}, nil
}

// preload fills a queue through exchange and key with n persistent
// messages of the API's size, ids prefix0, prefix1, …
func (b *bench) preload(ctx context.Context, conn *amqp.Connection, exchange, key, prefix string, n int) error {
	body := messageBody()
	_, err := publishPipelined(ctx, conn, preloadWindow, n, false, func(i int) (string, string, amqp.Publishing) {
		return exchange, key, amqp.Publishing{ContentType: notification.ContentType, DeliveryMode: amqp.Persistent,
			MessageId: prefix + strconv.Itoa(i), Timestamp: time.Now(), Body: body}
	})
	if err != nil {
		return fmt.Errorf("preload %d messages: %w", n, err)
	}
	return nil
}

// workerRelay drains a work queue with retry.Consumer.
func (b *bench) workerRelay(ctx context.Context, qt retry.QueueType) (side, error) {
	ctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
	defer cancel()
	n := b.opts.Consume
	conn, err := retry.Dial(b.url, "relay-lab bench worker")
	if err != nil {
		return side{}, err
	}
	defer conn.Close()
	topo := retry.Topology{Prefix: b.names(qt, "worker-relay"), Routes: channel.Routes(), QueueType: qt, Backend: retry.TTL}
	b.janitor.topology(topo)
	if err := topo.Declare(ctx, conn); err != nil {
		return side{}, err
	}
	if err := b.preload(ctx, conn, topo.Ingress(), channel.Webhook.Name(), "w", n); err != nil {
		return side{}, err
	}
	var handled atomic.Int64
	drained := make(chan struct{})
	consumer := &retry.Consumer{Topology: topo, Queue: queueFor(topo, channel.Webhook.Name()),
		Options: retry.Options{Concurrency: b.opts.Concurrency, Prefetch: b.opts.Prefetch},
		Handler: retry.HandlerFunc(func(ctx context.Context, m *retry.Message) error {
			if handled.Add(1) == int64(n) {
				close(drained)
			}
			return nil
		})}
	m := startMeter(b.broker)
	start := time.Now()
	runCtx, stop := context.WithCancel(ctx)
	r := newRunner()
	r.start(func() error { return consumer.Run(runCtx, conn) })
	err = waitFor(ctx, drained, r, "relay consumer", func() int { return int(handled.Load()) }, n)
	elapsed := time.Since(start)
	var cost Cost
	if err == nil {
		cost = m.stop(n)
	} else {
		m.abort()
	}
	stop()
	if rerr := r.wait(); err == nil && rerr != nil {
		err = fmt.Errorf("relay consumer: %w", rerr)
	}
	if err != nil {
		return side{}, err
	}
	return side{N: n, Elapsed: elapsed, Cost: cost}, nil
}

// workerRaw drains a queue with goroutines that ack every delivery.
func (b *bench) workerRaw(ctx context.Context, qt retry.QueueType) (side, error) {
	ctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
	defer cancel()
	n := b.opts.Consume
	conn, err := retry.Dial(b.url, "relay-lab bench raw consumer")
	if err != nil {
		return side{}, err
	}
	defer conn.Close()
	queue := b.names(qt, "worker-raw") + "webhook"
	b.janitor.queue(queue)
	ch, err := conn.Channel()
	if err != nil {
		return side{}, fmt.Errorf("open channel: %w", err)
	}
	defer ch.Close()
	if err := declareQueue(ch, queue, queueArgs(qt, false)); err != nil {
		return side{}, err
	}
	if err := b.preload(ctx, conn, "", queue, "w", n); err != nil {
		return side{}, err
	}
	if err := ch.Qos(b.opts.Prefetch, 0, false /* global */); err != nil {
		return side{}, fmt.Errorf("set prefetch: %w", err)
	}
	var acked atomic.Int64
	drained := make(chan struct{})
	m := startMeter(b.broker)
	start := time.Now()
	deliveries, err := ch.Consume(queue, "relay-bench-raw",
		false, // autoAck
		false, // exclusive
		false, // noLocal
		false, // noWait
		nil)
	if err != nil {
		m.abort()
		return side{}, fmt.Errorf("consume %q: %w", queue, err)
	}
	// As many goroutines ack as relay's consumer has handlers: the same
	// concurrency, without the rest.
	r := newRunner()
	for range b.opts.Concurrency {
		r.start(func() error {
			for d := range deliveries {
				if err := d.Ack(false); err != nil {
					return err
				}
				if acked.Add(1) == int64(n) {
					close(drained)
				}
			}
			return errors.New("deliveries ended")
		})
	}
	err = waitFor(ctx, drained, r, "raw consumer", func() int { return int(acked.Load()) }, n)
	elapsed := time.Since(start)
	if err != nil {
		m.abort()
		return side{}, err
	}
	cost := m.stop(n)
	// Closing the channel ends the deliveries and so the loop.
	ch.Close()
	_ = r.wait()
	return side{N: n, Elapsed: elapsed, Cost: cost}, nil
}

// queueFor is the prefixed work queue of a channel.
func queueFor(topo retry.Topology, channel string) string {
	for _, r := range topo.WorkRoutes() {
		if r.Key == channel {
			return r.Queue
		}
	}
	return ""
}
