package workshop

import (
	"context"
	"fmt"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/lab/strategy"
	"github.com/relay-demo/relay/retry"
)

// ReleaseQueue holds a run's notifications, all published before the clock
// starts, until the broker releases each into the strategy's ingress at
// its arrival time.
const ReleaseQueue = "workshop-arrivals"

// release is the run's load, published and waiting for its times.
type release struct {
	// queue is the release queue, prefixed.
	queue string
	// start is when the first notification arrives: the clock's start.
	start time.Time
	// every is the time between two arrivals.
	every time.Duration
}

// arrival is when notification i (from 0) reaches the ingress.
func (r release) arrival(i int) time.Time { return r.start.Add(time.Duration(i) * r.every) }

// releaseLead is how long before the first arrival publishing begins:
// room to publish the whole load, so that the broker, not the publisher,
// sets every arrival time.
func releaseLead(n int) time.Duration {
	return 100*time.Millisecond + time.Duration(n)*50*time.Microsecond
}

// publishLoad publishes the whole load before the clock starts, into a
// queue of the runner's own, each notification with a per-message TTL that
// expires it into the strategy's ingress (l.Exchange, l.Key) at its arrival
// time: rate per second from the returned start. So how fast the runner
// publishes is in no figure, and the arrivals keep the scenario's pace.
// Per-message TTL is safe here, unlike in per-message-ttl: the expiries
// grow along the queue, so its head always expires first. Every tenth
// notification is marked priority high.
func publishLoad(ctx context.Context, conn *amqp.Connection, prefix string, l strategy.Layout, names []string, rate float64) (release, error) {
	r := release{queue: prefix + ReleaseQueue, every: time.Duration(float64(time.Second) / max(rate, 1))}
	ch, err := conn.Channel()
	if err != nil {
		return r, fmt.Errorf("open channel: %w", err)
	}
	defer ch.Close()
	if _, err := ch.QueueDeclare(r.queue,
		true,  // durable
		false, // autoDelete
		false, // exclusive
		false, // noWait
		amqp.Table{"x-dead-letter-exchange": l.Exchange, "x-dead-letter-routing-key": l.Key}); err != nil {
		return r, fmt.Errorf("declare queue %q: %w", r.queue, err)
	}
	if err := ch.Confirm(false /* noWait */); err != nil {
		return r, fmt.Errorf("enable publisher confirms: %w", err)
	}
	r.start = time.Now().Add(releaseLead(len(names)))
	// All on one channel, in arrival order, the confirms awaited after:
	// the queue's order is the release order.
	confirms := make([]*amqp.DeferredConfirmation, len(names))
	for i, id := range names {
		priority := "standard"
		if i%10 == 9 {
			priority = "high"
		}
		ttl := max(time.Until(r.arrival(i)).Milliseconds(), 1)
		confirms[i], err = ch.PublishWithDeferredConfirmWithContext(ctx, "", r.queue,
			false, // mandatory: the queue was just declared
			false, // immediate
			amqp.Publishing{
				MessageId: id, Timestamp: time.Now(), ContentType: "application/json", DeliveryMode: amqp.Persistent,
				Expiration: strconv.FormatInt(ttl, 10), Headers: amqp.Table{"priority": priority},
				Body: fmt.Appendf(nil, `{"id":%q,"to":"/webhooks/workshop"}`, id),
			})
		if err != nil {
			return r, fmt.Errorf("publish %s: %w", id, err)
		}
	}
	if late := time.Since(r.start); late > 0 {
		// The publisher, not the broker, would have set the first
		// arrivals: the thing this is here to avoid.
		return r, fmt.Errorf("sending %d notifications took %s longer than the %s allowed before the first was due",
			len(names), late.Round(time.Millisecond), releaseLead(len(names)))
	}
	// A confirm may come after the message is due (the broker confirms a
	// persistent message once it is on disk); its TTL runs from when the
	// broker took it, which the confirm does not tell.
	for i, dc := range confirms {
		acked, err := dc.WaitContext(ctx)
		if err != nil {
			return r, fmt.Errorf("confirm of %s: %w", names[i], err)
		}
		if !acked {
			return r, fmt.Errorf("publish %s: %w", names[i], retry.ErrNacked)
		}
	}
	return r, nil
}

// deleteRelease removes the release queue, whatever it still holds.
func deleteRelease(conn *amqp.Connection, queue string) error {
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	_, err = ch.QueueDelete(queue,
		false, // ifUnused
		false, // ifEmpty
		false) // noWait
	return err
}

// waitUntil sleeps until t or until ctx is done.
func waitUntil(ctx context.Context, t time.Time) error {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
