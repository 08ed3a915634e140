package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

// errFirstAttempt is what the bench's handler returns the first time it
// sees a message: one failure, then success.
var errFirstAttempt = errors.New("first attempt fails")

// rawRetried marks the copy the raw plugin loop sent to wait.
const rawRetried = "x-bench-retried"

// tracker follows round trips: when each message first failed, and how
// much longer than the scheduled delay it took to come back.
type tracker struct {
	delay time.Duration
	n     int

	mu       sync.Mutex
	failedAt map[string]time.Time
	extra    []time.Duration
	done     int
	finished chan struct{}
	// each, when set, gets a value per finished round trip.
	each chan struct{}
}

func newTracker(n int, delay time.Duration, each bool) *tracker {
	t := &tracker{delay: delay, n: n, failedAt: make(map[string]time.Time, n), extra: make([]time.Duration, 0, n),
		finished: make(chan struct{})}
	if each {
		t.each = make(chan struct{}, n)
	}
	return t
}

// failed records a first attempt.
func (t *tracker) failed(id string) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failedAt[id] = now
}

// succeeded records a redelivery: a finished round trip.
func (t *tracker) succeeded(id string) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if at, ok := t.failedAt[id]; ok {
		t.extra = append(t.extra, now.Sub(at)-t.delay)
		delete(t.failedAt, id)
	}
	t.done++
	if t.done == t.n {
		close(t.finished)
	}
	if t.each != nil && t.done <= t.n {
		t.each <- struct{}{}
	}
}

func (t *tracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.done
}

func (t *tracker) extras() []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]time.Duration(nil), t.extra...)
}

// The sides of the retry figures: the raw loop, relay through its stages
// (the article's topology) and relay with the direct hand-off.
const (
	sideRaw    = "raw"
	sideStages = "relay"
	sideDirect = "direct"
)

// Targets of the retry figures (issue #16): a round trip at 0.9× the raw
// loop's rate at least, its p99 within twice raw's, and at most 1.3× the
// broker's CPU per round trip.
const (
	retryRateTarget      = 0.9
	retryP99Target       = 2
	retryBrokerCPUTarget = 1.3
)

// retryFigs names the rows of one backend and hand-off.
type retryFigs struct{ rate, p50, p99, broker string }

// retryNames names the rows of the retry figure on backend with a side's
// hand-off.
func retryNames(backend retry.Backend, who string) retryFigs {
	switch {
	case backend == retry.Native:
		return retryFigs{FigNativeRate, FigNativeP50, FigNativeP99, FigNativeBrokerCPU}
	case backend == retry.Plugin && who == sideDirect:
		return retryFigs{FigPluginDirectRate, FigPluginDirectP50, FigPluginDirectP99, FigPluginDirectBrokerCPU}
	case backend == retry.Plugin:
		return retryFigs{FigPluginRate, FigPluginP50, FigPluginP99, FigPluginBrokerCPU}
	case who == sideDirect:
		return retryFigs{FigDirectRate, FigDirectP50, FigDirectP99, FigDirectBrokerCPU}
	}
	return retryFigs{FigRetryRate, FigRetryP50, FigRetryP99, FigRetryBrokerCPU}
}

// retrySides are the relay sides of the retry groups chosen.
func (b *bench) retrySides() []string {
	var out []string
	if b.opts.has("retry") {
		out = append(out, sideStages)
	}
	if b.opts.has("retry-direct") {
		out = append(out, sideDirect)
	}
	return out
}

// retryFigures measures the retry groups chosen on the TTL backend, on
// the plugin where the broker has it, and, with the retry group on quorum
// queues, on the native backend where the broker has it (RabbitMQ 4.3);
// a backend the broker lacks has rows that say n/a.
func (b *bench) retryFigures(ctx context.Context, qt retry.QueueType, plugin, native bool) ([]Row, error) {
	rows, err := b.retryRows(ctx, qt, retry.TTL)
	if err != nil {
		return nil, err
	}
	pf, err := retry.FeaturesOf(retry.Plugin)
	if err != nil {
		return nil, err
	}
	switch {
	case !plugin:
		for _, who := range b.retrySides() {
			rows = append(rows, naRows(qt, retryNames(retry.Plugin, who), "n/a: no plugin")...)
		}
	case !slices.Contains(pf.QueueTypes, qt):
		for _, who := range b.retrySides() {
			rows = append(rows, naRows(qt, retryNames(retry.Plugin, who), "n/a: the plugin runs with classic queues only")...)
		}
	default:
		more, err := b.retryRows(ctx, qt, retry.Plugin)
		if err != nil {
			return nil, err
		}
		rows = append(rows, more...)
	}
	// The native backend has one hand-off, the broker's: it belongs to
	// the retry group, on quorum queues alone.
	switch {
	case qt != retry.Quorum || !b.opts.has("retry"):
	case native:
		more, err := b.retryRows(ctx, qt, retry.Native)
		if err != nil {
			return nil, err
		}
		rows = append(rows, more...)
	default:
		rows = append(rows, naRows(qt, retryNames(retry.Native, sideStages), "n/a: RabbitMQ 4.3 or later")...)
	}
	return rows, nil
}

// naRows are the rate and broker CPU rows of a backend not measured.
func naRows(qt retry.QueueType, f retryFigs, note string) []Row {
	return []Row{
		{Queue: string(qt), Figure: f.rate, Unit: UnitRate, Note: note, Target: &Target{Kind: RatioAtLeast, Value: retryRateTarget}},
		{Queue: string(qt), Figure: f.broker, Unit: UnitMicros, Note: note, Target: &Target{Kind: RatioAtMost, Value: retryBrokerCPUTarget}},
	}
}

// retryRows measures one retry round trip — fail, wait the delay, come
// back, succeed — through relay's pipeline, with each hand-off chosen,
// against the broker's own loop, for one delay backend. The raw loop is
// measured once for both hand-offs, in the same rounds.
func (b *bench) retryRows(ctx context.Context, qt retry.QueueType, backend retry.Backend) ([]Row, error) {
	order := []string{sideRaw}
	run := map[string]func(context.Context) (side, error){
		sideRaw: func(ctx context.Context) (side, error) { return b.roundTrips(ctx, qt, backend, sideRaw) },
	}
	sides := b.retrySides()
	if backend == retry.Native {
		sides = []string{sideStages} // the broker's hand-off, whatever relay's
	}
	for _, who := range sides {
		order = append(order, who)
		run[who] = func(ctx context.Context) (side, error) { return b.roundTrips(ctx, qt, backend, who) }
	}
	got, err := b.contest(ctx, "retry-"+string(backend), qt, order, run)
	if err != nil {
		return nil, err
	}
	raw := got[sideRaw]
	q := string(qt)
	var rows []Row
	for _, who := range order[1:] {
		relay, f := got[who], retryNames(backend, who)
		broker := Row{Queue: q, Figure: f.broker, Unit: UnitMicros, Target: &Target{Kind: RatioAtMost, Value: retryBrokerCPUTarget}}
		if len(b.broker) == 0 {
			broker.Note = "n/a: broker process not visible"
		} else {
			broker.Relay, broker.Raw = micros(relay.Cost.BrokerCPUPerMsg), micros(raw.Cost.BrokerCPUPerMsg)
		}
		rows = append(rows,
			Row{Queue: q, Figure: f.rate, Unit: UnitRate, Relay: ptr(relay.Rate()), Raw: ptr(raw.Rate()),
				Target: &Target{Kind: RatioAtLeast, Value: retryRateTarget}, RelayCost: &relay.Cost, RawCost: &raw.Cost},
			Row{Queue: q, Figure: f.p50, Unit: UnitMs, Relay: ms(relay.Latency.P50), Raw: ms(raw.Latency.P50)},
			Row{Queue: q, Figure: f.p99, Unit: UnitMs, Relay: ms(relay.Latency.P99), Raw: ms(raw.Latency.P99),
				Target: &Target{Kind: RatioAtMost, Value: retryP99Target}},
			broker)
	}
	return rows, nil
}

// loop is one side's retry loop, ready to consume: where messages enter
// it, and how to start and stop its consumers.
type loop struct {
	exchange, key string
	// start begins consuming; every delivery goes to the tracker of the
	// moment.
	start func(ctx context.Context, r *runner)
}

// roundTrips times a burst of RoundTrips round trips that were queued
// before the clock started (the rate), then Latency more with Window in
// flight at a time (the extra latency, under light load), on one side:
// sideRaw, sideStages or sideDirect.
func (b *bench) roundTrips(ctx context.Context, qt retry.QueueType, backend retry.Backend, who string) (side, error) {
	ctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
	defer cancel()
	conn, err := retry.Dial(b.url, "relay-lab bench retry")
	if err != nil {
		return side{}, err
	}
	defer conn.Close()
	var cur atomic.Pointer[tracker]
	var l loop
	switch who {
	case sideStages:
		l, err = b.relayLoop(ctx, conn, qt, backend, retry.ViaStages, &cur)
	case sideDirect:
		l, err = b.relayLoop(ctx, conn, qt, backend, retry.Direct, &cur)
	default:
		l, err = b.rawLoop(ctx, conn, qt, backend, &cur)
	}
	if err != nil {
		return side{}, err
	}
	n := b.opts.RoundTrips
	if err := b.preload(ctx, conn, l.exchange, l.key, "b", n); err != nil {
		return side{}, err
	}
	burst := newTracker(n, b.opts.Delay, false)
	cur.Store(burst)
	m := startMeter(b.broker)
	start := time.Now()
	runCtx, stop := context.WithCancel(ctx)
	r := newRunner()
	defer func() {
		stop()
		_ = r.wait()
	}()
	l.start(runCtx, r)
	if err := waitFor(ctx, burst.finished, r, "round trips", burst.count, n); err != nil {
		m.abort()
		return side{}, err
	}
	elapsed := time.Since(start)
	cost := m.stop(n)

	timed := newTracker(b.opts.Latency, b.opts.Delay, true)
	cur.Store(timed)
	if err := b.window(ctx, conn, l.exchange, l.key, timed, r); err != nil {
		return side{}, err
	}
	extra := timed.extras()
	return side{N: n, Elapsed: elapsed, Cost: cost, Samples: extra, Latency: Summarize(extra)}, nil
}

// window keeps Window round trips in flight until Latency have finished.
func (b *bench) window(ctx context.Context, conn *amqp.Connection, exchange, key string, t *tracker, r *runner) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open publish channel: %w", err)
	}
	defer ch.Close()
	if err := ch.Confirm(false /* noWait */); err != nil {
		return fmt.Errorf("enable publisher confirms: %w", err)
	}
	body := messageBody()
	var pending []*amqp.DeferredConfirmation
	publish := func(i int) error {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, false /* mandatory */, false, /* immediate */
			amqp.Publishing{ContentType: notification.ContentType, DeliveryMode: amqp.Persistent,
				MessageId: "l" + strconv.Itoa(i), Timestamp: time.Now(), Body: body})
		if err != nil {
			return fmt.Errorf("publish: %w", err)
		}
		pending = append(pending, dc)
		return nil
	}
	sent := 0
	for ; sent < min(b.opts.Window, t.n); sent++ {
		if err := publish(sent); err != nil {
			return err
		}
	}
	for sent < t.n {
		select {
		case <-t.each:
			if err := publish(sent); err != nil {
				return err
			}
			sent++
		case <-r.dead:
			return fmt.Errorf("consumers stopped at %d of %d timed round trips: %v", t.count(), t.n, r.err)
		case <-ctx.Done():
			return fmt.Errorf("timed round trips: %d of %d after the time limit: %w", t.count(), t.n, ctx.Err())
		}
	}
	if err := waitFor(ctx, t.finished, r, "timed round trips", t.count, t.n); err != nil {
		return err
	}
	for _, dc := range pending {
		if !dc.Acked() {
			return fmt.Errorf("timed round trips: %w", retry.ErrNacked)
		}
	}
	return nil
}

// relayLoop declares a relay pipeline with one delay step and the
// hand-off, and runs its stages and a consumer whose handler fails each
// message once. With the direct hand-off the consumer publishes the
// failure to wait itself and the broker routes it back; the error stage
// runs all the same, as `relay retrier` does, for the nack a consumer
// falls back to.
func (b *bench) relayLoop(ctx context.Context, conn *amqp.Connection, qt retry.QueueType, backend retry.Backend, handoff retry.Handoff,
	cur *atomic.Pointer[tracker]) (loop, error) {
	name := "retry-" + string(backend) + "-relay"
	if handoff == retry.Direct {
		name = "retry-" + string(backend) + "-direct"
	}
	topo := retry.Topology{Prefix: b.names(qt, name), Routes: channel.Routes(), QueueType: qt, Backend: backend,
		Handoff: handoff, Policy: retry.Policy{Delays: []time.Duration{b.opts.Delay}}}
	b.janitor.topology(topo)
	if err := topo.Declare(ctx, conn); err != nil {
		return loop{}, err
	}
	consumer := &retry.Consumer{Topology: topo, Queue: queueFor(topo, channel.Webhook.Name()),
		Options: retry.Options{Concurrency: b.opts.Concurrency, Prefetch: b.opts.Prefetch},
		Handler: retry.HandlerFunc(func(ctx context.Context, m *retry.Message) error {
			t := cur.Load()
			if m.Attempt == 1 {
				t.failed(m.ID)
				return errFirstAttempt
			}
			t.succeeded(m.ID)
			return nil
		})}
	return loop{exchange: topo.Ingress(), key: channel.Webhook.Name(), start: func(ctx context.Context, r *runner) {
		// The stages run as `relay retrier` does, on a connection of
		// their own, with its defaults.
		r.start(func() error {
			sconn, err := retry.Dial(b.url, "relay-lab bench retrier")
			if err != nil {
				return err
			}
			defer sconn.Close()
			stages := &retry.Stages{Topology: topo}
			return stages.Run(ctx, sconn)
		})
		r.start(func() error { return consumer.Run(ctx, conn) })
	}}, nil
}

// rawLoop declares the plainest loop that retries once after the delay.
// With the TTL backend the broker does all of it: a nack dead-letters the
// message into a wait queue whose TTL dead-letters it back. With the
// plugin, the consumer republishes the message to a delayed exchange with
// x-delay and acks it. With the native backend, a reject(requeue) of a
// quorum queue with RabbitMQ 4.3's delayed retry arguments: the queue
// keeps the message for the delay and delivers it again.
func (b *bench) rawLoop(ctx context.Context, conn *amqp.Connection, qt retry.QueueType, backend retry.Backend, cur *atomic.Pointer[tracker]) (loop, error) {
	names := b.names(qt, "retry-"+string(backend)+"-raw")
	work, wait, delayed := names+"work", names+"wait", names+"delayed"
	ch, err := conn.Channel()
	if err != nil {
		return loop{}, fmt.Errorf("open channel: %w", err)
	}
	defer ch.Close()
	switch backend {
	case retry.Native:
		b.janitor.queue(work)
		args := queueArgs(qt, false)
		args["x-delayed-retry-type"] = "failed"
		args["x-delayed-retry-min"] = b.opts.Delay.Milliseconds()
		args["x-delayed-retry-max"] = b.opts.Delay.Milliseconds()
		args["x-delivery-limit"] = int64(10) // a backstop: the second delivery is acked
		if err := declareQueue(ch, work, args); err != nil {
			return loop{}, err
		}
	case retry.Plugin:
		b.janitor.queue(work)
		b.janitor.exchange(delayed)
		if err := declareExchange(ch, delayed, "x-delayed-message", amqp.Table{"x-delayed-type": amqp.ExchangeDirect}); err != nil {
			return loop{}, err
		}
		if err := declareQueue(ch, work, queueArgs(qt, false)); err != nil {
			return loop{}, err
		}
		if err := ch.QueueBind(work, work, delayed, false /* noWait */, nil); err != nil {
			return loop{}, fmt.Errorf("bind queue %q: %w", work, err)
		}
	default:
		b.janitor.queue(work, wait)
		workArgs := queueArgs(qt, true)
		workArgs["x-dead-letter-exchange"] = ""
		workArgs["x-dead-letter-routing-key"] = wait
		waitArgs := queueArgs(qt, true)
		waitArgs["x-message-ttl"] = b.opts.Delay.Milliseconds()
		waitArgs["x-dead-letter-exchange"] = ""
		waitArgs["x-dead-letter-routing-key"] = work
		if err := declareQueue(ch, work, workArgs); err != nil {
			return loop{}, err
		}
		if err := declareQueue(ch, wait, waitArgs); err != nil {
			return loop{}, err
		}
	}
	delayMs := b.opts.Delay.Milliseconds()
	return loop{exchange: "", key: work, start: func(ctx context.Context, r *runner) {
		r.start(func() error {
			ch, err := conn.Channel()
			if err != nil {
				return fmt.Errorf("open channel: %w", err)
			}
			defer ch.Close()
			if err := ch.Qos(b.opts.Prefetch, 0, false /* global */); err != nil {
				return fmt.Errorf("set prefetch: %w", err)
			}
			deliveries, err := ch.Consume(work, "relay-bench-raw-retry",
				false, // autoAck
				false, // exclusive
				false, // noLocal
				false, // noWait
				nil)
			if err != nil {
				return fmt.Errorf("consume %q: %w", work, err)
			}
			// As many goroutines as relay's consumer has handlers.
			inner := newRunner()
			for range b.opts.Concurrency {
				inner.start(func() error { return rawRetry(ctx, ch, deliveries, cur, backend, delayed, work, delayMs) })
			}
			select {
			case <-ctx.Done():
				return nil
			case <-inner.dead:
				return inner.err
			}
		})
	}}, nil
}

// rawRetry handles deliveries of the raw loop: the first time a message
// comes it fails (a nack, or a republish to the delayed exchange), the
// second time it succeeds.
func rawRetry(ctx context.Context, ch *amqp.Channel, deliveries <-chan amqp.Delivery, cur *atomic.Pointer[tracker],
	backend retry.Backend, delayed, work string, delayMs int64) error {
	for {
		var d amqp.Delivery
		var ok bool
		select {
		case <-ctx.Done():
			return nil
		case d, ok = <-deliveries:
		}
		if !ok {
			return errors.New("deliveries ended")
		}
		t := cur.Load()
		_, died := d.Headers["x-death"]
		_, retried := d.Headers[rawRetried]
		var err error
		switch {
		case died || retried || deliveryCount(d.Headers) > 0:
			t.succeeded(d.MessageId)
			err = d.Ack(false)
		case backend == retry.Native:
			// A reject, not a nack: on RabbitMQ 4.3 only a reject raises the
			// delivery count that the delayed retry follows.
			t.failed(d.MessageId)
			err = d.Reject(true /* requeue */)
		case backend == retry.Plugin:
			t.failed(d.MessageId)
			err = ch.PublishWithContext(ctx, delayed, work, false /* mandatory */, false, /* immediate */
				amqp.Publishing{Headers: amqp.Table{"x-delay": delayMs, rawRetried: true},
					ContentType: d.ContentType, DeliveryMode: amqp.Persistent, MessageId: d.MessageId, Body: d.Body})
			if err == nil {
				err = d.Ack(false)
			}
		default:
			t.failed(d.MessageId)
			err = d.Nack(false, false /* requeue */)
		}
		if err != nil {
			return err
		}
	}
}

// deliveryCount is a quorum queue's x-delivery-count: how many times the
// message was returned to its queue before this delivery; 0 for none.
func deliveryCount(h amqp.Table) int64 {
	switch v := h["x-delivery-count"].(type) {
	case int64:
		return v
	case int32:
		return int64(v)
	case int16:
		return int64(v)
	case int8:
		return int64(v)
	case int:
		return int64(v)
	case uint8:
		return int64(v)
	case uint16:
		return int64(v)
	case uint32:
		return int64(v)
	}
	return 0
}
