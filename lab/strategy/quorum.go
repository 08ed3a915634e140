package strategy

import (
	"context"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
)

// deliveryLimit leaves the counting to the broker: the work queue is a
// quorum queue with x-delivery-limit, the consumer rejects a failure with
// requeue, and the queue dead-letters a message whose delivery count passes
// the limit.
type deliveryLimit struct{ o Options }

func (s *deliveryLimit) Name() string { return "quorum-delivery-limit" }

func (s *deliveryLimit) Describe() string {
	return fmt.Sprintf("Quorum queue poison-message handling: webhook-queue is a quorum queue with "+
		"x-delivery-limit %d; the consumer rejects a failure with requeue=true and the broker redelivers it at "+
		"once, counting in x-delivery-count; past the limit the queue dead-letters it (at-least-once) to "+
		"dead-letter-exchange. No delay and no client-side count. RabbitMQ 4.3 counts basic.reject but no longer "+
		"basic.nack toward the limit, which is why this consumer rejects.", s.o.Policy.Retries())
}

func (s *deliveryLimit) names() names { return names{s.o.Prefix} }

func (s *deliveryLimit) Layout() Layout { return s.names().layout(true) }

// limit is the number of redeliveries allowed: the same number of retries
// as the other strategies give.
func (s *deliveryLimit) limit() int { return s.o.Policy.Retries() }

func (s *deliveryLimit) Plan() retry.Plan {
	n := s.names()
	var p retry.Plan
	n.ingress(&p, amqp.Table{
		"x-queue-type":           string(retry.Quorum),
		"x-delivery-limit":       int64(s.limit()),
		"x-dead-letter-exchange": n.of(DeadExchange),
		// At-least-once dead-lettering keeps the message in the source until
		// the dead-letter queue has confirmed it; it needs reject-publish.
		"x-dead-letter-strategy": "at-least-once",
		"x-overflow":             "reject-publish",
	})
	n.park(&p)
	p.Moves = append(p.Moves, retry.Move{From: n.of(WorkQueue), To: n.of(WorkQueue), Label: "reject requeue=true, x-delivery-count + 1"})
	return p
}

func (s *deliveryLimit) Declare(ctx context.Context, conn *amqp.Connection) error {
	return s.Plan().Declare(ctx, conn)
}

func (s *deliveryLimit) Delete(conn *amqp.Connection) error { return s.Plan().Delete(conn) }

func (s *deliveryLimit) Run(ctx context.Context, conn *amqp.Connection, h retry.Handler, observe func(Event)) error {
	queue := s.names().of(WorkQueue)
	return consume(ctx, conn, queue, s.o, func(ctx context.Context, _ *retry.Hop, d *amqp.Delivery) error {
		// The broker's count of earlier deliveries of this message.
		count := deliveryCount(d.Headers)
		return handle(ctx, h, queue, d, count+1, func(error) error {
			if count >= s.limit() {
				// This return passes the limit: the queue dead-letters it.
				tell(observe, Event{ID: d.MessageId, Outcome: retry.Parked, Reason: "delivery_limit"})
			} else {
				tell(observe, Event{ID: d.MessageId, Outcome: retry.Retrying})
			}
			return d.Reject(true /* requeue */)
		})
	})
}

// deliveryCount reads the quorum queue's x-delivery-count, zero on a first
// delivery.
func deliveryCount(h amqp.Table) int {
	switch v := h["x-delivery-count"].(type) {
	case int64:
		return int(v)
	case int32:
		return int(v)
	case int:
		return v
	}
	return 0
}
