package strategy

import (
	"context"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"
	"golang.org/x/sync/errgroup"

	"github.com/relay-demo/relay/retry"
)

// waitQueue is Nanit's option 2 with the retry threshold of the TTL delay
// post: the work queue dead-letters a failure to error-queue, whose
// consumer counts it in a header and puts it in one wait queue with a fixed
// TTL; the wait queue dead-letters it back to the queue it failed on. Past
// the limit the consumer parks it.
type waitQueue struct{ o Options }

func (s *waitQueue) Name() string { return "ttl-wait-queue" }

func (s *waitQueue) Describe() string {
	return fmt.Sprintf("Nanit option 2 with a retry threshold: nack to error-exchange and error-queue; its consumer "+
		"counts the retry in x-retry-count and publishes the message to wait-queue, whose x-message-ttl (%s) "+
		"dead-letters it through requeue-exchange back to the queue it failed on. After %d retries it parks it. "+
		"One constant delay for every retry.", s.delay(), s.o.Policy.Retries())
}

func (s *waitQueue) delay() retryDelay { return retryDelay(s.o.Policy.Delay(1)) }

func (s *waitQueue) names() names { return names{s.o.Prefix} }

func (s *waitQueue) Layout() Layout { return s.names().layout(true, ErrorQueue) }

func (s *waitQueue) Plan() retry.Plan {
	n := s.names()
	var p retry.Plan
	n.ingress(&p, amqp.Table{"x-dead-letter-exchange": n.of(ErrorExchange)})
	p.Exchanges = append(p.Exchanges, retry.Exchange{Name: n.of(ErrorExchange), Kind: amqp.ExchangeFanout})
	p.Queues = append(p.Queues, retry.Queue{Name: n.of(ErrorQueue)})
	p.Bindings = append(p.Bindings, retry.Binding{Exchange: n.of(ErrorExchange), Queue: n.of(ErrorQueue)})
	n.waitBack(&p, s.delay().ms())
	n.park(&p)
	p.Moves = append(p.Moves,
		retry.Move{From: n.of(ErrorQueue), To: n.of(WaitExchange), Label: "count < max: wait"},
		retry.Move{From: n.of(ErrorQueue), To: n.of(DeadExchange), Label: "count = max: park"})
	return p
}

func (s *waitQueue) Declare(ctx context.Context, conn *amqp.Connection) error {
	return s.Plan().Declare(ctx, conn)
}

func (s *waitQueue) Delete(conn *amqp.Connection) error { return s.Plan().Delete(conn) }

func (s *waitQueue) Run(ctx context.Context, conn *amqp.Connection, h retry.Handler, observe func(Event)) error {
	n := s.names()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return nackWork(gctx, conn, n.of(WorkQueue), s.o, h, retry.RetryCount) })
	g.Go(func() error {
		return consume(gctx, conn, n.of(ErrorQueue), s.o, func(ctx context.Context, hop *retry.Hop, d *amqp.Delivery) error {
			source, retries := sourceOf(d.Headers, n.of(WorkQueue)), retry.RetryCount(d.Headers)
			if source == "" || retries >= s.o.Policy.Retries() {
				reason := retry.ReasonMaxRetries
				if source == "" {
					source, reason = n.of(ErrorQueue), retry.ReasonNoSource
				}
				err := park(ctx, hop, s.o.Prefix, d, d.Headers, source, reason, retries)
				if err == nil {
					tell(observe, Event{ID: d.MessageId, Outcome: retry.Parked, Published: 1, Reason: reason})
				}
				return err
			}
			hd := retry.Forward(d.Headers)
			hd[retry.HeaderRetryCount] = int32(retries + 1)
			hd[retry.HeaderOriginalQueue] = source
			// The key survives the wait queue's dead-lettering and routes the
			// message back to the queue it names.
			err := handOn(ctx, hop, d, n.of(WaitExchange), source, retry.Republish(d, hd))
			if err == nil {
				tell(observe, Event{ID: d.MessageId, Outcome: retry.Retrying, Delay: s.delay().d(), Published: 1})
			}
			return err
		})
	})
	return g.Wait()
}
