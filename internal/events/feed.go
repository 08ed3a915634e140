package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/retry"
)

// HistoryQueue is the unprefixed name of the durable queue the history is
// fed from: bound to every event, it keeps them while no history consumer
// runs or the store is down.
const HistoryQueue = "history-queue"

// TypeAccepted is the Type of an Accepted record.
const TypeAccepted = "accepted"

// AcceptedRoutingKey is the key Accepted records are published with.
const AcceptedRoutingKey = TypeAccepted

// AcceptedPublishing is the message that carries a, persistent: a as
// JSON with "type": "accepted" first, which the history feed reads to tell
// it from an attempt event.
func AcceptedPublishing(a notification.Accepted, service string) (amqp.Publishing, error) {
	body, err := json.Marshal(struct {
		Type string `json:"type"`
		notification.Accepted
	}{TypeAccepted, a})
	if err != nil {
		return amqp.Publishing{}, fmt.Errorf("encode accepted record of %q: %w", a.ID, err)
	}
	return amqp.Publishing{ContentType: "application/json", DeliveryMode: amqp.Persistent, Type: TypeAccepted,
		AppId: service, MessageId: a.ID + ".accepted", Timestamp: a.CreatedAt, Body: body}, nil
}

// DeclareHistory declares t's events exchange and the durable history
// queue bound to every event, of the topology's queue type, on a broker of
// version (as retry.BrokerVersion gives it). Whatever publishes events the
// history depends on declares it first, so none is published before the
// queue exists to keep it.
func DeclareHistory(ch *amqp.Channel, t retry.Topology, version string) error {
	if err := Declare(ch, t); err != nil {
		return err
	}
	args := amqp.Table{}
	if t.QueueType == retry.Quorum {
		args["x-queue-type"] = string(retry.Quorum)
	}
	// The queue has no dead-letter exchange: a quorum one on RabbitMQ 4
	// must not drop an event returned 20 times while the store is down.
	args = retry.DeliveryLimit(version, args)
	q := t.Name(HistoryQueue)
	if _, err := ch.QueueDeclare(q,
		true,  // durable
		false, // autoDelete
		false, // exclusive
		false, // noWait
		args); err != nil {
		return fmt.Errorf("declare history queue %q: %w", q, err)
	}
	if err := ch.QueueBind(q, "#", ExchangeName(t), false /* noWait */, nil); err != nil {
		return fmt.Errorf("bind history queue %q: %w", q, err)
	}
	return nil
}

// fromRelay reports whether d was published by user, relay's own: the
// events exchange takes messages from anyone allowed to write to it, and
// only relay's may change the history. With user "" (relay's own
// connection carries no user name), every message passes.
func fromRelay(d *amqp.Delivery, user string) bool {
	return user == "" || d.UserId == user
}

// Sink stores what the feed reads; *store.Store is one.
type Sink interface {
	Accept(ctx context.Context, ns []notification.Accepted) error
	Record(ctx context.Context, evs []notification.Event) error
}

// Feed moves events from the history queue into a Sink, in batches: up to
// Batch messages, or what arrived within Linger of the first. A batch is
// acked only once the sink stored it; while the sink fails (its database
// is down, say) the batch is retried with a growing pause and the rest
// waits in the queue. A message that is not an event, or an event the
// store rejects as invalid, is logged and dropped: it cannot be stored,
// ever.
type Feed struct {
	Topology retry.Topology
	Sink     Sink
	// Batch is the largest batch; zero means 500.
	Batch int
	// Linger is how long a batch waits to fill; zero means 50ms.
	Linger time.Duration
	// Log receives problems; nil discards.
	Log *slog.Logger
	// Stored, if set, is told how many events each stored batch held.
	Stored func(n int)
	// StuckAfter is how long one batch may keep failing before Stuck
	// reports it; zero means DefaultStuckAfter.
	StuckAfter time.Duration
	// Management, if set, lets the feed move aside a message whose
	// headers are too large to be delivered over AMQP, as the retry
	// consumers do (retry.Quarantine): it is parked as headers-too-large.
	// Without it such a message stalls the history queue, and Stuck says
	// so.
	Management *retry.Management

	failing atomic.Pointer[failure]
	once    sync.Once
	guard   atomic.Pointer[retry.Quarantine]
}

// DefaultStuckAfter is Feed.StuckAfter's default: long enough for a
// database restart, short enough that a store that cannot recover (a full
// disk, no temporary directory) is reported within a minute.
const DefaultStuckAfter = 30 * time.Second

// failure is the batch the feed is failing to store: since when, how many
// attempts, the last error.
type failure struct {
	since    time.Time
	attempts int
	err      error
}

// ErrStuck is Stuck's error: the history is not being written, and the
// events wait in the history queue.
var ErrStuck = errors.New("the history store keeps failing")

// Stuck returns nil while the feed stores what it reads, and ErrStuck with
// the last error once one batch has failed for StuckAfter: the history no
// longer follows the pipeline (new notifications answer 404, the dashboard
// stands still) and the history queue grows. Retrying goes on, in case the
// cause goes away; /readyz says why in the meantime.
func (f *Feed) Stuck() error {
	if g := f.guard.Load(); g != nil {
		if err := g.Stalled(f.Topology.Name(HistoryQueue)); err != nil {
			return fmt.Errorf("%w: %w", ErrStuck, err)
		}
	}
	fl := f.failing.Load()
	if fl == nil {
		return nil
	}
	after := f.StuckAfter
	if after <= 0 {
		after = DefaultStuckAfter
	}
	if d := time.Since(fl.since); d >= after {
		return fmt.Errorf("%w: one batch has failed %d times over %s: %w", ErrStuck, fl.attempts, d.Round(time.Second), fl.err)
	}
	return nil
}

// Run declares the history queue and feeds the sink from it on conn until
// ctx is done or the connection is lost.
//
// A message too large for the AMQP frame closes the connection it is
// delivered on, and comes back at the head of the queue: after such a
// loss the feed takes its next deliveries one at a time, each stored at
// once, until the culprit is at the head, where the quarantine moves it
// aside (see Management).
func (f *Feed) Run(ctx context.Context, conn *amqp.Connection) error {
	batch, linger, log := f.Batch, f.Linger, f.Log
	if batch <= 0 {
		batch = 500
	}
	if linger <= 0 {
		linger = 50 * time.Millisecond
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f.once.Do(func() { f.guard.Store(retry.NewQuarantine(f.Management, f.Topology, log)) })
	guard, queue := f.guard.Load(), f.Topology.Name(HistoryQueue)
	// Two batches' worth in flight: one being stored, one filling.
	prefetch := 2 * batch
	careful := guard.Check(ctx, conn, queue, prefetch)
	taken := 0
	err := f.run(ctx, conn, batch, linger, log, prefetch, careful, &taken)
	guard.Observe(queue, err, careful > 0 && taken < careful)
	return err
}

// run is Run on one connection, taking the first careful deliveries one
// at a time and counting the deliveries it takes in taken.
func (f *Feed) run(ctx context.Context, conn *amqp.Connection, batch int, linger time.Duration, log *slog.Logger, prefetch, careful int, taken *int) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open history channel: %w", err)
	}
	defer ch.Close()
	if err := DeclareHistory(ch, f.Topology, retry.BrokerVersion(conn)); err != nil {
		return err
	}
	window := prefetch
	if careful > 0 {
		window = 1
	}
	if err := ch.Qos(window, 0, false /* global */); err != nil {
		return fmt.Errorf("history queue: set prefetch: %w", err)
	}
	// Why the channel closed: the quarantine tells a lost connection with
	// a reason (a broker restart) from one without (an oversized frame, as
	// often as not).
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	connClosed := conn.NotifyClose(make(chan *amqp.Error, 1))
	user := retry.User(conn)
	if user == "" {
		log.Warn("relay's connection carries no user name: the history takes events from anyone who can publish to the events exchange")
	}
	deliveries, err := ch.Consume(f.Topology.Name(HistoryQueue), "relay-history",
		false, // autoAck
		false, // exclusive
		false, // noLocal
		false, // noWait
		nil)
	if err != nil {
		return fmt.Errorf("consume history queue: %w", err)
	}
	var held []amqp.Delivery
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		var fire <-chan time.Time
		if len(held) > 0 {
			fire = timer.C
		}
		select {
		case <-ctx.Done():
			return nil
		case d, ok := <-deliveries:
			if !ok {
				return lost(closed, connClosed)
			}
			*taken++
			if *taken == careful {
				// Past the careful deliveries: the usual window.
				if err := ch.Qos(prefetch, 0, false /* global */); err != nil {
					return fmt.Errorf("history queue: set prefetch: %w", err)
				}
			}
			if len(held) == 0 {
				timer.Reset(linger)
			}
			held = append(held, d)
			// One at a time, none waits for a batch to fill.
			if len(held) < batch && *taken > careful {
				continue
			}
			timer.Stop()
		case <-fire:
		}
		if !f.store(ctx, held, user, log) {
			return nil // shutting down: the batch goes back to the queue
		}
		if err := held[len(held)-1].Ack(true /* multiple */); err != nil {
			return fmt.Errorf("ack history batch: %w", err)
		}
		held = held[:0]
	}
}

// lost is the error of a history channel closed under the feed, with the
// reason the channel or its connection gave, if any within a second.
func lost(closed, connClosed <-chan *amqp.Error) error {
	var reason *amqp.Error
	select {
	case reason = <-closed:
	default:
	}
	if reason == nil {
		t := time.NewTimer(time.Second)
		defer t.Stop()
		select {
		case reason = <-connClosed:
		case <-t.C:
		}
	}
	if reason == nil {
		return fmt.Errorf("%w: history queue", retry.ErrConnectionLost)
	}
	return fmt.Errorf("%w: history queue: %w", retry.ErrConnectionLost, reason)
}

// store decodes a batch and writes it, retrying until the sink takes it
// (true) or ctx is done (false).
func (f *Feed) store(ctx context.Context, ds []amqp.Delivery, user string, log *slog.Logger) bool {
	accepted, evs := decode(ds, user, log)
	wait := 100 * time.Millisecond
	var since time.Time
	for attempt := 1; ; attempt++ {
		err := f.write(ctx, accepted, evs, log)
		if err == nil {
			if attempt > 1 {
				log.Info("history store recovered", "events", len(ds), "attempts", attempt)
			}
			f.failing.Store(nil)
			if f.Stored != nil {
				f.Stored(len(accepted) + len(evs))
			}
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if attempt == 1 {
			since = time.Now()
		}
		wasStuck := f.Stuck() != nil
		f.failing.Store(&failure{since: since, attempts: attempt, err: err})
		if stuck := f.Stuck(); stuck != nil && !wasStuck {
			// Said once, loudly: retrying may not fix this.
			log.Error("history is stuck: the store has refused one batch for too long, the events wait in the history queue and /readyz answers 503 until it takes them", "events", len(ds), "attempts", attempt, "error", stuck)
		}
		log.Error("history store failed; the batch stays in the queue and is tried again", "events", len(ds), "attempt", attempt, "error", err, "wait_ms", wait.Milliseconds())
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		wait = min(2*wait, 10*time.Second)
	}
}

// write stores one batch; an invalid item is dropped and the rest written.
func (f *Feed) write(ctx context.Context, accepted []notification.Accepted, evs []notification.Event, log *slog.Logger) error {
	for {
		err := f.Sink.Accept(ctx, accepted)
		var bad *store.InputError
		if !errors.As(err, &bad) {
			if err != nil {
				return err
			}
			break
		}
		log.Warn("dropped an accepted record the history cannot store", "message_id", accepted[bad.Index].ID, "error", bad.Problem)
		accepted = append(accepted[:bad.Index:bad.Index], accepted[bad.Index+1:]...)
	}
	for {
		err := f.Sink.Record(ctx, evs)
		var bad *store.InputError
		if !errors.As(err, &bad) {
			return err
		}
		log.Warn("dropped an event the history cannot store", "message_id", evs[bad.Index].ID, "error", bad.Problem)
		evs = append(evs[:bad.Index:bad.Index], evs[bad.Index+1:]...)
	}
}

// decode turns deliveries into history records, skipping what is not one
// and what user, relay's own, did not publish.
func decode(ds []amqp.Delivery, user string, log *slog.Logger) ([]notification.Accepted, []notification.Event) {
	var accepted []notification.Accepted
	var evs []notification.Event
	for _, d := range ds {
		if !fromRelay(&d, user) {
			log.Warn("dropped a message in the history queue that relay's user did not publish", "message_id", d.MessageId,
				"user_id", d.UserId, "app_id", d.AppId)
			continue
		}
		var head struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(d.Body, &head); err != nil {
			log.Warn("dropped a message in the history queue that is not an event", "message_id", d.MessageId, "error", err)
			continue
		}
		switch head.Type {
		case TypeAccepted:
			var a notification.Accepted
			if err := json.Unmarshal(d.Body, &a); err != nil || a.ID == "" {
				log.Warn("dropped a malformed accepted record", "message_id", d.MessageId, "error", err)
				continue
			}
			accepted = append(accepted, a)
		case TypeAttempt:
			var ev notification.Event
			if err := json.Unmarshal(d.Body, &ev); err != nil {
				log.Warn("dropped a malformed event", "message_id", d.MessageId, "error", err)
				continue
			}
			if ev.ID == "" || ev.Channel == "" {
				// A message caught outside any work queue (parked as
				// unknown-source): no copy of a notification to record.
				continue
			}
			evs = append(evs, ev)
		default:
			if notification.IsOpType(head.Type) {
				// Operational events are for operators; the history
				// records the attempts they come from.
				continue
			}
			log.Warn("dropped a message of unknown type in the history queue", "message_id", d.MessageId, "type", head.Type)
		}
	}
	return accepted, evs
}
