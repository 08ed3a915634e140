package retry

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
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
	// 2 after the first retry, and so on.
	Attempt     int
	ContentType string
	Headers     amqp.Table
	Body        []byte
	// Redelivered is the broker's flag: an earlier delivery of this very
	// copy was not acknowledged (a consumer crashed or disconnected).
	Redelivered bool
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

// Consumer runs a Handler on one work queue.
type Consumer struct {
	// Topology names the pipeline the queue belongs to.
	Topology Topology
	// Queue is the work queue, prefixed (see Topology.WorkRoutes).
	Queue string
	// Handler does the work.
	Handler Handler
	// Prefetch is the unacked window; zero means 2 × Concurrency.
	Prefetch int
	// Concurrency is the number of messages handled at once; zero means 4.
	Concurrency int
	// Policy, if set, is only used to show the expected next delay in logs
	// and events; the error stage decides the real one.
	Policy Policy
	// ShutdownTimeout bounds how long handlers in flight may go on once
	// ctx is done, before their context is cancelled; zero means
	// DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// Logger receives one line per attempt; nil discards.
	Logger *slog.Logger
	// Observe, if set, is told every outcome.
	Observe func(Event)

	frameSize int
}

// Run consumes the queue on conn until ctx is done (then finishes the
// messages in hand) or the connection is lost.
func (c *Consumer) Run(ctx context.Context, conn *amqp.Connection) error {
	if c.Handler == nil || c.Queue == "" {
		return fmt.Errorf("consumer needs a queue and a handler")
	}
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
	c.frameSize = conn.Config.FrameSize
	return serve(ctx, conn, c.Queue, c.Prefetch, c.Concurrency, "relay-"+c.Queue, c.ShutdownTimeout, c.handle)
}

func (c *Consumer) handle(ctx context.Context, pub *publisher, d *amqp.Delivery) error {
	m := &Message{
		ID: d.MessageId, Queue: c.Queue, Attempt: RetryCount(d.Headers) + 1,
		ContentType: d.ContentType, Headers: d.Headers, Body: d.Body, Redelivered: d.Redelivered,
	}
	start := time.Now()
	var err error
	if c.frameSize > 0 && headerFrameSize(d) > c.frameSize-headroom {
		// Its headers leave no room for relay's own or the broker's
		// x-death: any hand-off would exceed the frame size and loop. Park
		// it now, with its large headers dropped.
		d.Headers = smallHeaders(d.Headers)
		err = tooLarge{fmt.Errorf("message headers need %d bytes of a %d-byte frame", headerFrameSize(d), c.frameSize)}
	} else {
		err = call(ctx, c.Handler, m)
	}
	e := Event{MessageID: m.ID, Queue: c.Queue, Attempt: m.Attempt, At: time.Now(), Published: d.Timestamp}
	log := c.Logger.With("message_id", m.ID, "queue", c.Queue, "attempt", m.Attempt,
		"duration_ms", time.Since(start).Milliseconds())

	var settleErr error
	switch after, hinted := RetryAfter(err); {
	case err == nil:
		e.Outcome = "delivered"
		settleErr = d.Ack(false)
		log.Info("delivered", "outcome", e.Outcome)
	case IsPermanent(err):
		e.Outcome, e.Reason, e.Err = "parked", ReasonPermanent, err.Error()
		if _, big := err.(tooLarge); big {
			e.Reason = ReasonTooLarge
		}
		settleErr = c.park(ctx, pub, d, err, m.Attempt-1, e.Reason)
		log.Warn("permanent failure, parked", "outcome", e.Outcome, "reason", e.Reason, "error", err)
	case hinted:
		// The downstream said when to come back; a nack cannot carry that,
		// so the consumer hands the message to the error exchange itself,
		// with the hint, and acks once the broker has confirmed it.
		e.Outcome, e.Err, e.Delay = "failed", err.Error(), max(after, c.Policy.Delay(m.Attempt))
		settleErr = c.fail(ctx, pub, d, err, after)
		log.Warn("failed, will retry", "outcome", e.Outcome, "delay_ms", e.Delay.Milliseconds(), "error", err)
	default:
		// The broker dead-letters the message into the pipeline.
		e.Outcome, e.Err, e.Delay = "failed", err.Error(), c.Policy.Delay(m.Attempt)
		settleErr = d.Nack(false, false /* requeue */)
		log.Warn("failed, will retry", "outcome", e.Outcome, "delay_ms", e.Delay.Milliseconds(), "error", err)
	}
	if settleErr != nil {
		log.Error("settle delivery", "error", settleErr)
	}
	if c.Observe != nil {
		c.Observe(e)
	}
	return settleErr
}

// park sends a permanent failure straight to the dead-letter exchange and
// acks it after the confirm. If parking fails, the message is nacked so the
// broker dead-letters it into the pipeline: retried, not lost.
func (c *Consumer) park(ctx context.Context, pub *publisher, d *amqp.Delivery, cause error, retries int, reason string) error {
	h := d.Headers
	d.Headers = forward(h)
	d.Headers[HeaderLastError] = truncate(cause.Error(), maxHeaderError)
	err := park(ctx, pub, c.Topology, d, c.Queue, reason, retries, time.Now())
	d.Headers = h
	if err != nil {
		c.Logger.Error("park permanent failure, sending it to the pipeline instead", "message_id", d.MessageId, "error", err)
		_ = d.Nack(false, false /* requeue */)
		return err
	}
	return d.Ack(false)
}

// fail publishes a failed message to the error exchange with the wait the
// downstream asked for, then acks; on failure it falls back to a nack.
func (c *Consumer) fail(ctx context.Context, pub *publisher, d *amqp.Delivery, cause error, after time.Duration) error {
	h := forward(d.Headers)
	h[HeaderOriginalQueue] = c.Queue
	h[HeaderLastError] = truncate(cause.Error(), maxHeaderError)
	h[HeaderRetryAfter] = after.Milliseconds()
	err := pub.publish(ctx, c.Topology.Name(ErrorExchange), c.Queue, true /* mandatory */, republish(d, h))
	if err != nil {
		c.Logger.Error("hand failure to error exchange, nacking instead", "message_id", d.MessageId, "error", err)
		_ = d.Nack(false, false /* requeue */)
		return err
	}
	return d.Ack(false)
}

// tooLarge is the permanent failure of a message whose headers fill the
// frame.
type tooLarge struct{ error }

// Unwrap makes a tooLarge permanent.
func (t tooLarge) Unwrap() error { return Permanent(t.error) }

// call runs the handler, turning a panic into an ordinary, transient
// failure: one bad message must not take the worker down.
func call(ctx context.Context, h Handler, m *Message) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panic: %v\n%s", r, debug.Stack())
		}
	}()
	return h.Handle(ctx, m)
}
