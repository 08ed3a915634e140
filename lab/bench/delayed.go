package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
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

// checkpoints is how many times RSS is read, and a progress line written,
// while the messages pile up.
const checkpoints = 10

// mgmtPatience is how long the memory figure waits for the management
// API's statistics to count the messages that wait: they are published
// every five seconds.
const mgmtPatience = 30 * time.Second

// waited is what the memory figure measured on one backend.
type waited struct {
	// baseline is the RSS with the pipeline idle, waiting the highest
	// while the messages sat, growth the highest over baseline at any
	// checkpoint.
	baseline, waiting, growth uint64
	// took is how long the pile-up took.
	took time.Duration
	// broker is what the management API said; note says why it is
	// missing.
	broker *brokerWaited
	note   string
}

// brokerWaited is the broker's memory before and after the pile-up.
type brokerWaited struct {
	before, after nodeMemory
	// queue is the wait queue's own statistics once it held the
	// messages; nil for the plugin, which keeps them outside queues.
	queue *queueMemory
}

// growth is the node's memory growth, in bytes, as mem_used counts it
// and as the VM's allocators do; below zero when the node freed more
// than the messages took.
func (w brokerWaited) growth() (used, allocated float64) {
	return float64(w.after.Used) - float64(w.before.Used), float64(w.after.Allocated) - float64(w.before.Allocated)
}

// memoryRows runs relay's pipeline (stages and a consumer) in this process,
// piles Waiting messages into its TTL delay stage, and reads the process's
// RSS as they pile up and while they sit, and the broker's memory before
// and after.
func (b *bench) memoryRows(ctx context.Context, qt retry.QueueType) ([]Row, error) {
	return b.waitingRows(ctx, qt, retry.TTL)
}

// pluginMemoryRows is the memory figure on the delayed-message plugin,
// once a run: its messages wait in the plugin's own table whatever the
// type of the queue they go back to.
func (b *bench) pluginMemoryRows(ctx context.Context, plugin bool) ([]Row, error) {
	if !plugin {
		return []Row{{Figure: FigPluginBrokerGrowth, Unit: UnitMiB, Note: "n/a: no plugin"}}, nil
	}
	// The plugin runs with classic queues only.
	return b.waitingRows(ctx, retry.Classic, retry.Plugin)
}

// waitingRows measures the memory figure on one backend and makes its rows.
func (b *bench) waitingRows(ctx context.Context, qt retry.QueueType, backend retry.Backend) ([]Row, error) {
	var w waited
	err := labelled(ctx, "memory-"+string(backend)+"/relay/"+string(qt), func(ctx context.Context) (err error) {
		w, err = b.delayed(ctx, qt, backend)
		return err
	})
	if err != nil {
		return nil, err
	}
	line := fmt.Sprintf("piled up in %s; RSS %.1f MiB idle, %.1f MiB with %s waiting (growth %.1f MiB)", w.took.Round(100*time.Millisecond),
		mib(w.baseline), mib(w.waiting), thousands(int64(b.opts.Waiting)), mib(w.growth))
	if w.broker != nil {
		line += fmt.Sprintf("; broker %.1f MiB before, %.1f MiB after", mib(w.broker.before.Used), mib(w.broker.after.Used))
		if w.broker.queue != nil {
			line += fmt.Sprintf(", wait queue %.1f MiB", mib(w.broker.queue.Memory))
		}
	}
	b.progress("%s: memory (%s): %s", qt, backend, line)
	return waitedRows(qt, backend, w, b.opts.Waiting), nil
}

// waitedRows are the rows of the memory figure on one backend with n
// messages waiting: relay's RSS and its growth, and the broker's memory
// growth and per message (mem_used and allocated), and the wait queue's
// own memory, or a note saying why the broker's was not read. The
// plugin's rows belong to no queue type.
func waitedRows(qt retry.QueueType, backend retry.Backend, w waited, n int) []Row {
	q := string(qt)
	rss, growth, node, per, alloc := FigDelayedRSS, FigDelayedGrowth, FigBrokerGrowth, FigBrokerPerMsg, FigBrokerAllocPerMsg
	if backend == retry.Plugin {
		q = ""
		rss, growth, node, per, alloc = FigPluginDelayedRSS, FigPluginDelayedGrowth, FigPluginBrokerGrowth, FigPluginBrokerPerMsg, FigPluginAllocPerMsg
	}
	rows := []Row{
		{Queue: q, Figure: rss, Unit: UnitMiB, Relay: ptr(mib(w.waiting)), Target: &Target{Kind: AtMost, Value: maxRSSMiB}},
		{Queue: q, Figure: growth, Unit: UnitMiB, Relay: ptr(mib(w.growth)), Target: &Target{Kind: AtMost, Value: maxGrowthMiB}},
	}
	if w.broker == nil {
		return append(rows, Row{Queue: q, Figure: node, Unit: UnitMiB, Note: w.note})
	}
	used, allocated := w.broker.growth()
	rows = append(rows,
		Row{Queue: q, Figure: node, Unit: UnitMiB, Relay: ptr(used / (1 << 20))},
		Row{Queue: q, Figure: per, Unit: UnitBytes, Relay: ptr(used / float64(max(n, 1)))},
		Row{Queue: q, Figure: alloc, Unit: UnitBytes, Relay: ptr(allocated / float64(max(n, 1)))})
	if w.broker.queue != nil {
		rows = append(rows, Row{Queue: q, Figure: FigBrokerQueue, Unit: UnitMiB, Relay: ptr(mib(w.broker.queue.Memory))})
	}
	return rows
}

// waitRoute is where a message goes to wait in topo: the wait exchange
// and the key its one delay step is bound with.
func waitRoute(topo retry.Topology) (exchange, key string, err error) {
	exchange = topo.Name(retry.WaitExchange)
	for _, bd := range topo.Plan().Bindings {
		if bd.Exchange == exchange {
			return exchange, bd.Key, nil
		}
	}
	return "", "", fmt.Errorf("topology %s: nothing is bound to %s", topo.Prefix, exchange)
}

// delayed runs the pipeline on backend, piles the messages into its delay
// stage and measures what they cost this process and the broker.
func (b *bench) delayed(ctx context.Context, qt retry.QueueType, backend retry.Backend) (waited, error) {
	ctx, cancel := context.WithTimeout(ctx, b.opts.waitingTimeout())
	defer cancel()
	conn, err := retry.Dial(b.url, "relay-lab bench memory")
	if err != nil {
		return waited{}, err
	}
	defer conn.Close()
	topo := retry.Topology{Prefix: b.names(qt, "memory-"+string(backend)), Routes: channel.Routes(), QueueType: qt,
		Backend: backend, Policy: retry.Policy{Delays: []time.Duration{longWait}}}
	b.janitor.topology(topo)
	if err := topo.Declare(ctx, conn); err != nil {
		return waited{}, err
	}
	exchange, key, err := waitRoute(topo)
	if err != nil {
		return waited{}, err
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
		consumer := &retry.Consumer{Topology: topo, Queue: queue, Options: retry.Options{Concurrency: b.opts.Concurrency, Prefetch: b.opts.Prefetch},
			Handler: retry.HandlerFunc(func(context.Context, *retry.Message) error { return nil })}
		return consumer.Run(runCtx, conn)
	})

	var w waited
	var before nodeMemory
	if b.api == nil {
		w.note = b.apiNote
	} else if before, err = b.api.settled(ctx, b.settlePatience()); err != nil {
		w.note = "n/a: management API: " + err.Error()
	}
	// What the process retains, not the garbage it has yet to collect.
	retained := func() (uint64, error) {
		runtime.GC()
		debug.FreeOSMemory()
		return statusKB("VmRSS")
	}
	if w.baseline, err = retained(); err != nil {
		return waited{}, err
	}
	// The messages are what the error stage would have sent to wait: the
	// API's body, relay's headers.
	body := messageBody()
	failedAt := time.Now().UTC().Format(time.RFC3339Nano)
	// One table for every message: a publish encodes it and keeps nothing.
	headers := amqp.Table{retry.HeaderRetryCount: int32(1), retry.HeaderOriginalQueue: queue,
		retry.HeaderFirstFailedAt: failedAt, retry.HeaderLastError: errFirstAttempt.Error()}
	if backend == retry.Plugin {
		headers[retry.HeaderDelay] = longWait.Milliseconds()
	}
	n := b.opts.Waiting
	pile, err := b.pileUp(ctx, qt, backend, n, func(i int) (string, string, amqp.Publishing) {
		return exchange, key, amqp.Publishing{Headers: headers,
			ContentType: notification.ContentType, DeliveryMode: amqp.Persistent,
			MessageId: "d" + strconv.Itoa(i), Timestamp: time.Now(), Body: body}
	}, func() (string, error) {
		rss, err := retained()
		w.growth = max(w.growth, rss-min(rss, w.baseline))
		return fmt.Sprintf("RSS %.1f MiB", mib(rss)), err
	})
	if err != nil {
		return waited{}, err
	}
	w.took = pile
	if backend != retry.Plugin {
		if err := waitDepth(ctx, conn, topo.WaitQueue(longWait), n); err != nil {
			return waited{}, err
		}
	}
	// Sit: sample for a while with everything in place.
	sit := 2 * time.Second
	if b.opts.Quick {
		sit = 500 * time.Millisecond
	}
	if w.waiting, err = retained(); err != nil {
		return waited{}, err
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	end := time.After(sit)
	for sitting := true; sitting; {
		select {
		case <-ctx.Done():
			return waited{}, ctx.Err()
		case <-r.dead:
			return waited{}, fmt.Errorf("relay pipeline stopped while messages waited: %v", r.err)
		case <-end:
			sitting = false
		case <-tick.C:
			rss, err := statusKB("VmRSS")
			if err != nil {
				return waited{}, err
			}
			w.waiting = max(w.waiting, rss)
		}
	}
	w.growth = max(w.growth, w.waiting-min(w.waiting, w.baseline))
	if w.note == "" {
		w.broker, w.note = b.brokerAfter(ctx, before, backend, topo.WaitQueue(longWait), n)
	}
	return w, nil
}

// memoryCeiling is the share of the broker's memory limit at which the
// memory figure stops piling up: past it the broker would soon raise its
// memory alarm and block every publisher, other clients' included.
const memoryCeiling = 0.8

// errBlocked is a pile-up the broker stopped.
var errBlocked = errors.New("the broker blocked publishing")

// pileUp publishes n messages of msg on a connection of its own, a tenth
// at a time, calling checkpoint and writing a progress line that ends
// with checkpoint's text after each; it returns how long they took. It
// stops, with an error naming --waiting, when the broker's memory nears
// its limit between tenths or the broker blocks the connection (a
// resource alarm) at any time.
func (b *bench) pileUp(ctx context.Context, qt retry.QueueType, backend retry.Backend, n int, msg message, checkpoint func() (string, error)) (time.Duration, error) {
	conn, err := retry.Dial(b.url, "relay-lab bench memory publisher")
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	blocked := conn.NotifyBlocked(make(chan amqp.Blocking, 1))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var reason atomic.Pointer[string]
	go func() {
		select {
		case bl, ok := <-blocked:
			if ok && bl.Active {
				reason.Store(&bl.Reason)
				cancel()
				// A blocked connection's writes hang: closing it ends them.
				_ = conn.CloseDeadline(time.Now().Add(time.Second))
			}
		case <-ctx.Done():
		}
	}()
	tooMuch := func(sent int, why string) error {
		return fmt.Errorf("%w (%s) with %s of %s messages waiting: --waiting %d is more than the broker holds; give a smaller --waiting",
			errBlocked, why, thousands(int64(sent)), thousands(int64(n)), n)
	}
	sent := 0
	start := time.Now()
	for c := range checkpoints {
		batch := n*(c+1)/checkpoints - sent
		if batch == 0 {
			continue
		}
		first := sent
		_, err := publishPipelined(ctx, conn, preloadWindow, batch, false, func(i int) (string, string, amqp.Publishing) { return msg(first + i) })
		if why := reason.Load(); why != nil {
			return 0, tooMuch(sent, *why)
		}
		if err != nil {
			return 0, fmt.Errorf("pile up %d waiting messages (--waiting): %d done: %w", n, sent, err)
		}
		sent += batch
		note, err := checkpoint()
		if err != nil {
			return 0, err
		}
		line := fmt.Sprintf("%s: memory (%s): %s of %s waiting, %s/s; %s", qt, backend, thousands(int64(sent)), thousands(int64(n)),
			thousands(int64(PerSecond(sent, time.Since(start)))), note)
		if b.api != nil && sent < n {
			node, err := b.api.node(ctx)
			if err == nil {
				line += fmt.Sprintf("; broker %.0f of %.0f MiB", mib(node.Used), mib(node.Limit))
				if float64(node.Used) >= memoryCeiling*float64(node.Limit) {
					return 0, tooMuch(sent, fmt.Sprintf("its memory reached %.0f MiB of its %.0f MiB limit", mib(node.Used), mib(node.Limit)))
				}
			}
		}
		b.progress("%s", line)
	}
	return time.Since(start), nil
}

// settlePatience is how long the memory figure waits for the broker's
// memory to hold still before a pile-up.
func (b *bench) settlePatience() time.Duration {
	if b.opts.Quick {
		return 2 * time.Second
	}
	return 15 * time.Second
}

// brokerAfter reads the broker's memory once the messages wait: the wait
// queue's statistics once they count every message, then the node's. It
// returns a note instead when the management API fails.
func (b *bench) brokerAfter(ctx context.Context, before nodeMemory, backend retry.Backend, queue string, n int) (*brokerWaited, string) {
	bw := &brokerWaited{before: before}
	if backend != retry.Plugin {
		q, err := b.api.queueHolding(ctx, queue, n, mgmtPatience)
		if err != nil {
			return nil, "n/a: management API: " + err.Error()
		}
		bw.queue = &q
	}
	after, err := b.api.node(ctx)
	if err != nil {
		return nil, "n/a: management API: " + err.Error()
	}
	bw.after = after
	return bw, ""
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
