package retry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"golang.org/x/sync/errgroup"
)

// Stages runs the two consumers between a failure and its next attempt:
//
//   - the error stage takes failed messages from error-queue, counts the
//     attempt, and either sends the message to wait (with the policy's
//     delay for that attempt) or parks it in dead-letter-queue;
//   - the requeue stage takes messages whose wait is over from
//     requeue-queue and publishes them back to the work queue they failed
//     on.
//
// Each stage acks a message only after the broker confirmed the copy it
// published, so a crash at any point leaves the message in one queue or
// the other (or briefly in both: the pipeline is at-least-once).
type Stages struct {
	// Topology names the queues; its Backend must be Plugin or TTL.
	Topology Topology
	// Policy decides the delays and when to park.
	Policy Policy
	// Prefetch is each stage's unacked window; zero means 64.
	Prefetch int
	// Concurrency is the number of workers per stage; zero means 32. Each
	// worker waits for its own publisher confirms, so this is also the
	// number of hand-offs in flight: the main lever on throughput.
	Concurrency int
	// ShutdownTimeout bounds how long hand-offs in flight may go on once
	// ctx is done; zero means DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// Logger receives one line per decision; nil discards.
	Logger *slog.Logger
	// Observe, if set, is told every decision, for events and metrics.
	Observe func(Event)
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	frameSize int
}

// Event is one decision of the pipeline or a consumer, for observers.
type Event struct {
	// Outcome is "delivered", "failed", "retrying", "waiting", "requeued"
	// or "parked".
	Outcome   string
	MessageID string
	// Queue is the work queue the message belongs to.
	Queue string
	// Attempt is the attempt that just ended (1 for the first delivery).
	Attempt int
	// Delay is the wait scheduled before the next attempt.
	Delay time.Duration
	// Reason is why a message was parked.
	Reason string
	// Err is the failure's text, where known.
	Err string
	// At is when the decision was made.
	At time.Time
	// Published is the message's AMQP timestamp, set by its producer:
	// At minus Published is the message's age.
	Published time.Time
}

func (s *Stages) defaults() {
	if s.Prefetch <= 0 {
		s.Prefetch = 64
	}
	if s.Concurrency <= 0 {
		s.Concurrency = 32
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	if s.ShutdownTimeout <= 0 {
		s.ShutdownTimeout = DefaultShutdownTimeout
	}
	if s.Now == nil {
		s.Now = time.Now
	}
}

func (s *Stages) observe(e Event) {
	if s.Observe != nil {
		e.At = s.Now()
		s.Observe(e)
	}
}

// Run consumes error-queue and requeue-queue on conn until ctx is done or
// the connection is lost. It does not declare the topology.
func (s *Stages) Run(ctx context.Context, conn *amqp.Connection) error {
	s.defaults()
	if err := s.Topology.Validate(); err != nil {
		return err
	}
	s.frameSize = conn.Config.FrameSize
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return serve(gctx, conn, s.Topology.Name(ErrorQueue), s.Prefetch, s.Concurrency, "relay-error-stage", s.ShutdownTimeout, s.handleError)
	})
	g.Go(func() error {
		return serve(gctx, conn, s.Topology.Name(RequeueQueue), s.Prefetch, s.Concurrency, "relay-requeue-stage", s.ShutdownTimeout, s.handleRequeue)
	})
	return g.Wait()
}

// handleError decides what happens to one failed message.
func (s *Stages) handleError(ctx context.Context, pub *publisher, d *amqp.Delivery) error {
	retries := RetryCount(d.Headers)
	queue := OriginalQueue(d.Headers)
	attempt := retries + 1 // the attempt that just failed
	lastErr := headerString(d.Headers, HeaderLastError)
	if s.tooLarge(d) {
		return s.settle(ctx, d, park(ctx, pub, s.Topology, d, or(queue, s.Topology.Name(ErrorQueue)), ReasonTooLarge, retries, s.Now()),
			Event{Outcome: "parked", MessageID: d.MessageId, Queue: queue, Attempt: attempt, Reason: ReasonTooLarge})
	}
	switch {
	case queue == "":
		return s.settle(ctx, d, park(ctx, pub, s.Topology, d, s.Topology.Name(ErrorQueue), ReasonNoSource, retries, s.Now()),
			Event{Outcome: "parked", MessageID: d.MessageId, Attempt: attempt, Reason: ReasonNoSource})
	case retries >= s.Policy.Retries():
		return s.settle(ctx, d, park(ctx, pub, s.Topology, d, queue, ReasonMaxRetries, retries, s.Now()),
			Event{Outcome: "parked", MessageID: d.MessageId, Queue: queue, Attempt: attempt, Reason: ReasonMaxRetries, Err: lastErr})
	}
	delay := s.Policy.Jittered(s.Policy.Delay(attempt), rand.Float64())
	if ms, ok := headerInt(d.Headers, HeaderRetryAfter); ok && ms > 0 && ms <= MaxRetryAfter.Milliseconds() &&
		time.Duration(ms)*time.Millisecond > delay {
		delay = time.Duration(ms) * time.Millisecond
	}
	h := forward(d.Headers)
	h[HeaderRetryCount] = int32(attempt)
	h[HeaderOriginalQueue] = queue
	if _, ok := h[HeaderFirstFailedAt]; !ok {
		h[HeaderFirstFailedAt] = s.Now().UTC().Format(time.RFC3339Nano)
	}
	var err error
	if s.Topology.Backend == Plugin {
		h[HeaderDelay] = clampDelay(delay)
		// The delayed exchange cannot route at publish time, so it does
		// not support mandatory: a return would never come.
		err = pub.publish(ctx, s.Topology.Name(WaitExchange), requeueKey, false, republish(d, h))
	} else {
		wait := step(s.Policy.Steps(), delay)
		if delay > wait {
			h[HeaderNotBefore] = s.Now().Add(delay).UnixMilli()
		}
		err = s.wait(ctx, pub, d, h, wait)
	}
	return s.settle(ctx, d, err, Event{Outcome: "retrying", MessageID: d.MessageId, Queue: queue, Attempt: attempt, Delay: delay, Err: lastErr})
}

// handleRequeue sends one message whose wait is over back to its queue.
func (s *Stages) handleRequeue(ctx context.Context, pub *publisher, d *amqp.Delivery) error {
	queue := headerString(d.Headers, HeaderOriginalQueue)
	retries := RetryCount(d.Headers)
	if s.tooLarge(d) {
		return s.settle(ctx, d, park(ctx, pub, s.Topology, d, or(queue, s.Topology.Name(RequeueQueue)), ReasonTooLarge, retries, s.Now()),
			Event{Outcome: "parked", MessageID: d.MessageId, Queue: queue, Attempt: retries + 1, Reason: ReasonTooLarge})
	}
	if queue == "" {
		return s.settle(ctx, d, park(ctx, pub, s.Topology, d, s.Topology.Name(RequeueQueue), ReasonNoSource, retries, s.Now()),
			Event{Outcome: "parked", MessageID: d.MessageId, Attempt: retries + 1, Reason: ReasonNoSource})
	}
	if nb, ok := headerInt(d.Headers, HeaderNotBefore); ok {
		if left := time.UnixMilli(nb).Sub(s.Now()); left > notBeforeSlack && left <= MaxRetryAfter {
			// Not yet: a downstream asked for longer than any wait queue.
			wait := step(s.Policy.Steps(), left)
			err := s.wait(ctx, pub, d, forward(d.Headers), wait)
			return s.settle(ctx, d, err, Event{Outcome: "waiting", MessageID: d.MessageId, Queue: queue, Attempt: retries, Delay: wait})
		}
	}
	h := forward(d.Headers)
	delete(h, HeaderNotBefore)
	// The default exchange routes straight to the queue of that name;
	// mandatory turns a queue that no longer exists into a return.
	err := pub.publish(ctx, "", queue, true /* mandatory */, republish(d, h))
	if errors.Is(err, ErrUnroutable) {
		err = park(ctx, pub, s.Topology, d, queue, ReasonNoQueue, retries, s.Now())
		return s.settle(ctx, d, err, Event{Outcome: "parked", MessageID: d.MessageId, Queue: queue, Attempt: retries + 1, Reason: ReasonNoQueue})
	}
	return s.settle(ctx, d, err, Event{Outcome: "requeued", MessageID: d.MessageId, Queue: queue, Attempt: retries + 1})
}

// MaxRetryAfter bounds the wait a downstream can ask for. A longer (or
// garbled) hint is ignored and the policy's own delay applies, so a
// message can never be held back indefinitely by one header.
const MaxRetryAfter = 24 * time.Hour

// tooLarge reports whether d's headers leave no room for relay's own under
// the frame size, and if so drops its large headers so it can be parked.
func (s *Stages) tooLarge(d *amqp.Delivery) bool {
	if s.frameSize <= 0 || headerFrameSize(d) <= s.frameSize-headroom {
		return false
	}
	d.Headers = smallHeaders(d.Headers)
	return true
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// notBeforeSlack lets a message whose not-before time is this close go back
// already rather than wait one more round.
const notBeforeSlack = 20 * time.Millisecond

// wait publishes to the TTL wait queue of the given step.
func (s *Stages) wait(ctx context.Context, pub *publisher, d *amqp.Delivery, h amqp.Table, step time.Duration) error {
	return pub.publish(ctx, s.Topology.Name(WaitExchange), StepName(step), true /* mandatory */, republish(d, h))
}

// settle acks d once its hand-off was confirmed, or backs off and nacks it
// back to its queue when the hand-off failed: never both, never neither.
func (s *Stages) settle(ctx context.Context, d *amqp.Delivery, err error, e Event) error {
	e.Published = d.Timestamp
	log := s.Logger.With("message_id", e.MessageID, "queue", e.Queue, "attempt", e.Attempt)
	if err != nil {
		log.Error("hand-off failed, message returns to its queue", "outcome", e.Outcome, "error", err)
		pause(ctx, time.Second)
		if nerr := d.Nack(false, true /* requeue */); nerr != nil {
			log.Error("nack", "error", nerr)
		}
		return err
	}
	if aerr := d.Ack(false); aerr != nil {
		// The copy is confirmed but the ack was lost: the broker will
		// deliver the original again, a duplicate downstream dedupes.
		log.Warn("ack after confirmed hand-off", "error", aerr)
	}
	switch e.Outcome {
	case "parked":
		log.Warn("parked", "outcome", e.Outcome, "reason", e.Reason, "error", e.Err)
	default:
		log.Info(e.Outcome, "outcome", e.Outcome, "delay_ms", e.Delay.Milliseconds())
	}
	s.observe(e)
	return nil
}

// park publishes d to the dead-letter exchange with the reason and its
// history, and waits for the confirm.
func park(ctx context.Context, pub *publisher, t Topology, d *amqp.Delivery, source, reason string, retries int, now time.Time) error {
	h := forward(d.Headers)
	h[HeaderDeadSource] = source
	h[HeaderDeadReason] = reason
	h[HeaderRetryCount] = int32(retries)
	h[HeaderParkedAt] = now.UTC().Format(time.RFC3339Nano)
	if _, ok := h[HeaderFirstFailedAt]; !ok {
		h[HeaderFirstFailedAt] = h[HeaderParkedAt]
	}
	if err := pub.publish(ctx, t.Name(DeadExchange), source, true /* mandatory */, republish(d, h)); err != nil {
		return fmt.Errorf("park message %q: %w", d.MessageId, err)
	}
	return nil
}
