package strategy

import (
	"context"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
)

// naive is the article's option A (nack with requeue) and, with once,
// Nanit's option 1 (requeue a delivery only if it is not a redelivery).
type naive struct {
	o    Options
	once bool
}

func (s *naive) Name() string {
	if s.once {
		return "naive-requeue-once"
	}
	return "naive-requeue"
}

func (s *naive) Describe() string {
	if s.once {
		return "Nanit option 1: on failure, nack with requeue=true unless the delivery is flagged redelivered; " +
			"a redelivered failure is nacked with requeue=false and the work queue dead-letters it. " +
			"One immediate retry, no delay; the flag also marks deliveries a crashed consumer never settled."
	}
	return "Article option A: on failure, nack with requeue=true. The broker puts the message back at the head " +
		"of its queue and delivers it again at once: no delay, no limit, and a message that keeps failing " +
		"keeps a consumer busy for as long as it fails."
}

func (s *naive) names() names { return names{s.o.Prefix} }

func (s *naive) Layout() Layout { return s.names().layout(s.once) }

func (s *naive) Plan() retry.Plan {
	n := s.names()
	var p retry.Plan
	var args amqp.Table
	if s.once {
		args = amqp.Table{"x-dead-letter-exchange": n.of(DeadExchange)}
	}
	n.ingress(&p, args)
	if s.once {
		n.park(&p)
		p.Moves = append(p.Moves, retry.Move{From: n.of(WorkQueue), To: n.of(WorkQueue), Label: "nack requeue=true, first delivery only"})
	} else {
		p.Moves = append(p.Moves, retry.Move{From: n.of(WorkQueue), To: n.of(WorkQueue), Label: "nack requeue=true"})
	}
	return p
}

func (s *naive) Declare(ctx context.Context, conn *amqp.Connection) error {
	return s.Plan().Declare(ctx, conn)
}

func (s *naive) Delete(conn *amqp.Connection) error { return s.Plan().Delete(conn) }

func (s *naive) Run(ctx context.Context, conn *amqp.Connection, h retry.Handler, observe func(Event)) error {
	queue := s.names().of(WorkQueue)
	return consume(ctx, conn, queue, s.o, func(ctx context.Context, _ *retry.Hop, d *amqp.Delivery) error {
		// Nothing counts the attempts: the handler only learns whether this
		// copy was delivered before.
		attempt := 1
		if d.Redelivered {
			attempt = 2
		}
		return handle(ctx, h, queue, d, attempt, func(error) error {
			if s.once && d.Redelivered {
				// The work queue dead-letters it: the broker's hop, not ours.
				tell(observe, Event{ID: d.MessageId, Outcome: retry.Parked, Reason: "redelivered"})
				return d.Nack(false, false /* requeue */)
			}
			tell(observe, Event{ID: d.MessageId, Outcome: retry.Retrying})
			return d.Nack(false, true /* requeue */)
		})
	})
}
