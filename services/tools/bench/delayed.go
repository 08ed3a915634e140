package bench

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/services/internal/channel"
	"github.com/relay-demo/relay/services/internal/notification"
)

// Memory targets: the process stays small, and stays the same size however
// many messages wait — relay keeps no state for a waiting message, the
// broker does.
const (
	maxRSSMiB    = 50
	maxGrowthMiB = 5
)

// longWait is the delay step the memory figure's messages wait in: long
// enough that none comes back while the figure is measured.
const longWait = time.Hour

// checkpoints is how many times RSS is read while the messages pile up.
const checkpoints = 5

// memoryRows runs relay's pipeline (stages and a consumer) in this process,
// piles Delayed messages into its delay stage, and reads the process's RSS
// as they pile up and while they sit.
func (b *bench) memoryRows(ctx context.Context, qt retry.QueueType) ([]Row, error) {
	var baseline, waiting, growth uint64
	err := labelled(ctx, "memory/relay/"+string(qt), func(ctx context.Context) (err error) {
		baseline, waiting, growth, err = b.delayed(ctx, qt)
		return err
	})
	if err != nil {
		return nil, err
	}
	b.progress("%s: memory: RSS %.1f MiB idle, %.1f MiB with %s delayed (growth %.1f MiB)", qt,
		mib(baseline), mib(waiting), thousands(int64(b.opts.Delayed)), mib(growth))
	q := string(qt)
	return []Row{
		{Queue: q, Figure: FigDelayedRSS, Unit: UnitMiB, Relay: ptr(mib(waiting)), Target: &Target{Kind: AtMost, Value: maxRSSMiB}},
		{Queue: q, Figure: FigDelayedGrowth, Unit: UnitMiB, Relay: ptr(mib(growth)), Target: &Target{Kind: AtMost, Value: maxGrowthMiB}},
	}, nil
}

// delayed returns the RSS with the pipeline idle, the highest RSS while
// the messages sit, and the highest growth over the idle figure seen at
// any checkpoint.
func (b *bench) delayed(ctx context.Context, qt retry.QueueType) (baseline, waiting, growth uint64, err error) {
	ctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
	defer cancel()
	conn, err := retry.Dial(b.url, "relay bench memory")
	if err != nil {
		return 0, 0, 0, err
	}
	defer conn.Close()
	topo := retry.Topology{Prefix: b.names(qt, "memory"), Routes: channel.Routes(), QueueType: qt,
		Backend: retry.TTL, Policy: retry.Policy{Delays: []time.Duration{longWait}}}
	b.janitor.topology(topo)
	if err := topo.Declare(ctx, conn); err != nil {
		return 0, 0, 0, err
	}
	runCtx, stop := context.WithCancel(ctx)
	r := newRunner()
	defer func() {
		stop()
		_ = r.wait()
	}()
	queue := queueFor(topo, channel.Webhook.Name())
	r.start(func() error {
		stages := &retry.Stages{Topology: topo}
		return stages.Run(runCtx, conn)
	})
	r.start(func() error {
		consumer := &retry.Consumer{Topology: topo, Queue: queue, Concurrency: b.opts.Concurrency, Prefetch: b.opts.Prefetch,
			Handler: retry.HandlerFunc(func(context.Context, *retry.Message) error { return nil })}
		return consumer.Run(runCtx, conn)
	})

	// What the process retains, not the garbage it has yet to collect.
	retained := func() (uint64, error) {
		runtime.GC()
		debug.FreeOSMemory()
		return statusKB("VmRSS")
	}
	if baseline, err = retained(); err != nil {
		return 0, 0, 0, err
	}
	// The messages are what the error stage would have sent to wait: the
	// API's body, relay's headers.
	body := messageBody()
	failedAt := time.Now().UTC().Format(time.RFC3339Nano)
	n := b.opts.Delayed
	sent := 0
	for c := range checkpoints {
		batch := n*(c+1)/checkpoints - sent
		if batch == 0 {
			continue
		}
		first := sent
		_, err := publishPipelined(ctx, conn, preloadWindow, batch, false, func(i int) (string, string, amqp.Publishing) {
			return topo.Name(retry.WaitExchange), retry.StepName(longWait), amqp.Publishing{
				Headers: amqp.Table{retry.HeaderRetryCount: int32(1), retry.HeaderOriginalQueue: queue,
					retry.HeaderFirstFailedAt: failedAt, retry.HeaderLastError: errFirstAttempt.Error()},
				ContentType: notification.ContentType, DeliveryMode: amqp.Persistent,
				MessageId: "d" + strconv.Itoa(first+i), Timestamp: time.Now(), Body: body}
		})
		if err != nil {
			return 0, 0, 0, fmt.Errorf("pile up %d delayed messages: %w", n, err)
		}
		sent += batch
		rss, err := retained()
		if err != nil {
			return 0, 0, 0, err
		}
		growth = max(growth, rss-min(rss, baseline))
	}
	if err := waitDepth(ctx, conn, topo.WaitQueue(longWait), n); err != nil {
		return 0, 0, 0, err
	}
	// Sit: sample for a while with everything in place.
	sit := 2 * time.Second
	if b.opts.Quick {
		sit = 500 * time.Millisecond
	}
	if waiting, err = retained(); err != nil {
		return 0, 0, 0, err
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	end := time.After(sit)
	for sitting := true; sitting; {
		select {
		case <-ctx.Done():
			return 0, 0, 0, ctx.Err()
		case <-r.dead:
			return 0, 0, 0, fmt.Errorf("relay pipeline stopped while messages waited: %v", r.err)
		case <-end:
			sitting = false
		case <-tick.C:
			rss, err := statusKB("VmRSS")
			if err != nil {
				return 0, 0, 0, err
			}
			waiting = max(waiting, rss)
		}
	}
	growth = max(growth, waiting-min(waiting, baseline))
	return baseline, waiting, growth, nil
}

// waitDepth polls a queue until it holds n messages: the broker counts
// confirmed messages into a queue's depth a moment after the confirm.
func waitDepth(ctx context.Context, conn *amqp.Connection, queue string, n int) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open channel: %w", err)
	}
	defer ch.Close()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for {
		q, err := ch.QueueDeclarePassive(queue,
			true,  // durable
			false, // autoDelete
			false, // exclusive
			false, // noWait
			nil)
		if err != nil {
			return fmt.Errorf("inspect queue %q: %w", queue, err)
		}
		if q.Messages >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("queue %q holds %d of %d messages: %w", queue, q.Messages, n, ctx.Err())
		case <-deadline:
			return fmt.Errorf("queue %q holds %d of %d messages after 30s", queue, q.Messages, n)
		case <-tick.C:
		}
	}
}
