package retry

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Message is one delivery as a Handler sees it.
type Message struct {
	// ID is the AMQP message-id: the notification id, by relay's convention.
	ID string
	// Queue is the work queue the message was consumed from.
	Queue string
	// Attempt counts deliveries through the pipeline: 1 the first time,
	// 2 after the first retry or deferral, and so on.
	Attempt int
	// Round is how often the message was replayed from the dead-letter
	// queue: Attempt counts from 1 again in each round.
	Round int
	// Retries is how many retries the message has spent so far, on every
	// backend (a deferral spends none): what a handler rotates on, say,
	// to try another provider on each retry.
	Retries     int
	ContentType string
	Headers     amqp.Table
	Body        []byte
	// Redelivered is the broker's flag: an earlier delivery of this very
	// copy was not acknowledged (a consumer crashed or disconnected).
	Redelivered bool
	// Via is where the handler says it sent the message, such as the
	// provider of a channel with several: the attempt's event carries it.
	Via string
	// Target is what the handler says the message was for, finer than its
	// queue, such as the webhook endpoint it went to: the attempt's event
	// carries it, and the backlog is broken down by it.
	Target string
}

// Handler does the work for one message. Returning nil acknowledges it; an
// error sends it into the retry pipeline; an error wrapped by Permanent
// parks it at once; one wrapped by After retries no sooner than asked.
type Handler interface {
	Handle(ctx context.Context, m *Message) error
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc func(ctx context.Context, m *Message) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, m *Message) error { return f(ctx, m) }

// Options are the settings a Consumer and the Stages share, and the
// Pipeline passes on to each. The zero value of every field means its
// default.
type Options struct {
	// Concurrency is how many messages are handled at once; zero means 4
	// for a Consumer, 32 for the Stages. Each of the Stages' workers waits
	// for its own publisher confirms, so there it is also the number of
	// hand-offs in flight: the main lever on their throughput.
	Concurrency int
	// Prefetch is the unacked window; zero means twice Concurrency for a
	// Consumer, 64 for the Stages.
	Prefetch int
	// ShutdownTimeout bounds how long the work in hand may go on once ctx
	// is done, before its context is cancelled; zero means
	// DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// Management, if set, lets the consumer move aside a message whose
	// headers are too large to be delivered over AMQP (see quarantine.go).
	Management *Management
	// Logger receives one line per decision; nil discards.
	Logger *slog.Logger
	// Observe, if set, is told every decision: the hook for events and
	// metrics.
	Observe func(Event)
}

// Consumer runs a Handler on one work queue.
//
// A failure is handed to the error exchange by the consumer itself, with
// the error's text in x-last-error and the queue it was consumed from in
// x-original-queue, and acked once the broker confirmed the copy; only if
// that hand-off fails is the message nacked, for the queue's dead-letter
// exchange to take it there. A message that arrived through the ingress
// exchange is a producer's: the consumer ignores any relay header on it
// (see pipelineHeaders), so a producer cannot set its own retry count.
type Consumer struct {
	// Topology names the pipeline the queue belongs to and holds the retry
	// policy.
	Topology Topology
	// Queue is the work queue, prefixed (see Topology.WorkRoutes).
	Queue string
	// Handler does the work.
	Handler Handler
	// Options shape the consumer; its zero value is the defaults: 4
	// messages at once, a window of 8.
	Options

	guard *quarantine
	once  sync.Once
	// slots holds one token per handler running: at most Concurrency.
	slots chan struct{}
}

// Run consumes the queue on conn until ctx is done (then finishes the
// messages in hand) or the connection is lost.
func (c *Consumer) Run(ctx context.Context, conn *amqp.Connection) error {
	if c.Handler == nil || c.Queue == "" {
		return fmt.Errorf("consumer needs a queue and a handler")
	}
	c.once.Do(func() {
		if c.Concurrency <= 0 {
			c.Concurrency = 4
		}
		if c.Prefetch <= 0 {
			c.Prefetch = 2 * c.Concurrency
		}
		if c.Logger == nil {
			c.Logger = slog.New(slog.DiscardHandler)
		}
		if c.ShutdownTimeout <= 0 {
			c.ShutdownTimeout = DefaultShutdownTimeout
		}
		c.guard = newQuarantine(c.Management, c.Topology, c.Logger)
		c.slots = make(chan struct{}, c.Concurrency)
	})
	careful := c.guard.check(ctx, conn, c.Queue, c.Prefetch)
	// A worker per message of the window, a handler slot per Concurrency:
	// a worker whose handler is done gives its slot back at once, and
	// waits for the broker's confirm of the message's hand-off (to wait,
	// or to the error stage) without holding up the next handler.
	workers := max(c.Prefetch, c.Concurrency)
	stillCareful, err := serve(ctx, conn, c.Queue, c.Prefetch, careful, workers, "relay-"+c.Queue, c.ShutdownTimeout, c.handle)
	c.guard.observe(c.Queue, err, stillCareful)
	return err
}

func (c *Consumer) handle(ctx context.Context, pub *Hop, d *amqp.Delivery) error {
	received := time.Now()
	t := c.Topology
	if d.Exchange != "" && d.Exchange == t.Ingress() && carriesAny(d.Headers, pipelineHeaders) {
		// A producer's message: relay did not write these.
		c.Logger.Warn("dropped relay headers a producer set", "message_id", d.MessageId, "queue", c.Queue)
		d.Headers = without(d.Headers, pipelineHeaders)
	}
	if t.Handoff == Direct {
		if done, err := c.waitLonger(ctx, pub, d); done {
			return err
		}
	}
	cnt := t.countsOf(d.Headers)
	if start := started(d); cnt.policy.expired(start, time.Now()) {
		// Too late to be of use: parked, not attempted.
		return c.expire(ctx, pub, d, cnt, start)
	}
	m := &Message{
		ID: d.MessageId, Queue: c.Queue, Attempt: cnt.attempts + 1, Round: replays(d.Headers), Retries: cnt.retries,
		ContentType: d.ContentType, Headers: d.Headers, Body: d.Body, Redelivered: d.Redelivered,
	}
	start := time.Now()
	var err error
	if need := headerFrameSize(d); tooLarge(d, pub) {
		// Its headers leave no room for relay's own or the broker's
		// x-death: any hand-off would exceed the frame size and loop. Park
		// it now, with its large headers dropped.
		err = oversized{fmt.Errorf("its headers need %d bytes of the %d-byte AMQP frame", need, pub.conn.Config.FrameSize)}
	} else {
		select {
		case c.slots <- struct{}{}:
		case <-ctx.Done():
			// Shut down before a handler was free: not attempted, back
			// to the queue as it came.
			return d.Nack(false, true /* requeue */)
		}
		start = time.Now()
		err = Call(ctx, c.Handler, m)
		<-c.slots
	}
	took := time.Since(start)
	e := Event{MessageID: m.ID, Copy: c.Topology.Copy(d.Headers), Tenant: c.Topology.Tenant(d.Headers), Queue: c.Queue, Attempt: m.Attempt, Round: m.Round, At: time.Now(), Published: d.Timestamp, Duration: took, Via: m.Via,
		Received: received, Waited: waited(d, received), Target: m.Target}
	log := c.Logger.With("message_id", m.ID, "queue", c.Queue, "attempt", m.Attempt, "duration_ms", took.Milliseconds())

	var settleErr error
	events := []Event{e}
	switch {
	case err == nil:
		events[0].Outcome = Delivered
		settleErr = d.Ack(false)
		log.Info("delivered", "outcome", Delivered)
	case IsCancelled(err):
		events[0].Outcome, events[0].Reason = Cancelled, err.Error()
		settleErr = d.Ack(false)
		log.Info("cancelled, not sent", "outcome", Cancelled, "reason", err.Error())
	case IsPermanent(err):
		reason := ReasonPermanent
		if _, big := err.(oversized); big {
			reason = ReasonTooLarge
		}
		events[0].Outcome, events[0].Reason, events[0].Err = Parked, reason, err.Error()
		settleErr = c.park(ctx, pub, d, err, cnt, reason)
		log.Warn("permanent failure, parked", "outcome", Parked, "reason", reason, "error", err)
	case t.Handoff == Direct || t.waitsInQueue():
		var next Event
		next, settleErr = c.retry(ctx, pub, d, cnt, m.Attempt, err)
		events[0].Outcome, events[0].Err = Failed, err.Error()
		if next.Outcome == Parked {
			events[0] = next
			events[0].Duration, events[0].Via = took, m.Via
			events[0].Received, events[0].Waited, events[0].Target = e.Received, e.Waited, e.Target
		} else if next.Outcome != "" {
			events = append(events, next)
		}
		log.Warn("failed", "outcome", events[len(events)-1].Outcome, "delay_ms", next.Delay.Milliseconds(), "reason", next.Reason, "error", err)
	default:
		// The error stage decides the delay; the failure goes to it with
		// its text (and a downstream's Retry-After, if any).
		after, _ := RetryAfter(err)
		events[0].Outcome, events[0].Err = Failed, err.Error()
		settleErr = c.fail(ctx, pub, d, err, after)
		log.Warn("failed, handed to the retry stages", "outcome", Failed, "error", err)
	}
	if settleErr != nil {
		log.Error("settle delivery", "error", settleErr)
	}
	if c.Observe != nil {
		for _, e := range events {
			c.Observe(e)
		}
	}
	return settleErr
}

// retry is a direct hand-off: the consumer decides, as the error stage
// would, and publishes the message to wait itself, to come back to this
// very queue (the one destination it can name without trusting a header);
// the broker routes it back when the wait is over. On a backend whose
// work queues wait themselves (Native), a retry the broker waits exactly
// as decided is rejected back into the queue instead, and only a wait the
// broker would not keep (a deferral, a count the broker does not know) is
// published. It returns the event of what it decided (Retrying or Parked;
// none when the hand-off failed and the message was nacked to the error
// stage instead).
func (c *Consumer) retry(ctx context.Context, pub *Hop, d *amqp.Delivery, cnt counts, attempt int, cause error) (Event, error) {
	t := c.Topology
	now := time.Now()
	hint, _ := RetryAfter(cause)
	dec := t.decideCounts(cnt, hint, started(d), now)
	e := Event{MessageID: d.MessageId, Copy: t.Copy(d.Headers), Tenant: t.Tenant(d.Headers), Queue: c.Queue, Attempt: attempt, Round: replays(d.Headers), At: now, Published: d.Timestamp, Err: cause.Error()}
	if dec.park != "" {
		e.Outcome, e.Reason = Parked, dec.park
		return e, c.park(ctx, pub, d, cause, cnt, dec.park)
	}
	e.Outcome, e.Delay, e.Deferred = Retrying, dec.delay, dec.deferred
	if r, ok := t.delayer().(rejecter); ok && !dec.deferred && r.rejects(t, cnt.rejected, dec.delay) {
		// The queue waits and redelivers it. A reject, never a nack: on
		// RabbitMQ 4.3 only a reject raises the delivery count that the
		// delay and the delivery limit follow; a nack raises the acquired
		// count alone, and would come back at once, for ever.
		return e, d.Reject(true /* requeue */)
	}
	h := retryHeaders(d, dec, c.Queue, cause.Error(), now)
	if _, err := t.schedule(ctx, pub, d, h, c.Queue, dec.delay, now); err != nil {
		c.Logger.Error("schedule the retry, nacking to the error stage instead", "message_id", d.MessageId, "error", err)
		_ = d.Nack(false, false /* requeue */)
		return Event{}, err
	}
	return e, d.Ack(false)
}

// expire parks a message past its policy's expiry without attempting it.
// Its event counts the attempt it would have been, as a message parked for
// its headers' size does: the history numbers attempts from 1.
func (c *Consumer) expire(ctx context.Context, pub *Hop, d *amqp.Delivery, cnt counts, start time.Time) error {
	now := time.Now()
	cause := fmt.Errorf("expired: first published %s ago, past its expiry of %s", now.Sub(start).Round(time.Millisecond), cnt.policy.Expiry)
	err := c.park(ctx, pub, d, cause, cnt, ReasonExpired)
	c.Logger.Warn("expired, parked without an attempt", "message_id", d.MessageId, "queue", c.Queue, "outcome", Parked, "reason", ReasonExpired)
	if c.Observe != nil {
		c.Observe(Event{Outcome: Parked, Reason: ReasonExpired, Err: cause.Error(), MessageID: d.MessageId, Copy: c.Topology.Copy(d.Headers), Tenant: c.Topology.Tenant(d.Headers), Queue: c.Queue,
			Attempt: cnt.attempts + 1, Round: replays(d.Headers), At: now, Published: d.Timestamp})
	}
	return err
}

// waitLonger sends a message back to wait when it came back before the
// time its not-before header names, a round at a time, up to MaxWaits
// times. It reports whether it did. No backend writes the header any more
// (every backend waits a downstream's time exactly); a message that
// carries one, from an earlier relay or forged, still waits no longer
// than the rounds allow.
func (c *Consumer) waitLonger(ctx context.Context, pub *Hop, d *amqp.Delivery) (bool, error) {
	now := time.Now()
	round, h, ok := c.Topology.waitAgain(d.Headers, now)
	if !ok {
		return false, nil
	}
	wait, err := c.Topology.schedule(ctx, pub, d, h, c.Queue, round, now)
	if err != nil {
		return false, nil // attempt it now rather than not at all
	}
	if c.Observe != nil {
		c.Observe(Event{Outcome: Waiting, MessageID: d.MessageId, Copy: c.Topology.Copy(d.Headers), Tenant: c.Topology.Tenant(d.Headers), Queue: c.Queue, Attempt: c.Topology.attempts(d.Headers), Round: replays(d.Headers),
			Delay: wait, At: now, Published: d.Timestamp})
	}
	return true, d.Ack(false)
}

// park sends a permanent failure straight to the dead-letter exchange and
// acks it after the confirm. If parking fails, the message is nacked so the
// broker dead-letters it into the pipeline: retried, not lost.
func (c *Consumer) park(ctx context.Context, pub *Hop, d *amqp.Delivery, cause error, cnt counts, reason string) error {
	now := time.Now()
	p := parking{source: c.Queue, reason: reason, retries: cnt.retries, lastErr: cause.Error()}
	if cnt.rejected > 0 && headerString(d.Headers, HeaderFirstFailedAt) == "" {
		// A reject carries no header: reckon the first failure from the
		// waits the broker's schedule held it since.
		p.firstFailed = now
		for n := 1; n <= cnt.rejected; n++ {
			p.firstFailed = p.firstFailed.Add(-cnt.policy.Delay(n))
		}
	}
	err := park(ctx, pub, c.Topology, d, p, now)
	if err != nil {
		c.Logger.Error("park permanent failure, sending it to the pipeline instead", "message_id", d.MessageId, "error", err)
		_ = d.Nack(false, false /* requeue */)
		return err
	}
	return d.Ack(false)
}

// fail publishes a failed message to the error exchange with its error
// text (and the wait a downstream asked for, with the moment it ends),
// then acks; if the hand-off
// fails, it nacks instead and the queue's dead-letter exchange takes the
// message to the same place, without the text.
func (c *Consumer) fail(ctx context.Context, pub *Hop, d *amqp.Delivery, cause error, after time.Duration) error {
	h := Forward(d.Headers)
	h[HeaderOriginalQueue] = c.Queue
	h[HeaderLastError] = truncate(cause.Error(), maxHeaderError)
	delete(h, HeaderNotBefore)
	if after > 0 {
		// The wait asked for, and the moment it ends: the error stage
		// waits until then, however long the failure sat in error-queue.
		h[HeaderRetryAfter] = after.Milliseconds()
		h[HeaderNotBefore] = time.Now().Add(after).UnixMilli()
	}
	err := pub.Publish(ctx, c.Topology.Name(ErrorExchange), c.Queue, true /* mandatory */, Republish(d, h))
	if err != nil {
		c.Logger.Error("hand failure to error exchange, nacking instead", "message_id", d.MessageId, "error", err)
		_ = d.Nack(false, false /* requeue */)
		return err
	}
	return d.Ack(false)
}

// waited is how long d had been ready in its work queue when it was
// received: since HeaderReadyAt, which the pipeline sets when a wait ends
// or a replay starts, else since its timestamp. The timestamp counts in
// whole seconds (AMQP's), so a first attempt reads up to a second more.
func waited(d *amqp.Delivery, received time.Time) time.Duration {
	ready := d.Timestamp
	if ms, ok := headerInt(d.Headers, HeaderReadyAt); ok && ms > 0 {
		ready = time.UnixMilli(ms)
	}
	if ready.IsZero() || ready.After(received) {
		return 0
	}
	return received.Sub(ready)
}

// oversized is the permanent failure of a message whose headers fill the
// frame.
type oversized struct{ error }

// Unwrap makes an oversized failure permanent.
func (o oversized) Unwrap() error { return Permanent(o.error) }

// Call runs the handler, turning a panic into an ordinary, transient
// failure: one bad message must not take the worker down.
func Call(ctx context.Context, h Handler, m *Message) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panic: %v\n%s", r, debug.Stack())
		}
	}()
	return h.Handle(ctx, m)
}
