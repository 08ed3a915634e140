package retry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
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
//
// Both stages send a message only to one of the topology's work queues
// (Topology.Destination): a message that names any other queue, or none,
// is parked once as ReasonNoSource. The delay schedule is the topology's
// Policy: there is no other.
type Stages struct {
	// Topology names the queues and holds the retry policy; its Backend
	// must be Plugin or TTL.
	Topology Topology
	// Options shape each stage; its zero value is the defaults: 32
	// workers per stage, a window of 64.
	Options
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	guard *quarantine
	once  sync.Once
}

func (s *Stages) defaults() {
	s.once.Do(func() {
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
		s.guard = newQuarantine(s.Management, s.Topology, s.Logger)
	})
}

func (s *Stages) observe(e Event) {
	if s.Observe != nil {
		e.At = s.Now()
		s.Observe(e)
	}
}

// Run declares the topology (idempotent: so the wait queues of its own
// schedule exist) and consumes error-queue and requeue-queue on conn until
// ctx is done or the connection is lost.
//
// Both stages share conn. A message too large for the frame closes the
// whole connection, and the quarantine cannot tell which stage's queue
// holds it, so it looks at both; RunErrorStage and RunRequeueStage, each
// on a connection of its own, keep the two apart.
func (s *Stages) Run(ctx context.Context, conn *amqp.Connection) error {
	s.defaults()
	if err := s.Topology.Declare(ctx, conn); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.stage(gctx, conn, ErrorQueue) })
	if s.Topology.requeues() {
		g.Go(func() error { return s.stage(gctx, conn, RequeueQueue) })
	}
	return g.Wait()
}

// RunErrorStage is Run for the error stage alone.
func (s *Stages) RunErrorStage(ctx context.Context, conn *amqp.Connection) error {
	s.defaults()
	if err := s.Topology.Declare(ctx, conn); err != nil {
		return err
	}
	return s.stage(ctx, conn, ErrorQueue)
}

// RunRequeueStage is Run for the requeue stage alone.
func (s *Stages) RunRequeueStage(ctx context.Context, conn *amqp.Connection) error {
	s.defaults()
	if err := s.Topology.Declare(ctx, conn); err != nil {
		return err
	}
	return s.stage(ctx, conn, RequeueQueue)
}

// stage consumes one stage's queue.
func (s *Stages) stage(ctx context.Context, conn *amqp.Connection, base string) error {
	queue := s.Topology.Name(base)
	w, tag := s.handleError, "relay-error-stage"
	if base == RequeueQueue {
		w, tag = s.handleRequeue, "relay-requeue-stage"
	}
	careful := s.guard.check(ctx, conn, queue, s.Prefetch)
	stillCareful, err := serve(ctx, conn, queue, s.Prefetch, careful, s.Concurrency, tag, s.ShutdownTimeout, w)
	s.guard.observe(queue, err, stillCareful)
	return err
}

// handleError decides what happens to one failed message.
func (s *Stages) handleError(ctx context.Context, pub *Hop, d *amqp.Delivery) error {
	t := s.Topology
	retries := min(RetryCount(d.Headers), t.PolicyOf(d.Headers).Retries())
	claim, header := Claim(d.Headers)
	lastErr := lastError(d.Headers)
	ev := Event{MessageID: d.MessageId, Copy: t.Copy(d.Headers), Tenant: t.Tenant(d.Headers), Queue: claim, Attempt: t.attempts(d.Headers) + 1, Round: replays(d.Headers), Err: lastErr}
	if tooLarge(d, pub) {
		source := claim
		if !t.Destination(source) {
			source = t.Name(ErrorQueue)
		}
		return s.park(ctx, pub, d, ev, parking{source: source, reason: ReasonTooLarge, retries: retries, lastErr: tooLargeError(pub)})
	}
	if !t.Destination(claim) {
		return s.refuse(ctx, pub, d, ev, ErrorQueue, claim, header, retries)
	}
	if t.waitsInQueue() {
		// The broker counted and delayed the retries in the work queue
		// itself; what reaches this stage is done with: dead-lettered past
		// the delivery limit (a consumer died on its last attempt), or
		// nacked by a consumer that could not park it itself. The
		// broker's counts say which attempt it was: x-delivery-count
		// counts rejects, x-acquired-count every delivery.
		reason := ReasonPermanent
		if deathReason(d.Headers) == "delivery_limit" {
			reason = ReasonMaxRetries
		}
		n := min(max(headerIntOr(d.Headers, "x-delivery-count"), headerIntOr(d.Headers, "x-acquired-count"), 1), 1<<20)
		ev.Attempt = t.attempts(d.Headers) + n
		retries = min(RetryCount(d.Headers)+n-1, t.PolicyOf(d.Headers).Retries())
		return s.park(ctx, pub, d, ev, parking{source: claim, reason: reason, retries: retries, lastErr: lastErr})
	}
	now := s.Now()
	hint := handedHint(d.Headers, now)
	dec := t.decide(d.Headers, hint, started(d), now)
	if dec.park != "" {
		return s.park(ctx, pub, d, ev, parking{source: claim, reason: dec.park, retries: retries, lastErr: lastErr})
	}
	dest := claim
	if t.requeues() {
		dest = t.Name(RequeueQueue)
	}
	h := retryHeaders(d, dec, claim, lastErr, now)
	_, err := t.schedule(ctx, pub, d, h, dest, dec.delay, now)
	if errors.Is(err, errWaitQueueMissing) {
		return s.park(ctx, pub, d, ev, parking{source: claim, reason: ReasonNoQueue, retries: retries, lastErr: err.Error()})
	}
	ev.Outcome, ev.Delay, ev.Deferred = Retrying, dec.delay, dec.deferred
	return s.settle(ctx, d, err, ev)
}

// handedHint is the wait a downstream asked for, as a worker handed the
// failure on: until the moment in HeaderNotBefore, which the worker
// reckoned when it decided, so the time the failure sat in error-queue is
// not added to the wait (a rate-limited copy would come back after its
// slot); at most HeaderRetryAfter, so no header can lengthen what was
// asked, and at least a millisecond, so a wait already over is still a
// deferral that spends no retry. Without a not-before it is
// HeaderRetryAfter from now.
func handedHint(h amqp.Table, now time.Time) time.Duration {
	after := time.Duration(headerIntOr(h, HeaderRetryAfter)) * time.Millisecond
	if after <= 0 {
		return 0
	}
	if nb, ok := headerInt(h, HeaderNotBefore); ok {
		return min(max(time.UnixMilli(nb).Sub(now), time.Millisecond), after)
	}
	return after
}

// handleRequeue sends one message whose wait is over back to its queue.
func (s *Stages) handleRequeue(ctx context.Context, pub *Hop, d *amqp.Delivery) error {
	queue := headerString(d.Headers, HeaderOriginalQueue)
	retries := min(RetryCount(d.Headers), s.Topology.PolicyOf(d.Headers).Retries())
	ev := Event{MessageID: d.MessageId, Copy: s.Topology.Copy(d.Headers), Tenant: s.Topology.Tenant(d.Headers), Queue: queue, Attempt: s.Topology.attempts(d.Headers) + 1, Round: replays(d.Headers), Err: lastError(d.Headers)}
	if tooLarge(d, pub) {
		source := queue
		if !s.Topology.Destination(source) {
			source = s.Topology.Name(RequeueQueue)
		}
		return s.park(ctx, pub, d, ev, parking{source: source, reason: ReasonTooLarge, retries: retries, lastErr: tooLargeError(pub)})
	}
	if !s.Topology.Destination(queue) {
		return s.refuse(ctx, pub, d, ev, RequeueQueue, queue, HeaderOriginalQueue, retries)
	}
	if round, h, ok := s.Topology.waitAgain(d.Headers, s.Now()); ok {
		// Not yet: the message names a later time to go back.
		wait, err := s.Topology.schedule(ctx, pub, d, h, s.Topology.Name(RequeueQueue), round, s.Now())
		if !errors.Is(err, errWaitQueueMissing) {
			ev.Outcome, ev.Attempt, ev.Delay = Waiting, s.Topology.attempts(d.Headers), wait
			return s.settle(ctx, d, err, ev)
		}
		// The wait is gone: go back now rather than not at all.
	}
	h := Forward(d.Headers)
	delete(h, HeaderNotBefore)
	delete(h, HeaderWaits)
	// The default exchange routes straight to the queue of that name;
	// mandatory turns a queue that no longer exists into a return.
	err := pub.Publish(ctx, "", queue, true /* mandatory */, Republish(d, h))
	if errors.Is(err, ErrUnroutable) {
		return s.park(ctx, pub, d, ev, parking{source: queue, reason: ReasonNoQueue, retries: retries,
			lastErr: fmt.Sprintf("work queue %q no longer exists: the requeue came back unroutable", queue)})
	}
	ev.Outcome = Requeued
	return s.settle(ctx, d, err, ev)
}

// refuse parks a message that names a queue relay must not send it to, once,
// keeping the claim for forensics, and says so in the log.
func (s *Stages) refuse(ctx context.Context, pub *Hop, d *amqp.Delivery, ev Event, stage, claim, header string, retries int) error {
	why := "names no work queue to go back to"
	if claim != "" {
		why = fmt.Sprintf("names %q in %s, which is not one of the topology's work queues", claim, header)
	}
	s.Logger.Warn("message names a queue relay does not send to: parked", "message_id", d.MessageId,
		"stage", s.Topology.Name(stage), "header", header, "value", claim)
	p := parking{source: s.Topology.Name(stage), reason: ReasonNoSource, retries: retries, lastErr: ev.Err, claimed: claim}
	if p.lastErr == "" {
		p.lastErr = "the message " + why
	}
	if claim != "" {
		p.claimed = header + ": " + claim
	}
	ev.Queue = ""
	return s.park(ctx, pub, d, ev, p)
}

// park parks d with p and settles it.
func (s *Stages) park(ctx context.Context, pub *Hop, d *amqp.Delivery, ev Event, p parking) error {
	ev.Outcome, ev.Reason, ev.Err = Parked, p.reason, p.lastErr
	return s.settle(ctx, d, park(ctx, pub, s.Topology, d, p, s.Now()), ev)
}

// waitAgain reports whether a message must wait again for the time its
// HeaderNotBefore names, and if so the round to wait (what is left, but
// no longer than the policy's longest delay) and the headers to publish
// it with. The budget of rounds (MaxWaits) bounds how often a message
// passes without an attempt in between, whatever its headers say: a
// forged not-before cannot keep it circling. Past it, or when the time is
// near, garbled or absurdly far, it goes back at once.
func (t Topology) waitAgain(h amqp.Table, now time.Time) (time.Duration, amqp.Table, bool) {
	nb, ok := headerInt(h, HeaderNotBefore)
	if !ok {
		return 0, nil, false
	}
	left := time.UnixMilli(nb).Sub(now)
	waits, _ := headerInt(h, HeaderWaits)
	if left <= notBeforeSlack || left > MaxRetryAfter || waits < 0 || waits >= MaxWaits {
		return 0, nil, false
	}
	out := Forward(h)
	out[HeaderWaits] = int32(waits + 1)
	steps := t.steps()
	return min(left, steps[len(steps)-1]), out, true
}

// MaxWaits bounds the extra rounds a message waits for the time its
// HeaderNotBefore names, each round at most the policy's longest delay:
// over a message's whole life, the requeue stage (or a consumer with a
// direct hand-off) sends it to wait again at most this often.
const MaxWaits = 64

// MaxRetryAfter bounds the wait a downstream can ask for. A longer (or
// garbled) hint is ignored and the policy's own delay applies, so a
// message can never be held back indefinitely by one header.
const MaxRetryAfter = 24 * time.Hour

// tooLarge reports whether d's headers leave no room for relay's own under
// the frame size of pub's connection, and if so drops its large headers so
// it can be parked.
func tooLarge(d *amqp.Delivery, pub *Hop) bool {
	frame := pub.conn.Config.FrameSize
	if frame <= 0 || headerFrameSize(d) <= frame-headroom {
		return false
	}
	d.Headers = smallHeaders(d.Headers)
	return true
}

// tooLargeError explains a headers-too-large park.
func tooLargeError(pub *Hop) string {
	return fmt.Sprintf("its headers leave less than %d bytes of the %d-byte AMQP frame for relay's own", headroom, pub.conn.Config.FrameSize)
}

// notBeforeSlack lets a message whose not-before time is this close go back
// already rather than wait one more round.
const notBeforeSlack = 20 * time.Millisecond

// errWaitQueueMissing means the wait queue of a step is gone and could not
// be declared again.
var errWaitQueueMissing = errors.New("wait queue missing")

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
	case Parked:
		log.Warn("parked", "outcome", e.Outcome, "reason", e.Reason, "error", e.Err)
	default:
		log.Info(string(e.Outcome), "outcome", e.Outcome, "delay_ms", e.Delay.Milliseconds())
	}
	s.observe(e)
	return nil
}

// parking says where and why a message is parked.
type parking struct {
	// source is the work queue it belongs to (or the stage that caught
	// it): x-dead-source, which the dead-letter exchange routes on.
	source, reason string
	retries        int
	// lastErr is the failure that ended its retries; every parked copy
	// carries one.
	lastErr string
	// claimed is the queue a ReasonNoSource message claimed, if any.
	claimed string
	// firstFailed is when it first failed, where its headers cannot say
	// (zero: they say, or it is now).
	firstFailed time.Time
}

// Park publishes d to t's dead-letter exchange with the queue it is parked
// from (x-dead-source), the reason and its history, the last error
// included, and waits for the confirm; the caller then acks d. It is the
// parking every consumer of the pipeline does, for other retry designs to
// build on.
func Park(ctx context.Context, hop *Hop, t Topology, d *amqp.Delivery, source, reason, lastErr string, retries int) error {
	return park(ctx, hop, t, d, parking{source: source, reason: reason, lastErr: lastErr, retries: retries}, time.Now())
}

// park publishes d to the dead-letter exchange with the reason and its
// history, and waits for the confirm.
func park(ctx context.Context, pub *Hop, t Topology, d *amqp.Delivery, p parking, now time.Time) error {
	h := Forward(d.Headers)
	delete(h, HeaderNotBefore)
	delete(h, HeaderWaits)
	h[HeaderDeadSource] = p.source
	h[HeaderDeadReason] = p.reason
	h[HeaderRetryCount] = int32(p.retries)
	h[HeaderParkedAt] = now.UTC().Format(time.RFC3339Nano)
	if _, ok := h[HeaderFirstFailedAt]; !ok {
		h[HeaderFirstFailedAt] = h[HeaderParkedAt]
		if !p.firstFailed.IsZero() {
			h[HeaderFirstFailedAt] = p.firstFailed.UTC().Format(time.RFC3339Nano)
		}
	}
	lastErr := p.lastErr
	if lastErr == "" {
		lastErr = lastError(d.Headers)
	}
	if lastErr == "" {
		lastErr = "parked as " + p.reason + " (no error text was recorded)"
	}
	h[HeaderLastError] = truncate(lastErr, maxHeaderError)
	if p.claimed != "" {
		h[HeaderClaimedSource] = truncate(p.claimed, maxHeaderError)
	}
	if err := pub.Publish(ctx, t.Name(DeadExchange), p.source, true /* mandatory */, Republish(d, h)); err != nil {
		return fmt.Errorf("park message %q: %w", d.MessageId, err)
	}
	return nil
}
