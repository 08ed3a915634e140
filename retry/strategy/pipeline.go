package strategy

import (
	"context"
	"errors"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"
	"golang.org/x/sync/errgroup"

	"github.com/relay-demo/relay/retry"
)

// pipeline is relay's own retry pipeline, exactly as the services run it:
// retry.Topology, retry.Consumer on the work queue and retry.Stages behind
// it. With the Plugin backend it is the article's option C
// (delayed-exchange); with the TTL backend, one wait queue per delay step
// (ttl-tiers).
type pipeline struct {
	o       Options
	backend retry.Backend
}

func (s *pipeline) Name() string {
	if s.backend == retry.Plugin {
		return "delayed-exchange"
	}
	return "ttl-tiers"
}

func (s *pipeline) Describe() string {
	if s.backend == retry.Plugin {
		return fmt.Sprintf("Article option C, relay's default pipeline: nack to error-exchange; the error stage counts in "+
			"x-retry-count and publishes to an x-delayed-message wait-exchange with x-delay = the policy's delay "+
			"(%s); the requeue stage sends the message back; past the last retry it is parked. "+
			"Needs the rabbitmq_delayed_message_exchange plugin.", s.o.Policy)
	}
	return fmt.Sprintf("relay's default pipeline with the TTL backend: the error stage publishes each retry to the "+
		"wait queue of its delay step (%s), one queue per step, each with its own x-message-ttl, so every "+
		"message in a wait queue expires in the order it arrived.", s.o.Policy)
}

// topology is the pipeline's retry.Topology, with the workshop's one route.
func (s *pipeline) topology() retry.Topology {
	return retry.Topology{
		Prefix:  s.o.Prefix,
		Routes:  []retry.Route{{Queue: WorkQueue, Key: RoutingKey}},
		Backend: s.backend,
		Policy:  s.o.Policy,
	}
}

func (s *pipeline) Layout() Layout {
	t := s.topology()
	return Layout{Exchange: t.Ingress(), Key: RoutingKey, WorkQueue: t.Name(WorkQueue), DeadQueue: t.Name(retry.DeadQueue)}
}

func (s *pipeline) Plan() retry.Plan { return s.topology().Plan() }

func (s *pipeline) Declare(ctx context.Context, conn *amqp.Connection) error {
	if s.backend == retry.Plugin {
		if err := s.probe(); err != nil {
			return err
		}
	}
	return s.topology().Declare(ctx, conn)
}

// probe asks the broker whether it has the delayed-message exchange type.
// Declaring an unknown type closes the whole connection, so HasPlugin
// probes on a connection of its own.
func (s *pipeline) probe() error {
	if s.o.URL == "" {
		return errors.New("delayed-exchange needs Options.URL to probe the broker for the delayed-message plugin")
	}
	plugin, err := retry.HasPlugin(s.o.URL)
	if err != nil {
		return err
	}
	if !plugin {
		return fmt.Errorf("%w: it has no x-delayed-message exchange type "+
			"(the rabbitmq_delayed_message_exchange plugin is not enabled); ttl-tiers runs the same pipeline without it", ErrUnsupported)
	}
	return nil
}

func (s *pipeline) Delete(conn *amqp.Connection) error { return s.topology().Delete(conn) }

func (s *pipeline) Run(ctx context.Context, conn *amqp.Connection, h retry.Handler, observe func(Event)) error {
	t := s.topology()
	stages := &retry.Stages{
		Topology: t, Prefetch: s.o.prefetch(), Concurrency: s.o.concurrency(),
		Observe: func(e retry.Event) {
			// Each decision the stages report went with one confirmed publish.
			switch e.Outcome {
			case retry.Retrying, retry.Requeued, retry.Waiting, retry.Parked:
				tell(observe, Event{ID: e.MessageID, Outcome: e.Outcome, Delay: e.Delay, Published: 1, Reason: e.Reason})
			}
		},
	}
	work := &retry.Consumer{
		Topology: t, Queue: t.Name(WorkQueue), Handler: h,
		Prefetch: s.o.prefetch(), Concurrency: s.o.concurrency(),
		Observe: func(e retry.Event) {
			// The consumer hands every failure to the error exchange (a
			// publish) and parks a permanent one itself.
			switch e.Outcome {
			case retry.Failed, retry.Parked:
				tell(observe, Event{ID: e.MessageID, Outcome: e.Outcome, Published: 1, Reason: e.Reason})
			}
		},
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return stages.Run(gctx, conn) })
	g.Go(func() error { return work.Run(gctx, conn) })
	return g.Wait()
}
