package strategy

import (
	"context"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"
	"golang.org/x/sync/errgroup"

	"github.com/relay-demo/relay/retry"
)

// Headers of the retry-aware strategy.
const (
	// HeaderRetryMax is a message's own number of failed deliveries per
	// cycle, overriding the policy.
	HeaderRetryMax = "x-retry-max"
	// HeaderRetryTotal counts every failure of the message over its whole
	// life; a replay from the dead-letter queue does not reset it.
	HeaderRetryTotal = "x-retry-total"
	// UrgentQueue receives a copy of every parked message from the work
	// queue whose priority header is "high".
	UrgentQueue = DeadQueue + ".urgent"
)

// retryAware does what the retry-aware dead-letter exchange plugin does
// inside the broker, with a consumer: per-message limits, cycle-aware
// counting, and dead letters routed by headers.
type retryAware struct{ o Options }

func (s *retryAware) Name() string { return "retry-aware-dlx" }

func (s *retryAware) Describe() string {
	return fmt.Sprintf("The retry-aware DLX idea, done by a consumer: nack to error-queue; the consumer adds one to "+
		"x-retry-total (never reset) and parks when x-retry-total %% max == 0, where max is the message's own "+
		"x-retry-max or %d failures; otherwise the message waits %s in wait-queue and goes back. Parking goes "+
		"through the headers exchange with x-dead-source, where dead-letter-queue.urgent is bound on "+
		"x-dead-source and priority=high. A message replayed from the dead-letter queue starts a fresh cycle.",
		s.limit(), s.delay())
}

// limit is the default number of failed deliveries per cycle: one more
// than the retries, so a cycle has as many retries as the other strategies.
func (s *retryAware) limit() int { return s.o.Policy.Retries() + 1 }

func (s *retryAware) delay() retryDelay { return retryDelay(s.o.Policy.Delay(1)) }

func (s *retryAware) names() names { return names{s.o.Prefix} }

func (s *retryAware) Layout() Layout {
	n := s.names()
	l := n.layout(true, ErrorQueue)
	l.Copies = []string{n.of(UrgentQueue)}
	return l
}

func (s *retryAware) Plan() retry.Plan {
	n := s.names()
	var p retry.Plan
	n.ingress(&p, amqp.Table{"x-dead-letter-exchange": n.of(ErrorExchange)})
	p.Exchanges = append(p.Exchanges, retry.Exchange{Name: n.of(ErrorExchange), Kind: amqp.ExchangeFanout})
	p.Queues = append(p.Queues, retry.Queue{Name: n.of(ErrorQueue)})
	p.Bindings = append(p.Bindings, retry.Binding{Exchange: n.of(ErrorExchange), Queue: n.of(ErrorQueue)})
	n.waitBack(&p, s.delay().ms())
	n.park(&p)
	p.Queues = append(p.Queues, retry.Queue{Name: n.of(UrgentQueue)})
	// A headers exchange ignores the routing key; this one only labels the
	// binding in listings and diagrams.
	p.Bindings = append(p.Bindings, retry.Binding{Exchange: n.of(DeadExchange), Queue: n.of(UrgentQueue), Key: "source+priority=high",
		Args: amqp.Table{"x-match": "all", retry.HeaderDeadSource: n.of(WorkQueue), "priority": "high"}})
	p.Moves = append(p.Moves,
		retry.Move{From: n.of(ErrorQueue), To: n.of(WaitExchange), Label: "total % max != 0: wait"},
		retry.Move{From: n.of(ErrorQueue), To: n.of(DeadExchange), Label: "total % max == 0: park with x-dead-source"})
	return p
}

func (s *retryAware) Declare(ctx context.Context, conn *amqp.Connection) error {
	return s.Plan().Declare(ctx, conn)
}

func (s *retryAware) Delete(conn *amqp.Connection) error { return s.Plan().Delete(conn) }

// total reads HeaderRetryTotal, zero when absent.
func total(h amqp.Table) int {
	return retry.RetryCount(amqp.Table{retry.HeaderRetryCount: h[HeaderRetryTotal]})
}

// limitOf is the message's own HeaderRetryMax when it has a positive one,
// else def.
func limitOf(h amqp.Table, def int) int {
	if n := retry.RetryCount(amqp.Table{retry.HeaderRetryCount: h[HeaderRetryMax]}); n > 0 {
		return n
	}
	return def
}

func (s *retryAware) Run(ctx context.Context, conn *amqp.Connection, h retry.Handler, observe func(Event)) error {
	n := s.names()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return nackWork(gctx, conn, n.of(WorkQueue), s.o, h, total) })
	g.Go(func() error {
		return consume(gctx, conn, n.of(ErrorQueue), s.o, func(ctx context.Context, hop *retry.Hop, d *amqp.Delivery) error {
			source := sourceOf(d.Headers, n.of(WorkQueue))
			count := total(d.Headers) + 1
			hd := retry.Forward(d.Headers)
			hd[HeaderRetryTotal] = int32(count)
			if source == "" || Parks(count, limitOf(d.Headers, s.limit())) {
				reason := retry.ReasonMaxRetries
				if source == "" {
					source, reason = n.of(ErrorQueue), retry.ReasonNoSource
				}
				err := park(ctx, hop, s.o.Prefix, d, hd, source, reason, count)
				if err == nil {
					tell(observe, Event{ID: d.MessageId, Outcome: retry.Parked, Published: 1, Reason: reason})
				}
				return err
			}
			hd[retry.HeaderOriginalQueue] = source
			err := handOn(ctx, hop, d, n.of(WaitExchange), source, retry.Republish(d, hd))
			if err == nil {
				tell(observe, Event{ID: d.MessageId, Outcome: retry.Retrying, Delay: s.delay().d(), Published: 1})
			}
			return err
		})
	})
	return g.Wait()
}
