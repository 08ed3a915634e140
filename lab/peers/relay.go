package peers

import (
	"context"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
)

// relayPeer runs relay's retry library: a Pipeline with the TTL backend
// (or RabbitMQ 4.3's native delayed retry) and a Policy of MaxRetries
// equal delays, its stages in the same process.
type relayPeer struct {
	o      Options
	w      Workload
	direct bool
	quorum bool
	native bool
	p      *retry.Pipeline
	tr     *tracker
	conn   *amqp.Connection
	broker string
}

// relayQueue is the work queue's name, under the run's prefix.
const relayQueue = "jobs"

func newRelay(direct, quorum bool) func(Options, Workload) peer {
	return func(o Options, w Workload) peer {
		cfg := retry.Config{
			Topology: retry.Topology{
				Prefix:   uniqueName() + ".",
				Exchange: "peers",
				Backend:  retry.TTL,
				Policy:   retry.Policy{Delays: repeat(w.Delay, w.MaxRetries)},
			},
			Options: retry.Options{Concurrency: w.Concurrency},
			Name:    "bench-peers relay",
		}
		if direct {
			cfg.Handoff = retry.Direct
		}
		if quorum {
			cfg.QueueType = retry.Quorum
		}
		return &relayPeer{o: o, w: w, direct: direct, quorum: quorum, p: retry.New(cfg)}
	}
}

// newRelayNative runs relay on RabbitMQ 4.3's delayed retry: quorum
// queues whose consumer rejects a failure for the queue to redeliver after
// the delay (a schedule of equal delays is linear with a cap).
func newRelayNative(o Options, w Workload) peer {
	p := newRelay(false, true)(o, w).(*relayPeer)
	p.native = true
	p.p = retry.New(retry.Config{
		Topology: retry.Topology{
			Prefix:    uniqueName() + ".",
			Exchange:  "peers",
			Backend:   retry.Native,
			QueueType: retry.Quorum,
			Policy:    retry.Policy{Delays: repeat(w.Delay, w.MaxRetries)},
		},
		Options: retry.Options{Concurrency: w.Concurrency},
		Name:    "bench-peers relay",
	})
	return p
}

func repeat(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

func (r *relayPeer) Setup(ctx context.Context) error {
	conn, err := retry.Dial(r.o.AMQPURL, "bench-peers relay setup")
	if err != nil {
		return err
	}
	r.conn, r.broker = conn, brokerName(conn)
	// Declared now, not by Run: the jobs are enqueued before the workers
	// start.
	r.p.Handle(relayQueue, relayQueue, retry.HandlerFunc(func(_ context.Context, m *retry.Message) error {
		return r.tr.Attempt(m.ID, m.Attempt)
	}))
	r.p.ServeStages()
	return r.p.Topology().Declare(ctx, conn)
}

func (r *relayPeer) Enqueue(ctx context.Context, ids []string) error {
	return enqueueConfirmed(ctx, r.conn, r.p.Topology().Ingress(), relayQueue, ids)
}

func (r *relayPeer) Work(ctx context.Context, tr *tracker) error {
	r.tr = tr // before Run starts the handlers
	return r.p.Run(ctx, r.o.AMQPURL)
}

func (r *relayPeer) Parked(context.Context) (int, error) {
	return queueDepth(r.conn, r.p.Topology().Name(retry.DeadQueue))
}

func (r *relayPeer) Cleanup(context.Context) error {
	if r.conn == nil {
		return nil
	}
	defer r.conn.Close()
	return r.p.Topology().Delete(r.conn)
}

func (r *relayPeer) Server() string { return r.broker }

func (r *relayPeer) Settings() []string {
	if r.native {
		return []string{
			fmt.Sprintf("retry.Pipeline, native backend (RabbitMQ 4.3's delayed retry: the work queue is a quorum queue with x-delayed-retry-type failed, x-delayed-retry-min and -max %s, x-delivery-limit %d)", retry.StepName(r.w.Delay), r.w.MaxRetries),
			"the worker rejects a failure (basic.reject, requeue) and the queue redelivers it after the delay, with x-delivery-count raised: no publish per retry",
			fmt.Sprintf("Policy of %d delays of %s, Concurrency %d, Prefetch %d (the default, 2× Concurrency), stages in the same process with their defaults",
				r.w.MaxRetries, r.w.Delay, r.w.Concurrency, 2*r.w.Concurrency),
			"parked: the worker publishes the last failure to dead-letter-queue (confirmed) before it acks",
		}
	}
	handoff := "ViaStages: the worker hands a failure to the error stage, which publishes it to the wait queue; the requeue stage publishes it back (two confirmed hops per retry)"
	if r.direct {
		handoff = "Direct: the worker publishes a failure to the wait queue itself, which dead-letters it back to the work queue (one confirmed publish per retry)"
	}
	queues := "classic queues"
	if r.quorum {
		queues = "quorum queues (at-least-once dead-lettering)"
	}
	return []string{
		fmt.Sprintf("retry.Pipeline, TTL backend (one wait queue, x-message-ttl %s), %s", retry.StepName(r.w.Delay), queues),
		handoff,
		fmt.Sprintf("Policy of %d delays of %s, Concurrency %d, Prefetch %d (the default, 2× Concurrency), stages in the same process with their defaults (32 handlers, prefetch 64)",
			r.w.MaxRetries, r.w.Delay, r.w.Concurrency, 2*r.w.Concurrency),
		"parked: dead-letter-queue, through the headers dead-letter exchange",
	}
}
