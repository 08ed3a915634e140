package strategy

import (
	"context"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
)

// messageTTL is Nanit's option 3: the work consumer acks a failure and
// republishes it to one wait queue with a per-message expiration that grows
// with each retry. The broker only expires the message at the head of a
// queue, so a short wait queued behind a long one lasts as long as the long
// one: head-of-line blocking.
type messageTTL struct{ o Options }

func (s *messageTTL) Name() string { return "per-message-ttl" }

func (s *messageTTL) Describe() string {
	return fmt.Sprintf("Nanit option 3: on failure the work consumer publishes a copy to wait-queue with "+
		"expiration = %s × n for retry n, counting in x-retry-count, and acks the original once the copy is "+
		"confirmed; the expired copy dead-letters back through requeue-exchange. After %d retries it parks it. "+
		"A queue only expires the message at its head, so a short wait behind a longer one waits for it.",
		s.base(), s.o.Policy.Retries())
}

func (s *messageTTL) base() retryDelay { return retryDelay(s.o.Policy.Delay(1)) }

func (s *messageTTL) names() names { return names{s.o.Prefix} }

func (s *messageTTL) Layout() Layout { return s.names().layout(true) }

func (s *messageTTL) Plan() retry.Plan {
	n := s.names()
	var p retry.Plan
	n.ingress(&p, nil)
	n.waitBack(&p, 0)
	n.park(&p)
	p.Moves = append(p.Moves,
		retry.Move{From: n.of(WorkQueue), To: n.of(WaitExchange), Label: "ack + republish, expiration = base × n"},
		retry.Move{From: n.of(WorkQueue), To: n.of(DeadExchange), Label: "park after max"})
	return p
}

func (s *messageTTL) Declare(ctx context.Context, conn *amqp.Connection) error {
	return s.Plan().Declare(ctx, conn)
}

func (s *messageTTL) Delete(conn *amqp.Connection) error { return s.Plan().Delete(conn) }

func (s *messageTTL) Run(ctx context.Context, conn *amqp.Connection, h retry.Handler, observe func(Event)) error {
	n := s.names()
	queue := n.of(WorkQueue)
	return consume(ctx, conn, queue, s.o, func(ctx context.Context, hop *retry.Hop, d *amqp.Delivery) error {
		retries := retry.RetryCount(d.Headers)
		return handle(ctx, h, queue, d, retries+1, func(cause error) error {
			if retries >= s.o.Policy.Retries() {
				c := *d
				c.Headers = retry.Forward(d.Headers)
				c.Headers[retry.HeaderLastError] = cause.Error()
				err := park(ctx, hop, s.o.Prefix, d, c.Headers, queue, retry.ReasonMaxRetries, retries)
				if err == nil {
					tell(observe, Event{ID: d.MessageId, Outcome: retry.Parked, Published: 1, Reason: retry.ReasonMaxRetries})
				}
				return err
			}
			hd := retry.Forward(d.Headers)
			hd[retry.HeaderRetryCount] = int32(retries + 1)
			msg := retry.Republish(d, hd)
			msg.Expiration = Expiration(s.base().d(), retries+1)
			err := handOn(ctx, hop, d, n.of(WaitExchange), queue, msg)
			if err == nil {
				wait := time.Duration(retries+1) * s.base().d()
				tell(observe, Event{ID: d.MessageId, Outcome: retry.Retrying, Delay: wait, Published: 1})
			}
			return err
		})
	})
}
