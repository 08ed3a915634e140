package retry

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"strings"
	"time"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"
)

// DeadLetter is one message in the dead-letter queue, with its history.
type DeadLetter struct {
	ID string `json:"id"`
	// Copy is which copy of a message sent as several this is: the
	// topology's CopyHeader (see Topology.Copy). It is left out of the
	// JSON: what the copies stand for is the producer's to name.
	Copy    string `json:"-"`
	Source  string `json:"source"`
	Reason  string `json:"reason"`
	Retries int    `json:"retries"`
	// Replays is how often the message was replayed before it was parked
	// this time (HeaderReplays): the round of retries that parked it.
	Replays int `json:"replays"`
	// PriorRetries and PriorError are what the rounds before this one
	// left (HeaderPriorRetries, HeaderPriorError): a replay restarts the
	// retry count and clears the last error, and keeps them here.
	PriorRetries  int       `json:"prior_retries,omitempty"`
	PriorError    string    `json:"prior_error,omitempty"`
	FirstFailedAt time.Time `json:"first_failed_at,omitzero"`
	ParkedAt      time.Time `json:"parked_at,omitzero"`
	LastError     string    `json:"last_error,omitempty"`
	// PublishedAt is the message's timestamp property: when the API
	// first published it.
	PublishedAt     time.Time  `json:"published_at,omitzero"`
	ContentType     string     `json:"-"`
	ContentEncoding string     `json:"-"`
	Headers         amqp.Table `json:"-"`
	Body            []byte     `json:"-"`
}

// Filter selects parked messages. Its zero value selects all of them;
// each field set narrows the selection (they are ANDed).
type Filter struct {
	// ID selects one message id. The copies of one message share its id
	// (relay sends a notification as a copy for each channel, and an email
	// as a copy for each recipient), so one id can select several.
	ID string
	// Source selects messages parked from one work queue (as named in
	// x-dead-source, prefix included).
	Source string
	// Copy selects one copy: messages whose topology's CopyHeader, as
	// Topology.Copy reads it, is exactly this. Copies of one message share
	// its id and its queue, so only the header tells them apart.
	Copy string
	// Route selects messages parked from any work queue of one route, by
	// its Key (Topology.RouteOf): every lane of the route, where Source
	// names one queue.
	Route string
	// Reason selects one park reason (HeaderDeadReason): ReasonMaxRetries,
	// ReasonPermanent and the others of Reasons.
	Reason string
	// Since and Until select by when a message was parked
	// (HeaderParkedAt): at or after Since, before Until. A message that
	// does not say when it was parked matches neither.
	Since, Until time.Time
	// Error selects messages whose last error (HeaderLastError) holds this
	// text, in any case.
	Error string
	// Headers selects by the producer's own headers: each key's header
	// must hold exactly its value, and an empty value selects the
	// messages without that header (or with it empty). A producer that
	// keeps its parties apart by a header selects one party's messages
	// with it: relay's API keeps each tenant to its own by x-tenant,
	// which the default tenant's messages do not carry.
	Headers map[string]string
	// Where, if set, is asked last about each message the fields above
	// selected: a selection by what only the producer can read (such as
	// the body). It must not keep the DeadLetter: it is gone after the
	// call.
	Where func(DeadLetter) bool
}

// Reasons are every value of HeaderDeadReason relay writes.
var Reasons = []string{ReasonMaxRetries, ReasonPermanent, ReasonNoSource, ReasonNoQueue, ReasonTooLarge, ReasonDeadline, ReasonExpired}

// Match reports whether f selects the parked message p, as parked in
// topology t.
func (f Filter) Match(t Topology, p DeadLetter) bool {
	switch {
	case f.ID != "" && p.ID != f.ID,
		f.Source != "" && p.Source != f.Source,
		f.Copy != "" && p.Copy != f.Copy,
		f.Reason != "" && p.Reason != f.Reason:
		return false
	case f.Route != "":
		if r, ok := t.RouteOf(p.Source); !ok || r.Key != f.Route {
			return false
		}
	}
	if !f.Since.IsZero() && (p.ParkedAt.IsZero() || p.ParkedAt.Before(f.Since)) {
		return false
	}
	if !f.Until.IsZero() && (p.ParkedAt.IsZero() || !p.ParkedAt.Before(f.Until)) {
		return false
	}
	if f.Error != "" && !strings.Contains(strings.ToLower(p.LastError), strings.ToLower(f.Error)) {
		return false
	}
	for key, want := range f.Headers {
		if headerString(p.Headers, key) != want {
			return false
		}
	}
	return f.Where == nil || f.Where(p)
}

func (f Filter) match(t Topology, d *amqp.Delivery) bool {
	return f.Match(t, parkedFrom(t, d))
}

// ErrNotParked means no parked message has the id a Filter names: Get,
// Replay and Purge return it, wrapped with the id, rather than report
// that they did nothing. A Filter without an id never gets it.
var ErrNotParked = errors.New("not in the dead-letter queue")

// notParked is ErrNotParked for f's id (and copy and source, if it names
// them).
func notParked(f Filter) error {
	what := fmt.Sprintf("message %q", f.ID)
	if f.Copy != "" {
		what += fmt.Sprintf(" for %q", f.Copy)
	}
	if f.Source != "" {
		what += fmt.Sprintf(" parked from %q", f.Source)
	}
	return fmt.Errorf("%s: %w", what, ErrNotParked)
}

func parkedFrom(topo Topology, d *amqp.Delivery) DeadLetter {
	t := func(key string) time.Time {
		at, _ := time.Parse(time.RFC3339Nano, headerString(d.Headers, key))
		return at
	}
	return DeadLetter{
		ID: d.MessageId, Copy: topo.Copy(d.Headers), Source: headerString(d.Headers, HeaderDeadSource), Reason: headerString(d.Headers, HeaderDeadReason),
		Retries: RetryCount(d.Headers), Replays: replays(d.Headers), PriorRetries: priorRetries(d.Headers),
		PriorError: headerString(d.Headers, HeaderPriorError), FirstFailedAt: t(HeaderFirstFailedAt), ParkedAt: t(HeaderParkedAt),
		LastError: headerString(d.Headers, HeaderLastError), PublishedAt: d.Timestamp,
		ContentType: d.ContentType, ContentEncoding: d.ContentEncoding, Headers: d.Headers, Body: d.Body,
	}
}

// priorRetries reads HeaderPriorRetries; garbage counts as 0.
func priorRetries(h amqp.Table) int {
	n, ok := headerInt(h, HeaderPriorRetries)
	if !ok || n < 0 {
		return 0
	}
	return int(min(n, 1<<30))
}

// DeadLetterDetail is one parked message in full: its DeadLetter, every
// header and the body. It is what `relay dead show` prints with --json and
// GET /v1/dead-letters/{id} answers, so the two read the same.
type DeadLetterDetail struct {
	DeadLetter
	ContentType     string `json:"content_type,omitempty"`
	ContentEncoding string `json:"content_encoding,omitempty"`
	// Headers are the message's headers, x-death included; a byte-array
	// value that is UTF-8 reads as a string.
	Headers map[string]any `json:"headers"`
	// Size is the body's length in bytes.
	Size int `json:"size"`
	// Body is the body itself when it is JSON (see BodyIsJSON).
	Body json.RawMessage `json:"body,omitempty"`
	// BodyBase64 is the body in standard, padded base64 when it is not
	// JSON; ContentType says what it is.
	BodyBase64 string `json:"body_base64,omitempty"`
}

// Detail returns p in full: its headers and its body, the body as JSON
// when it is JSON, else as base64.
func (p DeadLetter) Detail() DeadLetterDetail {
	d := DeadLetterDetail{DeadLetter: p, ContentType: p.ContentType, ContentEncoding: p.ContentEncoding,
		Headers: plainTable(p.Headers), Size: len(p.Body)}
	switch {
	case len(p.Body) == 0:
	case BodyIsJSON(p.ContentType, p.ContentEncoding, p.Body):
		d.Body = json.RawMessage(p.Body)
	default:
		d.BodyBase64 = base64.StdEncoding.EncodeToString(p.Body)
	}
	return d
}

// BodyIsJSON reports whether a body can be shown as JSON: it is valid
// UTF-8 JSON, not compressed or otherwise encoded, and its content type is
// JSON (application/json, or any +json type) or not given.
func BodyIsJSON(contentType, contentEncoding string, body []byte) bool {
	if e := strings.TrimSpace(contentEncoding); e != "" && !strings.EqualFold(e, "identity") {
		return false
	}
	if contentType != "" {
		mt, _, err := mime.ParseMediaType(contentType)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return false
		}
	}
	return utf8.Valid(body) && json.Valid(body)
}

// plainTable copies h for JSON: byte arrays that are UTF-8 become strings
// (some clients send every string header that way), in nested tables and
// arrays too.
func plainTable(h amqp.Table) map[string]any {
	out := make(map[string]any, len(h))
	for k, v := range h {
		out[k] = plainValue(v)
	}
	return out
}

func plainValue(v any) any {
	switch x := v.(type) {
	case []byte:
		if utf8.Valid(x) {
			return string(x)
		}
		return x
	case amqp.Table:
		return plainTable(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plainValue(e)
		}
		return out
	default:
		return v
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
// It returns how many messages matched f.
func (dl DeadLetters) walk(ctx context.Context, f Filter, fn func(*amqp.Delivery) (remove bool, err error)) (int, error) {
	ch, err := dl.Conn.Channel()
	if err != nil {
		return 0, fmt.Errorf("open channel: %w", err)
	}
	queue := dl.Topology.Name(DeadQueue)
	// Closing the channel returns every message taken and not acked; held
	// counts them, and settle waits until the queue has them back, even
	// when ctx ended: whoever walks the queue next (a job taken over at
	// once) must find them there.
	held := 0
	defer func() { dl.settle(context.WithoutCancel(ctx), ch, queue, held) }()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	var aerr *amqp.Error
	if errors.As(err, &aerr) && aerr.Code == amqp.NotFound {
		return 0, fmt.Errorf("no queue %q on the broker: declare the topology first (relay topology, or start any relay service)", queue)
	}
	if err != nil {
		return 0, fmt.Errorf("inspect %q: %w", queue, err)
	}
	matched := 0
	for range q.Messages {
		if err := ctx.Err(); err != nil {
			return matched, err
		}
		d, ok, err := ch.Get(queue, false /* autoAck */)
		if err != nil {
			return matched, fmt.Errorf("get from %q: %w", queue, err)
		}
		if !ok {
			break
		}
		held++
		if !f.match(dl.Topology, &d) {
			continue
		}
		matched++
		remove, err := fn(&d)
		if err != nil {
			return matched, err
		}
		if remove {
			if err := d.Ack(false); err != nil {
				return matched, fmt.Errorf("remove %q from %q: %w", d.MessageId, queue, err)
			}
			held--
		}
	}
	return matched, nil
}

// settleWait bounds how long an operation on the dead-letter queue waits
// for the broker to take back the messages it held.
const settleWait = 5 * time.Second

// settle closes ch and returns once the queue holds the held messages
// again. The broker puts back what a closed channel held a moment after
// the close is confirmed (a quorum queue later than a classic one), and a
// listing, replay or purge right after this one would otherwise miss them.
// It waits until the queue's ready count is at least what it was before
// the close plus held; a consumer taking messages at the same time can
// keep that from being reached, so the wait is bounded, and it ends with
// ctx.
func (dl DeadLetters) settle(ctx context.Context, ch *amqp.Channel, queue string, held int) {
	if held == 0 || ch.IsClosed() {
		ch.Close()
		return
	}
	before, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	ch.Close()
	if err != nil {
		return
	}
	watch, err := dl.Conn.Channel()
	if err != nil {
		return
	}
	defer watch.Close()
	want := before.Messages + held
	deadline := time.Now().Add(settleWait)
	for pause := time.Millisecond; time.Now().Before(deadline); pause = min(2*pause, 50*time.Millisecond) {
		q, err := watch.QueueDeclarePassive(queue, true, false, false, false, nil)
		if err != nil || q.Messages >= want {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
	}
}

// List returns up to limit parked messages that match f (limit 0: all).
func (dl DeadLetters) List(ctx context.Context, f Filter, limit int) ([]DeadLetter, error) {
	var out []DeadLetter
	errEnough := errors.New("enough")
	_, err := dl.walk(ctx, f, func(d *amqp.Delivery) (bool, error) {
		out = append(out, parkedFrom(dl.Topology, d))
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

// Get returns every parked message with f's id (narrowed to f.Source and
// f.Copy, if set): one per copy of the message parked. None is
// ErrNotParked. Like List, it removes nothing.
func (dl DeadLetters) Get(ctx context.Context, f Filter) ([]DeadLetter, error) {
	if f.ID == "" {
		return nil, errors.New("get a parked message: no id given")
	}
	list, err := dl.List(ctx, f, 0)
	if err == nil && len(list) == 0 {
		err = notParked(f)
	}
	return list, err
}

// ErrNotDestination means a parked message names, as the queue it came
// from, a queue that is not one of the topology's work queues: replay
// leaves it parked rather than publish it there.
var ErrNotDestination = errors.New("not one of the topology's work queues")

// Replay publishes every parked message that matches f back to the queue
// it was parked from, with a fresh retry count, and removes the parked
// copy once the broker has confirmed the new one. The message keeps its
// history (replayHeaders): its first failure time, the retries and the
// last error of the rounds before, and the round it starts
// (HeaderReplays). It returns how many it replayed. A message whose
// source is not one of the topology's work queues (ErrNotDestination), or
// whose queue no longer exists (ErrUnroutable), stays parked and is
// reported in the error; an id that matches nothing is ErrNotParked.
func (dl DeadLetters) Replay(ctx context.Context, f Filter) (int, error) {
	pub, err := NewHop(dl.Conn)
	if err != nil {
		return 0, err
	}
	defer pub.Close()
	n := 0
	var failed []error
	matched, err := dl.walk(ctx, f, func(d *amqp.Delivery) (bool, error) {
		if err := dl.replayOne(ctx, pub, d); err != nil {
			if errors.Is(err, ErrNotDestination) || errors.Is(err, ErrUnroutable) {
				failed = append(failed, err)
				return false, nil
			}
			return false, err
		}
		n++
		return true, nil
	})
	if err == nil && matched == 0 && f.ID != "" {
		err = notParked(f)
	}
	return n, errors.Join(append([]error{err}, failed...)...)
}

// replayHeaders are the headers a parked message is replayed with. Every
// header relay wrote for the round that parked it goes (a fresh retry
// count, no stale x-last-error or x-dead-*), and its history carries on:
//
//   - x-first-failed-at stays, so a message parked again still says when
//     it first failed;
//   - x-replays goes up by one: the round it starts, which the events and
//     the history read (Event.Round);
//   - x-prior-retries adds this round's retries to the earlier rounds';
//   - x-prior-error is this round's last error (or, if it had none, the
//     one before).
//
// The business headers a producer set stay as they were.
func replayHeaders(h amqp.Table) amqp.Table {
	out := without(Forward(h), pipelineHeaders)
	out[HeaderReplays] = int32(min(replays(h)+1, 1<<30))
	if first := headerString(h, HeaderFirstFailedAt); first != "" {
		out[HeaderFirstFailedAt] = first
	}
	if prior := min(priorRetries(h)+RetryCount(h), 1<<30); prior > 0 {
		out[HeaderPriorRetries] = int32(prior)
	}
	if e := cmp.Or(lastError(h), headerString(h, HeaderPriorError)); e != "" {
		out[HeaderPriorError] = truncate(e, maxHeaderError)
	}
	return out
}

// Purge removes every parked message that matches f for good and returns
// how many it removed; an id that matches nothing is ErrNotParked.
func (dl DeadLetters) Purge(ctx context.Context, f Filter) (int, error) {
	n, err := dl.walk(ctx, f, func(*amqp.Delivery) (bool, error) {
		return true, nil
	})
	if err == nil && n == 0 && f.ID != "" {
		err = notParked(f)
	}
	return n, err
}
