package main

import (
	"context"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
)

// relayPeer runs relay's retry library: a Pipeline with the TTL backend
// and a Policy of MaxRetries equal delays, its stages in the same process.
type relayPeer struct {
	o      Options
	w      Workload
	direct bool
	quorum bool
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
			Prefix:      uniqueName() + ".",
			Exchange:    "peers",
			Backend:     retry.TTL,
			Policy:      retry.Policy{Delays: repeat(w.Delay, w.MaxRetries)},
			Concurrency: w.Concurrency,
			Name:        "bench-peers relay",
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
