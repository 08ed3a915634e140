package peers

import (
	"context"
	"fmt"
	"sync/atomic"

	amqp "github.com/rabbitmq/amqp091-go"
	"golang.org/x/sync/errgroup"

	"github.com/relay-demo/relay/retry"
)

// brokerName is the broker's product and version from the properties it
// sent when conn opened: "RabbitMQ 3.10.8".
func brokerName(conn *amqp.Connection) string {
	product, _ := conn.Properties["product"].(string)
	version, _ := conn.Properties["version"].(string)
	if product == "" {
		product = "AMQP broker"
	}
	return product + " " + version
}

// queueDepth is the number of ready messages in queue, asked on a channel
// of its own: a failed passive declare closes its channel.
func queueDepth(conn *amqp.Connection, queue string) (int, error) {
	ch, err := conn.Channel()
	if err != nil {
		return 0, fmt.Errorf("open channel: %w", err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue,
		true,  // durable
		false, // autoDelete
		false, // exclusive
		false, // noWait
		nil)
	if err != nil {
		return 0, fmt.Errorf("inspect queue %q: %w", queue, err)
	}
	return q.Messages, nil
}

// deleteQueues deletes queues, messages and all, each on a channel of its
// own, going on past one already gone; it returns the first other error.
func deleteQueues(conn *amqp.Connection, queues ...string) error {
	var first error
	for _, q := range queues {
		ch, err := conn.Channel()
		if err != nil {
			return fmt.Errorf("open channel: %w", err)
		}
		_, err = ch.QueueDelete(q,
			false, // ifUnused
			false, // ifEmpty
			false) // noWait
		if err != nil && !isNotFound(err) && first == nil {
			first = fmt.Errorf("delete queue %q: %w", q, err)
		}
		if !ch.IsClosed() {
			ch.Close()
		}
	}
	return first
}

func isNotFound(err error) bool {
	e, ok := err.(*amqp.Error)
	return ok && e.Code == amqp.NotFound
}

// enqueueConfirmed publishes one persistent message per id with publisher
// confirms, through relay's Publisher (mandatory, one confirm awaited per
// publish, many in flight from several goroutines): the producer side of
// relay and of the raw loop alike.
func enqueueConfirmed(ctx context.Context, conn *amqp.Connection, exchange, key string, ids []string) error {
	pub, err := retry.NewPublisher(conn, 256)
	if err != nil {
		return err
	}
	defer pub.Close()
	return enqueueAll(ctx, ids, 64, func(ctx context.Context, id string) error {
		msg := amqp.Publishing{MessageId: id, DeliveryMode: amqp.Persistent, ContentType: "text/plain", Body: []byte(id)}
		return pub.Publish(ctx, exchange, key, msg)
	})
}

// enqueueAll calls enqueue once per id from workers goroutines, which
// take the ids in order; the first error stops the rest.
func enqueueAll(ctx context.Context, ids []string, workers int, enqueue func(ctx context.Context, id string) error) error {
	g, ctx := errgroup.WithContext(ctx)
	var next atomic.Int64
	for range workers {
		g.Go(func() error {
			for i := int(next.Add(1) - 1); i < len(ids); i = int(next.Add(1) - 1) {
				if err := enqueue(ctx, ids[i]); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
}
