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
	"github.com/relay-demo/relay/retry"
)

// Exchange is the unprefixed name of the events exchange.
const Exchange = "notification-events"

// BufferSize is how many events an Emitter holds while it waits for the
// broker. When it is full, Observe waits up to ObserveWait for room before
// it drops an event.
const BufferSize = 16384

// ObserveWait bounds how long Observe waits for room in a full buffer.
const ObserveWait = 5 * time.Second

// inFlight bounds the events published and not yet confirmed.
const inFlight = 512

// drainTimeout bounds how long Run, once its context is done, goes on
// publishing what is buffered and waiting for the confirms.
const drainTimeout = 5 * time.Second

// subscriberMaxLength bounds a subscriber's queue on the broker, so a
// stalled reader costs the broker a bounded amount of memory.
const subscriberMaxLength = 10000

// ExchangeName is the events exchange of topology t.
func ExchangeName(t retry.Topology) string { return t.Name(Exchange) }

// Declare declares the events exchange of t: a durable topic exchange.
// Events are routed by "<outcome>.<channel>", such as "parked.email".
func Declare(ch *amqp.Channel, t retry.Topology) error {
	if err := ch.ExchangeDeclare(ExchangeName(t), amqp.ExchangeTopic,
		true,  // durable
		false, // autoDelete
		false, // internal
		false, // noWait
		nil); err != nil {
		return fmt.Errorf("declare events exchange: %w", err)
	}
	return nil
}

// RoutingKey is the key an event is published with: "<outcome>.<channel>".
func RoutingKey(ev notification.Event) string { return string(ev.Outcome) + "." + ev.Channel }

// Emitter publishes pipeline decisions to the events exchange.
//
// Observe queues an event and returns at once; Run, on each broker
// connection, publishes what is queued, persistent and with publisher
// confirms, up to 512 unconfirmed at a time. An event the broker did not
// confirm (a negative confirm, or a connection lost first) is published
// again on the next connection, so the history, which records events
// idempotently, misses none while the process lives. The pipeline never
// waits for a confirm: an event is confirmed asynchronously, long after
// the message it describes was acked. Only a full buffer slows Observe
// (ObserveWait at most; Dropped counts what it then gives up on), and a
// process that dies loses what it had not published yet.
type Emitter struct {
	topo     retry.Topology
	exchange string
	service  string
	channels channels
	log      *slog.Logger
	queue    chan item
	dropped  atomic.Uint64
	wait     time.Duration // ObserveWait, shorter in tests

	mu    sync.Mutex
	retry []item // unconfirmed on a lost connection: published first
}

// item is one event to publish: an attempt, or an operational event.
type item struct {
	ev notification.Event
	op *notification.Operational
}

// NewEmitter returns an Emitter for topology t whose events name service
// as their source. A nil log discards.
func NewEmitter(t retry.Topology, service string, log *slog.Logger) *Emitter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Emitter{
		topo:     t,
		exchange: ExchangeName(t),
		service:  service,
		channels: channelsOf(t),
		log:      log,
		queue:    make(chan item, BufferSize),
		wait:     ObserveWait,
	}
}

// Observe queues ev for publishing. When the buffer is full it waits up to
// ObserveWait for room, then drops the event and counts it.
func (e *Emitter) Observe(ev retry.Event) {
	e.enqueue(item{ev: e.channels.event(e.service, ev)})
	if ev.Outcome == retry.Parked {
		op := e.channels.parked(ev)
		e.Operate(op)
	}
}

// Operate queues op for publishing, as Observe does an attempt: op's
// Service, ID and Timestamp are filled in when empty.
func (e *Emitter) Operate(op notification.Operational) {
	if op.Service == "" {
		op.Service = e.service
	}
	if op.ID == "" {
		op.ID = NewOpID()
	}
	if op.Timestamp.IsZero() {
		op.Timestamp = time.Now().UTC()
	}
	e.enqueue(item{op: &op})
}

// enqueue queues out, waiting up to e.wait for room.
func (e *Emitter) enqueue(out item) {
	select {
	case e.queue <- out:
		return
	default:
	}
	t := time.NewTimer(e.wait)
	defer t.Stop()
	select {
	case e.queue <- out:
	case <-t.C:
		e.dropped.Add(1)
	}
}

// Dropped is the number of events dropped because the buffer stayed full.
func (e *Emitter) Dropped() uint64 { return e.dropped.Load() }

// dropReport is how often Run logs events dropped since its last report.
const dropReport = 10 * time.Second

// again keeps events to publish first on the next connection.
func (e *Emitter) again(evs ...item) {
	e.mu.Lock()
	e.retry = append(e.retry, evs...)
	e.mu.Unlock()
}

// takeRetries returns the events to publish again, and forgets them.
func (e *Emitter) takeRetries() []item {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.retry
	e.retry = nil
	return out
}

// Run declares the events exchange on conn and publishes queued events to
// it until ctx is done or its channel closes, as it does when the
// connection is lost (it returns the error then). Once ctx is done it goes
// on for up to 5s, publishing what is buffered and waiting for the
// confirms, then returns nil. Call it once per connection, for instance
// inside retry.Supervise.
func (e *Emitter) Run(ctx context.Context, conn *amqp.Connection) error {
	user := retry.User(conn)
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open events channel: %w", err)
	}
	defer ch.Close()
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	if err := Declare(ch, e.topo); err != nil {
		return err
	}
	if err := ch.Confirm(false /* noWait */); err != nil {
		return fmt.Errorf("events channel: enable publisher confirms: %w", err)
	}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, inFlight+1))
	pending := map[uint64]item{}
	// Whatever is still unconfirmed when Run returns is published again
	// on the next connection.
	defer func() {
		for _, ev := range pending {
			e.again(ev)
		}
	}()
	publish := func(ev item) error {
		tag := ch.GetNextPublishSeqNo()
		if err := e.publish(ch, user, ev); err != nil {
			e.again(ev)
			return err
		}
		pending[tag] = ev
		return nil
	}
	for _, ev := range e.takeRetries() {
		if err := publish(ev); err != nil {
			return err
		}
	}
	tick := time.NewTicker(dropReport)
	defer tick.Stop()
	reported := e.Dropped()
	var drain <-chan time.Time
	for {
		// Take new events only while fewer than inFlight are unconfirmed,
		// and, once draining, until the buffer is empty.
		next := e.queue
		if len(pending) >= inFlight {
			next = nil
		}
		if drain != nil && len(e.queue) == 0 {
			next = nil
			if len(pending) == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			if drain == nil {
				t := time.NewTimer(drainTimeout)
				defer t.Stop()
				drain = t.C
			}
			ctx = context.Background() // this case fires once
		case <-drain:
			if n := len(pending) + len(e.queue); n > 0 {
				e.log.Warn("stopping with events not yet confirmed", "events", n)
			}
			return nil
		case aerr, ok := <-closed:
			if !ok || aerr == nil {
				return errors.New("events channel closed")
			}
			return fmt.Errorf("events channel closed: %w", aerr)
		case c := <-confirms:
			ev, known := pending[c.DeliveryTag]
			delete(pending, c.DeliveryTag)
			if known && !c.Ack {
				if err := publish(ev); err != nil {
					return err
				}
			}
		case <-tick.C:
			if n := e.Dropped(); n != reported {
				e.log.Warn("events dropped, buffer full", "dropped", n-reported, "dropped_total", n)
				reported = n
			}
		case ev := <-next:
			if err := publish(ev); err != nil {
				return err
			}
		}
	}
}

// publish sends ev as user, the connection's: the history takes only
// events relay's own user published.
func (e *Emitter) publish(ch *amqp.Channel, user string, it item) error {
	msg := amqp.Publishing{
		ContentType:  "application/json",
		DeliveryMode: amqp.Persistent,
		UserId:       user,
	}
	var key, id string
	var body []byte
	var err error
	if it.op != nil {
		key, id = OpRoutingKey(it.op.Type), it.op.ID
		msg.Type, msg.AppId, msg.Timestamp, msg.MessageId = it.op.Type, it.op.Service, it.op.Timestamp, it.op.ID
		body, err = json.Marshal(it.op)
	} else {
		key, id = RoutingKey(it.ev), it.ev.ID
		msg.Type, msg.AppId, msg.Timestamp = it.ev.Type, it.ev.Service, it.ev.At
		body, err = json.Marshal(it.ev)
	}
	if err != nil {
		// An event holds only strings, numbers and a time: this cannot
		// happen short of a time out of JSON's range. Skip the event.
		e.log.Error("encode event", "message_id", id, "error", err)
		return nil
	}
	msg.Body = body
	err = ch.Publish(e.exchange, key,
		false, // mandatory
		false, // immediate
		msg)
	if err != nil {
		return fmt.Errorf("publish event: %w", err)
	}
	return nil
}

// Subscribe declares the events exchange of t and a private queue bound to
// every event (a server-named, exclusive, auto-delete queue that holds at
// most the newest 10000 events), and returns the events as they arrive.
// Messages that are not valid events are skipped. The channel is closed
// when ctx is done or the connection drops; subscribe again on the next
// connection.
func Subscribe(ctx context.Context, conn *amqp.Connection, t retry.Topology) (<-chan notification.Event, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("open events channel: %w", err)
	}
	deliveries, err := subscribe(ch, t)
	if err != nil {
		_ = ch.Close()
		return nil, err
	}
	user := retry.User(conn)
	out := make(chan notification.Event, 256)
	go func() {
		defer close(out)
		defer ch.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case d, ok := <-deliveries:
				if !ok {
					return
				}
				var ev notification.Event
				if !fromRelay(&d, user) || json.Unmarshal(d.Body, &ev) != nil || ev.Type != TypeAttempt {
					continue
				}
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

func subscribe(ch *amqp.Channel, t retry.Topology) (<-chan amqp.Delivery, error) {
	if err := Declare(ch, t); err != nil {
		return nil, err
	}
	q, err := ch.QueueDeclare("",
		false, // durable
		true,  // autoDelete
		true,  // exclusive
		false, // noWait
		amqp.Table{"x-max-length": subscriberMaxLength, "x-overflow": "drop-head"})
	if err != nil {
		return nil, fmt.Errorf("declare events queue: %w", err)
	}
	if err := ch.QueueBind(q.Name, "#", ExchangeName(t), false /* noWait */, nil); err != nil {
		return nil, fmt.Errorf("bind events queue: %w", err)
	}
	// Closing the channel ends the consumer; ConsumeWithContext would
	// cancel it concurrently with that close, and the two replies can cross.
	deliveries, err := ch.Consume(q.Name, "",
		true,  // autoAck
		true,  // exclusive
		false, // noLocal
		false, // noWait
		nil)
	if err != nil {
		return nil, fmt.Errorf("consume events queue: %w", err)
	}
	return deliveries, nil
}
