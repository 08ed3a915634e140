package retry

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Count returns how many parked messages match f, as the queue stands
// now, and removes nothing: what a Replay or Purge of f would take. It is
// a dry run: it walks the queue as they do, holding no message in memory.
func (dl DeadLetters) Count(ctx context.Context, f Filter) (int, error) {
	return dl.walk(ctx, f, func(*amqp.Delivery) (bool, error) { return false, nil })
}

// ReplayKey names one parked copy in one round of retries: its message
// id, its copy (Topology.Copy), the queue it was parked from and the
// round that parked it (HeaderReplays). A replay starts the next round,
// so the same copy parked again has another key.
type ReplayKey struct {
	ID, Copy, Source string
	Round            int
}

// Journal remembers which parked copies a bulk replay has replayed, so a
// replay resumed after a crash does not replay them again.
//
// Bulk writes to it after the broker confirmed the replayed copy and
// before it acks the parked one: a copy found in it is one whose replay
// the broker holds, and whose parked original only needs removing.
type Journal interface {
	Replayed(ctx context.Context, k ReplayKey) (bool, error)
	Record(ctx context.Context, k ReplayKey) error
}

// Progress is how far a Bulk pass has got.
type Progress struct {
	// Matched counts the parked messages the filter selected.
	Matched int
	// Done counts those replayed (or purged) by this pass.
	Done int
	// Journaled counts those the Journal said were replayed before (by a
	// pass that stopped before removing them): removed, not replayed.
	Journaled int
	// Failed counts those that stay parked: a source that is not a work
	// queue (ErrNotDestination) or a queue that no longer exists
	// (ErrUnroutable).
	Failed int
	// LastError is the last of those failures.
	LastError string
	// Again counts the messages left parked, not selected, because the
	// Journal holds their round before: this job replayed them and they
	// failed and were parked again. A job replays a copy once.
	Again int
}

// Bulk is a replay or a purge of every parked message a Filter selects,
// in one pass over the queue, as a long-running job runs it.
type Bulk struct {
	Filter Filter
	// Purge removes the selection for good; false replays it.
	Purge bool
	// Journal, for a replay, records each replayed copy and is asked
	// before each one; nil keeps no journal (a pass that stops between a
	// confirm and an ack leaves a duplicate, as Replay does).
	Journal Journal
	// Progress, if set, is called after each selected message.
	Progress func(Progress)
}

// Bulk runs b: it takes the messages in the queue when it starts, one at
// a time, and replays (or purges) those the filter selects. Memory stays
// bounded whatever the selection: it keeps counts, never the messages.
//
// A replay publishes the copy, waits for the broker's confirm, records
// the copy in the Journal, and only then acks the parked original. If
// the pass stops at any point, what it did not ack returns to the queue;
// a later pass finds a journaled copy there and acks it without
// publishing it again. The one window left is between the confirm and
// the journal's write: a pass that dies there leaves one duplicate.
func (dl DeadLetters) Bulk(ctx context.Context, b Bulk) (Progress, error) {
	var p Progress
	var pub *Hop
	if !b.Purge {
		var err error
		if pub, err = NewHop(dl.Conn); err != nil {
			return p, err
		}
		defer pub.Close()
	}
	_, err := dl.walk(ctx, b.Filter, func(d *amqp.Delivery) (bool, error) {
		if again, err := dl.replayedBefore(ctx, b, d); again || err != nil {
			p.Again += btoi(again)
			return false, err
		}
		p.Matched++
		remove, err := dl.bulkOne(ctx, b, pub, d, &p)
		if b.Progress != nil {
			b.Progress(p)
		}
		return remove, err
	})
	return p, err
}

// replayedBefore reports whether b's Journal holds the round before d's:
// this job replayed d once already, and it came back parked.
func (dl DeadLetters) replayedBefore(ctx context.Context, b Bulk, d *amqp.Delivery) (bool, error) {
	round := replays(d.Headers)
	if b.Purge || b.Journal == nil || round == 0 {
		return false, nil
	}
	k := ReplayKey{ID: d.MessageId, Copy: dl.Topology.Copy(d.Headers), Source: headerString(d.Headers, HeaderDeadSource), Round: round - 1}
	again, err := b.Journal.Replayed(ctx, k)
	if err != nil {
		return false, fmt.Errorf("read the replay journal: %w", err)
	}
	return again, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// bulkPublishTimeout bounds the confirm and the journal write of one
// replayed copy.
const bulkPublishTimeout = 30 * time.Second

// bulkOne deals with one selected message and says whether to ack it.
func (dl DeadLetters) bulkOne(ctx context.Context, b Bulk, pub *Hop, d *amqp.Delivery, p *Progress) (bool, error) {
	if b.Purge {
		p.Done++
		return true, nil
	}
	k := ReplayKey{ID: d.MessageId, Copy: dl.Topology.Copy(d.Headers), Source: headerString(d.Headers, HeaderDeadSource), Round: replays(d.Headers)}
	if b.Journal != nil {
		done, err := b.Journal.Replayed(ctx, k)
		if err != nil {
			return false, fmt.Errorf("read the replay journal: %w", err)
		}
		if done {
			p.Journaled++
			return true, nil
		}
	}
	// Once published, a copy is seen through to its confirm and its
	// journal entry even if ctx ends: a pass stopped there would leave
	// a duplicate. ctx is checked between messages instead.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bulkPublishTimeout)
	defer cancel()
	if err := dl.replayOne(pctx, pub, d); err != nil {
		if errors.Is(err, ErrNotDestination) || errors.Is(err, ErrUnroutable) {
			p.Failed++
			p.LastError = err.Error()
			return false, nil
		}
		return false, err
	}
	if b.Journal != nil {
		if err := b.Journal.Record(pctx, k); err != nil {
			// The copy went: without the record, the original must stay
			// parked rather than vanish unnoticed; a resumed pass replays
			// it once more (the window the doc names).
			return false, fmt.Errorf("record a replay in the journal: %w", err)
		}
	}
	p.Done++
	return true, nil
}

// replayOne publishes d back to the queue it was parked from, as Replay
// does, and returns once the broker has confirmed it. A source that is
// not a work queue is ErrNotDestination, a queue gone ErrUnroutable.
func (dl DeadLetters) replayOne(ctx context.Context, pub *Hop, d *amqp.Delivery) error {
	source := headerString(d.Headers, HeaderDeadSource)
	if !dl.Topology.Destination(source) {
		return fmt.Errorf("message %q: source %q is %w: it stays parked", d.MessageId, source, ErrNotDestination)
	}
	h := replayHeaders(d.Headers)
	h[HeaderReadyAt] = time.Now().UnixMilli()
	if err := pub.Publish(ctx, "", source, true /* mandatory */, Republish(d, h)); err != nil {
		if errors.Is(err, ErrUnroutable) {
			return fmt.Errorf("message %q: %w", d.MessageId, err)
		}
		return err
	}
	if dl.Observe != nil {
		dl.Observe(Event{Outcome: Replayed, MessageID: d.MessageId, Copy: dl.Topology.Copy(d.Headers), Tenant: dl.Topology.Tenant(d.Headers), Queue: source, Round: replays(h), At: time.Now(), Published: d.Timestamp})
	}
	return nil
}
