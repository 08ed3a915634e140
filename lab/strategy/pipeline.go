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
// it. The backend makes the strategy: with Plugin it is the article's
// option C (delayed-exchange); with TTL, one wait queue per delay step
// (ttl-tiers); with Levels, binary delay levels (delay-levels); with
// Native, RabbitMQ 4.3's delayed retry in the quorum work queue itself
// (native-delayed-retry). The hand-off is the article's stages, or with
// DirectSuffix the worker's own publish to wait (retry.Direct).
type pipeline struct {
	o       Options
	backend retry.Backend
	handoff retry.Handoff
}

func (s *pipeline) Name() string {
	name := map[retry.Backend]string{
		retry.Plugin: "delayed-exchange", retry.TTL: "ttl-tiers", retry.Levels: "delay-levels", retry.Native: "native-delayed-retry",
	}[s.backend]
	if s.handoff == retry.Direct {
		name += DirectSuffix
	}
	return name
}

func (s *pipeline) Describe() string {
	var d string
	switch s.backend {
	case retry.Plugin:
		d = fmt.Sprintf("Article option C, relay's default pipeline: nack to error-exchange; the error stage counts in "+
			"x-retry-count and publishes to an x-delayed-message wait-exchange with x-delay = the policy's delay "+
			"(%s); the requeue stage sends the message back; past the last retry it is parked. "+
			"Needs the rabbitmq_delayed_message_exchange plugin.", s.o.Policy)
	case retry.TTL:
		d = fmt.Sprintf("relay's default pipeline with the TTL backend: the error stage publishes each retry to the "+
			"wait queue of its delay step (%s), one queue per step, each with its own x-message-ttl, so every "+
			"message in a wait queue expires in the order it arrived.", s.o.Policy)
	case retry.Levels:
		d = fmt.Sprintf("relay's default pipeline with binary delay levels, what auto picks without the plugin before "+
			"RabbitMQ 4.3: level k is a queue (wait.level.00 to wait.level.31) that holds a message 2^k ms; the error "+
			"stage publishes each retry (%s) to the level of its delay's highest bit, with a routing key of one word "+
			"per level, 1 to wait there and 0 to pass on, so the message waits in exactly the levels of the bits "+
			"set in its delay: any delay from 1ms to 49.7 days, to the millisecond, jitter and Retry-After "+
			"included, in ordinary queues (65 objects).", s.o.Policy)
	case retry.Native:
		d = fmt.Sprintf("RabbitMQ 4.3's delayed retry for quorum queues: webhook-queue is a quorum queue with "+
			"x-delayed-retry-type failed, x-delayed-retry-min %dms, x-delayed-retry-max %dms and x-delivery-limit %d; "+
			"the consumer rejects a failure with requeue=true and the queue itself holds the message "+
			"min(min × attempt, max) before it delivers it again; past the limit it dead-letters it to error-exchange, "+
			"whose stage parks it. No wait objects, no publish per retry. Needs RabbitMQ 4.3.",
			s.o.Policy.Delay(1).Milliseconds(), s.o.Policy.Delay(s.o.Policy.Retries()).Milliseconds(), s.o.Policy.Retries())
	}
	if s.handoff == retry.Direct {
		d += " Direct hand-off: the worker decides itself (the error stage's decision, the same function) and " +
			"publishes the retry to wait with its own queue as the destination; the broker routes it back when the " +
			"wait is over. One confirmed publish per retry instead of three, and no requeue stage."
	}
	return d
}

// topology is the pipeline's retry.Topology, with the workshop's one route.
// The native backend is a feature of quorum queues.
func (s *pipeline) topology() retry.Topology {
	t := retry.Topology{
		Prefix:  s.o.Prefix,
		Routes:  []retry.Route{{Queue: WorkQueue, Key: RoutingKey}},
		Backend: s.backend,
		Handoff: s.handoff,
		Policy:  s.o.Policy,
	}
	if s.backend == retry.Native {
		t.QueueType = retry.Quorum
	}
	return t
}

func (s *pipeline) Layout() Layout {
	t := s.topology()
	l := Layout{Exchange: t.Ingress(), Key: RoutingKey, WorkQueue: t.Name(WorkQueue), DeadQueue: t.Name(retry.DeadQueue),
		Consumed: []string{t.Name(WorkQueue), t.Name(ErrorQueue)}}
	if t.HasRequeueStage() {
		l.Consumed = append(l.Consumed, t.Name(RequeueQueue))
	}
	return l
}

func (s *pipeline) Plan() retry.Plan { return s.topology().Plan() }

func (s *pipeline) Declare(ctx context.Context, conn *amqp.Connection) error {
	switch s.backend {
	case retry.Plugin:
		if err := s.probe(); err != nil {
			return err
		}
	case retry.Native:
		// Before anything is declared: an older broker would accept the
		// queue and ignore its delays.
		version, _ := conn.Properties["version"].(string)
		if err := NativeSupport(version); err != nil {
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
		return fmt.Errorf("%w: no delayed-message plugin (no x-delayed-message exchange type: "+
			"rabbitmq_delayed_message_exchange is not enabled); ttl-tiers and delay-levels run the same pipeline without it", ErrUnsupported)
	}
	return nil
}

func (s *pipeline) Delete(conn *amqp.Connection) error { return s.topology().Delete(conn) }

func (s *pipeline) Run(ctx context.Context, conn *amqp.Connection, h retry.Handler, observe func(Event)) error {
	t := s.topology()
	stages := &retry.Stages{
		Topology: t, Options: retry.Options{Prefetch: s.o.prefetch(), Concurrency: s.o.concurrency(),
			Observe: func(e retry.Event) {
				// Each decision the stages report went with one confirmed publish.
				switch e.Outcome {
				case retry.Retrying, retry.Requeued, retry.Waiting, retry.Parked:
					tell(observe, Event{ID: e.MessageID, Outcome: e.Outcome, Delay: e.Delay, Published: 1, Reason: e.Reason})
				}
			}},
	}
	// What a failure costs the worker: with the stages, a publish to
	// error-exchange; with a direct hand-off, the publish to wait that its
	// Retrying event reports; with the native backend, a reject, which the
	// broker turns into a wait of its own.
	stagesTakeIt := t.Handoff == retry.ViaStages && t.Backend != retry.Native
	work := &retry.Consumer{
		Topology: t, Queue: t.Name(WorkQueue), Handler: h,
		Options: retry.Options{Prefetch: s.o.prefetch(), Concurrency: s.o.concurrency(),
			Observe: func(e retry.Event) {
				ev := Event{ID: e.MessageID, Outcome: e.Outcome, Delay: e.Delay, Reason: e.Reason}
				switch e.Outcome {
				case retry.Parked, retry.Waiting:
					ev.Published = 1
				case retry.Failed:
					if stagesTakeIt {
						ev.Published = 1
					}
				case retry.Retrying:
					if t.Backend != retry.Native {
						ev.Published = 1
					}
				default:
					return
				}
				tell(observe, ev)
			}},
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return stages.Run(gctx, conn) })
	g.Go(func() error { return work.Run(gctx, conn) })
	return g.Wait()
}
