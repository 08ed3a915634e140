package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
)

// Exchange is the unprefixed name of the events exchange.
const Exchange = "notification-events"

// BufferSize is how many events an Emitter holds while it waits for the
// broker; beyond that, new events are dropped.
const BufferSize = 4096

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
func RoutingKey(ev Event) string { return ev.Outcome + "." + ev.Channel }

// Emitter publishes pipeline decisions to the events exchange.
//
// Observe queues an event and returns at once; Run, on each broker
// connection, publishes what is queued. Events are best-effort telemetry:
// they are published transient, without publisher confirms, and an event
// that finds the buffer full, or is in hand when the connection drops, is
// lost (Dropped counts the first kind). The pipeline itself never waits for
// them.
type Emitter struct {
	topo     retry.Topology
	exchange string
	service  string
	channels channels
	log      *slog.Logger
	queue    chan Event
	dropped  atomic.Uint64
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
		queue:    make(chan Event, BufferSize),
	}
}

// Observe queues ev for publishing. It never blocks: when the buffer is
// full the event is dropped and counted.
func (e *Emitter) Observe(ev retry.Event) {
	select {
	case e.queue <- e.channels.event(e.service, ev):
	default:
		e.dropped.Add(1)
	}
}

// Dropped is the number of events dropped because the buffer was full.
func (e *Emitter) Dropped() uint64 { return e.dropped.Load() }

// dropReport is how often Run logs events dropped since its last report.
const dropReport = 10 * time.Second

// Run declares the events exchange on conn and publishes queued events to
// it until ctx is done (it returns nil then) or its channel closes, as it
// does when the connection is lost (it returns the error then). Call it
// once per connection, for instance inside retry.Supervise.
func (e *Emitter) Run(ctx context.Context, conn *amqp.Connection) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open events channel: %w", err)
	}
	defer ch.Close()
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	if err := Declare(ch, e.topo); err != nil {
		return err
	}
	tick := time.NewTicker(dropReport)
	defer tick.Stop()
	reported := e.Dropped()
	for {
		select {
		case <-ctx.Done():
			return nil
		case aerr, ok := <-closed:
			if !ok || aerr == nil {
				return errors.New("events channel closed")
			}
			return fmt.Errorf("events channel closed: %w", aerr)
		case <-tick.C:
			if n := e.Dropped(); n != reported {
				e.log.Warn("events dropped, buffer full", "dropped", n-reported, "dropped_total", n)
				reported = n
			}
		case ev := <-e.queue:
			if err := e.publish(ctx, ch, ev); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
	}
}

func (e *Emitter) publish(ctx context.Context, ch *amqp.Channel, ev Event) error {
	body, err := json.Marshal(ev)
	if err != nil {
		// An Event holds only strings, numbers and a time: this cannot
		// happen short of a time out of JSON's range. Skip the event.
		e.log.Error("encode event", "message_id", ev.ID, "error", err)
		return nil
	}
	err = ch.PublishWithContext(ctx, e.exchange, RoutingKey(ev),
		false, // mandatory
		false, // immediate
		amqp.Publishing{
			ContentType:  "application/json",
			DeliveryMode: amqp.Transient,
			Type:         ev.Type,
			AppId:        ev.Service,
			Timestamp:    ev.At,
			Body:         body,
		})
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
func Subscribe(ctx context.Context, conn *amqp.Connection, t retry.Topology) (<-chan Event, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("open events channel: %w", err)
	}
	deliveries, err := subscribe(ch, t)
	if err != nil {
		_ = ch.Close()
		return nil, err
	}
	out := make(chan Event, 256)
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
				var ev Event
				if err := json.Unmarshal(d.Body, &ev); err != nil || ev.Type != TypeAttempt {
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
