package retry

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// DeadLetter is one message in the dead-letter queue, with its history.
type DeadLetter struct {
	ID            string     `json:"id"`
	Source        string     `json:"source"`
	Reason        string     `json:"reason"`
	Retries       int        `json:"retries"`
	FirstFailedAt time.Time  `json:"first_failed_at,omitzero"`
	ParkedAt      time.Time  `json:"parked_at,omitzero"`
	LastError     string     `json:"last_error,omitempty"`
	Headers       amqp.Table `json:"-"`
	Body          []byte     `json:"-"`
}

// Filter selects parked messages. Its zero value selects all of them.
type Filter struct {
	// ID selects one message id.
	ID string
	// Source selects messages parked from one work queue (as named in
	// x-dead-source, prefix included).
	Source string
}

func (f Filter) match(d *amqp.Delivery) bool {
	return (f.ID == "" || d.MessageId == f.ID) &&
		(f.Source == "" || headerString(d.Headers, HeaderDeadSource) == f.Source)
}

func parkedFrom(d *amqp.Delivery) DeadLetter {
	t := func(key string) time.Time {
		at, _ := time.Parse(time.RFC3339Nano, headerString(d.Headers, key))
		return at
	}
	return DeadLetter{
		ID: d.MessageId, Source: headerString(d.Headers, HeaderDeadSource), Reason: headerString(d.Headers, HeaderDeadReason),
		Retries: RetryCount(d.Headers), FirstFailedAt: t(HeaderFirstFailedAt), ParkedAt: t(HeaderParkedAt),
		LastError: headerString(d.Headers, HeaderLastError), Headers: d.Headers, Body: d.Body,
	}
}

// DeadLetters lists, replays and purges the messages parked in a
// topology's dead-letter queue.
//
// AMQP 0-9-1 has no way to look at a queue without taking messages from it,
// so each operation takes the messages that were in the queue when it
// started, without acking, and acks only those it has dealt with; the rest
// go back when it ends. If it is interrupted, every message it had not
// finished with returns to the queue: nothing is lost, and a replay that
// stopped between the confirm of its copy and the ack of the original
// leaves one duplicate, which the downstream dedupes.
type DeadLetters struct {
	Conn     *amqp.Connection
	Topology Topology
	// Observe, if set, is told of every replay, as an Event with outcome
	// Replayed and the round the message starts.
	Observe func(Event)
}

// walk takes up to the queue's current depth and calls fn for each
// matching message; fn says whether to ack it (remove it from the queue).
func (dl DeadLetters) walk(ctx context.Context, f Filter, fn func(*amqp.Delivery) (remove bool, err error)) error {
	ch, err := dl.Conn.Channel()
	if err != nil {
		return fmt.Errorf("open channel: %w", err)
	}
	// Closing the channel returns every message taken and not acked.
	defer ch.Close()
	queue := dl.Topology.Name(DeadQueue)
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	var aerr *amqp.Error
	if errors.As(err, &aerr) && aerr.Code == amqp.NotFound {
		return fmt.Errorf("no queue %q on the broker: declare the topology first (relay topology, or start any relay service)", queue)
	}
	if err != nil {
		return fmt.Errorf("inspect %q: %w", queue, err)
	}
	for range q.Messages {
		if err := ctx.Err(); err != nil {
			return err
		}
		d, ok, err := ch.Get(queue, false /* autoAck */)
		if err != nil {
			return fmt.Errorf("get from %q: %w", queue, err)
		}
		if !ok {
			break
		}
		if !f.match(&d) {
			continue
		}
		remove, err := fn(&d)
		if err != nil {
			return err
		}
		if remove {
			if err := d.Ack(false); err != nil {
				return fmt.Errorf("remove %q from %q: %w", d.MessageId, queue, err)
			}
		}
	}
	return nil
}

// List returns up to limit parked messages that match f (limit 0: all).
func (dl DeadLetters) List(ctx context.Context, f Filter, limit int) ([]DeadLetter, error) {
	var out []DeadLetter
	errEnough := errors.New("enough")
	err := dl.walk(ctx, f, func(d *amqp.Delivery) (bool, error) {
		out = append(out, parkedFrom(d))
		if limit > 0 && len(out) >= limit {
			return false, errEnough
		}
		return false, nil
	})
	if errors.Is(err, errEnough) {
		err = nil
	}
	return out, err
}

// ErrNotDestination means a parked message names, as the queue it came
// from, a queue that is not one of the topology's work queues: replay
// leaves it parked rather than publish it there.
var ErrNotDestination = errors.New("not one of the topology's work queues")

// Replay publishes every parked message that matches f back to the queue
// it was parked from, with a fresh retry count, and removes the parked
// copy once the broker has confirmed the new one. The message keeps its
// first failure time and starts its next round (HeaderReplays), so its
// history runs on instead of starting over. It returns how many it
// replayed. A message whose source is not one of the topology's work
// queues (ErrNotDestination), or whose queue no longer exists
// (ErrUnroutable), stays parked and is reported in the error.
func (dl DeadLetters) Replay(ctx context.Context, f Filter) (int, error) {
	pub, err := NewHop(dl.Conn)
	if err != nil {
		return 0, err
	}
	defer pub.Close()
	n := 0
	var failed []error
	err = dl.walk(ctx, f, func(d *amqp.Delivery) (bool, error) {
		source := headerString(d.Headers, HeaderDeadSource)
		if !dl.Topology.Destination(source) {
			failed = append(failed, fmt.Errorf("message %q: source %q is %w: it stays parked", d.MessageId, source, ErrNotDestination))
			return false, nil
		}
		h := without(Forward(d.Headers), pipelineHeaders)
		round := replays(d.Headers) + 1
		h[HeaderReplays] = int32(round)
		if first := headerString(d.Headers, HeaderFirstFailedAt); first != "" {
			h[HeaderFirstFailedAt] = first
		}
		if err := pub.Publish(ctx, "", source, true /* mandatory */, Republish(d, h)); err != nil {
			if errors.Is(err, ErrUnroutable) {
				failed = append(failed, fmt.Errorf("message %q: %w", d.MessageId, err))
				return false, nil
			}
			return false, err
		}
		n++
		if dl.Observe != nil {
			dl.Observe(Event{Outcome: Replayed, MessageID: d.MessageId, Queue: source, Round: round, At: time.Now(), Published: d.Timestamp})
		}
		return true, nil
	})
	return n, errors.Join(append([]error{err}, failed...)...)
}

// Purge removes every parked message that matches f for good and returns
// how many it removed.
func (dl DeadLetters) Purge(ctx context.Context, f Filter) (int, error) {
	n := 0
	err := dl.walk(ctx, f, func(*amqp.Delivery) (bool, error) {
		n++
		return true, nil
	})
	return n, err
}
