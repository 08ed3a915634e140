package retry

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// A message whose headers exceed the frame_max an AMQP connection
// negotiated cannot be delivered over it: the client closes the whole
// connection (501, frame size exceeds negotiated frame_max) the moment the
// broker sends it. AMQP 0-9-1 publishers cannot make such a message, but
// the management HTTP API, MQTT, STOMP and AMQP 1.0 can. Left alone, it
// goes back to the head of its queue and kills every consumer connection
// it meets, forever: one message stalls a stage.
//
// The quarantine breaks that loop in two steps. After the first such
// failure, the consumer comes back taking deliveries one at a time
// (prefetch 1): the messages ahead of the culprit are served, and the
// culprit, when its turn comes, fails the connection again while it is at
// the head of the queue (a consumer that disconnects returns its delivery
// to the head, on classic and quorum queues alike). After that second
// failure, the quarantine takes the head message over the management API,
// which reads it as JSON whatever its size, parks it with its large
// headers dropped, and the consumer carries on.
//
// Taking the message off the queue comes before the confirmed park, so a
// relay process that dies in the milliseconds between the two loses that
// one message: the management API can take a message, or peek at it, but
// on quorum queues a peek moves it to the back. A message that turns out
// not to be oversized (another consumer took the culprit first) is
// published back to its queue, at the tail.
type quarantine struct {
	mgmt *Management
	topo Topology
	log  *slog.Logger

	mu    sync.Mutex
	state map[string]suspicion
	// stalled holds, for a queue whose culprit is at the head and cannot
	// be moved, why not and how to fix it.
	stalled map[string]error
}

// suspicion is what the quarantine does on a queue's next connection.
type suspicion int

const (
	clear   suspicion = iota
	careful           // consume one at a time
	move              // take the head aside, then consume one at a time
)

func newQuarantine(m *Management, t Topology, log *slog.Logger) *quarantine {
	return &quarantine{mgmt: m, topo: t, log: log, state: map[string]suspicion{}, stalled: map[string]error{}}
}

// Quarantine is the guard Consumer and the Stages keep against a message
// whose headers exceed the AMQP frame, for a queue consumed by a loop of
// one's own (relay's history feed has one). On each fresh connection, call
// Check before consuming and take the deliveries it returns one at a time
// (prefetch 1) before widening the window; when consuming ends, tell
// Observe how, and whether it ended within those deliveries. The culprit,
// once at the head, is parked as headers-too-large over the management
// API, as a Consumer parks one. Without the management API it cannot be
// moved: Stalled says so, with the fix.
type Quarantine struct{ q *quarantine }

// NewQuarantine returns a Quarantine that moves culprits aside over m (nil:
// none can be moved) and parks them in t's dead-letter queue.
func NewQuarantine(m *Management, t Topology, log *slog.Logger) *Quarantine {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Quarantine{q: newQuarantine(m, t, log)}
}

// Check runs on a fresh connection before queue is consumed with a window
// of prefetch: it moves the culprit aside if it is at the head, and returns
// how many deliveries to take one at a time (0: none).
func (g *Quarantine) Check(ctx context.Context, conn *amqp.Connection, queue string, prefetch int) int {
	return g.q.check(ctx, conn, queue, prefetch)
}

// Observe notes how consuming queue ended (err nil when it stopped of its
// own accord), and whether it ended before the deliveries Check asked to
// take one at a time were all taken.
func (g *Quarantine) Observe(queue string, err error, stillCareful bool) {
	g.q.observe(queue, err, stillCareful)
}

// Stalled returns why a message too large for the AMQP frame stalls queue
// and cannot be moved aside, with the fix, or nil.
func (g *Quarantine) Stalled(queue string) error {
	g.q.mu.Lock()
	defer g.q.mu.Unlock()
	return g.q.stalled[queue]
}

// frameTooLarge reports whether err is, or wraps, a connection closed by
// the client because the broker sent a frame larger than frame_max.
func frameTooLarge(err error) bool {
	var aerr *amqp.Error
	return errors.As(err, &aerr) && aerr != nil && aerr.Code == amqp.FrameError && strings.Contains(aerr.Reason, amqp.ErrFrameTooLarge.Reason)
}

// unexplained reports whether err is a lost channel or connection with no
// reason given: no close from the broker (a restart, a forced close) and
// no read error. An oversized frame closes the connection from the
// client's side, and the consumer often learns only that its channel
// closed, not why.
func unexplained(err error) bool {
	var aerr *amqp.Error
	return errors.Is(err, ErrConnectionLost) && !errors.As(err, &aerr)
}

// observe notes how queue's consumer ended. An oversized frame, or a loss
// with no reason given, makes the queue a suspect, and one while it was
// consuming carefully puts the culprit at the head, ready to be moved. A
// consumer that got past its careful window, or ended without a loss,
// clears the queue; any other loss (a broker restart, a cut connection)
// leaves the suspicion as it was, so reconnecting never forgets it.
func (q *quarantine) observe(queue string, err error, wasCareful bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	tooLarge := frameTooLarge(err)
	switch {
	case tooLarge || unexplained(err):
		if wasCareful {
			q.state[queue] = move
		} else {
			q.state[queue] = careful
		}
	case err == nil || !wasCareful:
		delete(q.state, queue)
		delete(q.stalled, queue)
		return
	default:
		return
	}
	if tooLarge {
		q.log.Warn("a message too large for the AMQP frame closed the connection", "queue", queue, "error", err)
	} else {
		q.log.Warn("the connection closed with no reason given while consuming; a message too large for the AMQP frame may be next in the queue",
			"queue", queue, "error", err)
	}
}

// check runs on a fresh connection before queue is consumed, and returns
// how many deliveries to take one at a time (0: the normal prefetch). The
// suspicion stays until observe clears it: after a move, the queue is
// consumed carefully again, as the next message may be oversized too.
func (q *quarantine) check(ctx context.Context, conn *amqp.Connection, queue string, window int) int {
	q.mu.Lock()
	s := q.state[queue]
	if s == move {
		q.state[queue] = careful
	}
	q.mu.Unlock()
	switch s {
	case clear:
		return 0
	case careful:
		return window
	}
	if q.mgmt == nil {
		q.stall(queue, errors.New("without the management API relay cannot move it aside"),
			"enable rabbitmq_management (rabbitmq-plugins enable rabbitmq_management) and set MANAGEMENT_URL, or delete the message by hand (the management UI's Get messages, ack mode Reject requeue false)")
		return window
	}
	if err := q.mgmt.Check(ctx, conn); errors.Is(err, ErrOtherCluster) {
		q.stall(queue, err, "set MANAGEMENT_URL to the management API of the cluster relay connects to, or delete the message by hand")
		return window
	}
	moved, err := q.moveHead(ctx, conn, queue)
	switch {
	case err != nil:
		q.log.Error("move an oversized message aside", "queue", queue, "error", err)
	case moved != "":
		q.log.Warn("parked a message too large for the AMQP frame", "queue", queue, "message_id", moved, "reason", ReasonTooLarge)
	}
	return window
}

// stall logs, and keeps for Stalled, that a culprit at the head of queue
// cannot be moved aside, why, and the fix. AMQP 0-9-1 offers no way
// around the management API: the culprit's delivery tag arrives, but its
// oversized header frame closes the connection before it can be rejected,
// and basic.get fails the same way.
func (q *quarantine) stall(queue string, why error, fix string) {
	q.log.Error("a message too large for the AMQP frame stalls the queue, and relay cannot move it aside",
		"queue", queue, "error", why.Error(), "fix", fix)
	q.mu.Lock()
	q.stalled[queue] = fmt.Errorf("a message too large for the AMQP frame stalls %s, and relay cannot move it aside (%w): %s", queue, why, fix)
	q.mu.Unlock()
}

// moveHead takes the head message of queue over the management API and
// parks it if its headers do not fit the connection's frame (returning its
// id), or publishes it back to queue if they do.
func (q *quarantine) moveHead(ctx context.Context, conn *amqp.Connection, queue string) (string, error) {
	taken, err := q.mgmt.get(ctx, queue, "ack_requeue_false")
	if err != nil || taken == nil {
		return "", err
	}
	d, err := taken.delivery()
	if err != nil {
		return "", fmt.Errorf("message taken from %q: %w", queue, err)
	}
	pub, err := NewHop(conn)
	if err != nil {
		return "", fmt.Errorf("message %q taken from %q: %w", d.MessageId, queue, err)
	}
	defer pub.Close()
	frame := conn.Config.FrameSize
	if frame > 0 && headerFrameSize(d) > frame-headroom {
		if err := q.park(ctx, pub, d, queue, frame); err != nil {
			return "", fmt.Errorf("message %q taken from %q: %w", d.MessageId, queue, err)
		}
		return d.MessageId, nil
	}
	if err := pub.Publish(ctx, "", queue, true /* mandatory */, Republish(d, d.Headers)); err != nil {
		return "", fmt.Errorf("put back %q, taken from %q: %w", d.MessageId, queue, err)
	}
	q.log.Warn("the head of the queue was not the oversized message (another consumer had it); put it back at the tail",
		"queue", queue, "message_id", d.MessageId)
	return "", nil
}

// park publishes d, with its large headers dropped, to the dead-letter
// exchange.
func (q *quarantine) park(ctx context.Context, pub *Hop, d *amqp.Delivery, queue string, frame int) error {
	source := queue
	if !q.topo.Destination(queue) {
		if claim, _ := Claim(d.Headers); q.topo.Destination(claim) {
			source = claim
		}
	}
	size := headerFrameSize(d)
	d.Headers = smallHeaders(Forward(d.Headers))
	return park(ctx, pub, q.topo, d, parking{
		source: source, reason: ReasonTooLarge, retries: RetryCount(d.Headers),
		lastErr: fmt.Sprintf("its headers need about %d bytes of the %d-byte AMQP frame: moved aside from %s over the management API", size, frame, queue),
	}, time.Now())
}

// delivery rebuilds the message the management API showed as JSON.
func (m *mgmtMessage) delivery() (*amqp.Delivery, error) {
	var p struct {
		ContentType     string         `json:"content_type"`
		ContentEncoding string         `json:"content_encoding"`
		Priority        uint8          `json:"priority"`
		CorrelationID   string         `json:"correlation_id"`
		ReplyTo         string         `json:"reply_to"`
		MessageID       string         `json:"message_id"`
		Timestamp       int64          `json:"timestamp"`
		Type            string         `json:"type"`
		AppID           string         `json:"app_id"`
		Headers         map[string]any `json:"headers"`
	}
	dec := json.NewDecoder(bytes.NewReader(m.Properties))
	dec.UseNumber()
	if len(m.Properties) > 0 {
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("decode the message's properties: %w", err)
		}
	}
	body := []byte(m.Payload)
	if m.PayloadEncoding == "base64" {
		var err error
		if body, err = base64.StdEncoding.DecodeString(m.Payload); err != nil {
			return nil, fmt.Errorf("decode the message's payload: %w", err)
		}
	}
	d := &amqp.Delivery{
		ContentType: p.ContentType, ContentEncoding: p.ContentEncoding, Priority: p.Priority,
		CorrelationId: p.CorrelationID, ReplyTo: p.ReplyTo, MessageId: p.MessageID, Type: p.Type, AppId: p.AppID,
		Headers: tableOf(p.Headers), Body: body, Exchange: m.Exchange, RoutingKey: m.RoutingKey,
	}
	if p.Timestamp > 0 {
		d.Timestamp = time.Unix(p.Timestamp, 0)
	}
	return d, nil
}

// tableOf turns decoded JSON into AMQP field values.
func tableOf(m map[string]any) amqp.Table {
	if m == nil {
		return nil
	}
	t := make(amqp.Table, len(m))
	for k, v := range m {
		if v := fieldOf(v); v != nil {
			t[k] = v
		}
	}
	return t
}

func fieldOf(v any) any {
	switch x := v.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		return tableOf(x)
	case []any:
		out := make([]any, 0, len(x))
		for _, e := range x {
			if e := fieldOf(e); e != nil {
				out = append(out, e)
			}
		}
		return out
	case string, bool:
		return x
	default:
		return nil
	}
}
