package strategy

import (
	"context"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"
	"golang.org/x/sync/errgroup"

	"github.com/relay-demo/relay/retry"
)

// dlxRequeue is the article's option B: the work queue dead-letters a
// failure to error-exchange, and a requeue consumer sends it straight back
// to the tail of the queue it failed on, up to a count kept in a header.
type dlxRequeue struct{ o Options }

func (s *dlxRequeue) Name() string { return "dlx-requeue" }

func (s *dlxRequeue) Describe() string {
	return fmt.Sprintf("Article option B: on failure, nack with requeue=false; the work queue dead-letters the message "+
		"to error-exchange and requeue-queue. Its consumer counts the retry in x-retry-count and publishes the "+
		"message back to the tail of the queue it failed on at once; after %d retries it parks it. "+
		"No delay between attempts.", s.o.Policy.Retries())
}

func (s *dlxRequeue) names() names { return names{s.o.Prefix} }

func (s *dlxRequeue) Layout() Layout { return s.names().layout(true, RequeueQueue) }

func (s *dlxRequeue) Plan() retry.Plan {
	n := s.names()
	var p retry.Plan
	n.ingress(&p, amqp.Table{"x-dead-letter-exchange": n.of(ErrorExchange)})
	p.Exchanges = append(p.Exchanges, retry.Exchange{Name: n.of(ErrorExchange), Kind: amqp.ExchangeFanout})
	p.Queues = append(p.Queues, retry.Queue{Name: n.of(RequeueQueue)})
	p.Bindings = append(p.Bindings, retry.Binding{Exchange: n.of(ErrorExchange), Queue: n.of(RequeueQueue)})
	n.park(&p)
	p.Moves = append(p.Moves,
		retry.Move{From: n.of(RequeueQueue), To: n.of(WorkQueue), Label: "send back at once, count < max"},
		retry.Move{From: n.of(RequeueQueue), To: n.of(DeadExchange), Label: "park, count = max"})
	return p
}

func (s *dlxRequeue) Declare(ctx context.Context, conn *amqp.Connection) error {
	return s.Plan().Declare(ctx, conn)
}

func (s *dlxRequeue) Delete(conn *amqp.Connection) error { return s.Plan().Delete(conn) }

func (s *dlxRequeue) Run(ctx context.Context, conn *amqp.Connection, h retry.Handler, observe func(Event)) error {
	n := s.names()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return nackWork(gctx, conn, n.of(WorkQueue), s.o, h, retry.RetryCount) })
	g.Go(func() error {
		return consume(gctx, conn, n.of(RequeueQueue), s.o, func(ctx context.Context, hop *retry.Hop, d *amqp.Delivery) error {
			source, retries := sourceOf(d.Headers, n.of(WorkQueue)), retry.RetryCount(d.Headers)
			if source == "" || retries >= s.o.Policy.Retries() {
				reason := retry.ReasonMaxRetries
				if source == "" {
					source, reason = n.of(RequeueQueue), retry.ReasonNoSource
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
			// The default exchange routes to the queue named by the key.
			err := handOn(ctx, hop, d, "", source, retry.Republish(d, hd))
			if err == nil {
				tell(observe, Event{ID: d.MessageId, Outcome: retry.Retrying, Published: 1})
			}
			return err
		})
	})
	return g.Wait()
}

// nackWork consumes the work queue and nacks every failure without
// requeue, so the queue's dead-letter exchange takes it: the work consumer
// of every DLX-based strategy. retries reads the strategy's own count.
func nackWork(ctx context.Context, conn *amqp.Connection, queue string, o Options, h retry.Handler, retries func(amqp.Table) int) error {
	return consume(ctx, conn, queue, o, func(ctx context.Context, _ *retry.Hop, d *amqp.Delivery) error {
		return handle(ctx, h, queue, d, retries(d.Headers)+1, func(error) error {
			return d.Nack(false, false /* requeue */)
		})
	})
}
