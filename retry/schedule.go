package retry

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Delayed is where a producer publishes a message that must reach a work
// queue only after a wait: a scheduled send. The message waits in the
// broker, through the very backend the pipeline's retries wait in, so a
// restart of the producer, of a consumer or of the broker (with durable
// queues and persistent messages) neither loses it nor sends it early.
type Delayed struct {
	// Exchange and Key are where to publish.
	Exchange, Key string
	// Headers are the headers the route needs, added to the message's.
	Headers amqp.Table
	// Mandatory is false for the delayed-message plugin, which returns
	// every message published to it with mandatory as unroutable.
	Mandatory bool
	// Wait is how long the message will wait: the delay asked for, to the
	// millisecond.
	Wait time.Duration
}

// ErrCannotDelay means a backend that cannot make a first delivery wait
// (see Features.FirstDelivery).
var ErrCannotDelay = errors.New("the delay backend cannot delay a first delivery")

// Delay says where to publish a message that must reach work queue queue
// (prefixed) after delay: every backend waits exactly delay, to the
// millisecond (TTL and Native through the binary delay levels they declare
// beside their own waits). A backend whose features say it cannot delay a
// first delivery answers ErrCannotDelay.
//
// With the stages hand-off the message waits for requeue-queue, whose
// stage sends it to queue as it sends back a retry: HeaderOriginalQueue
// names it, and the allow-list of work queues applies. With Direct it
// goes to queue straight from its wait.
func (t Topology) Delay(queue string, delay time.Duration) (Delayed, error) {
	if !t.Destination(queue) {
		return Delayed{}, fmt.Errorf("%q is not one of the topology's work queues", queue)
	}
	if delay < 0 {
		delay = 0
	}
	if delay > MaxDelay {
		return Delayed{}, fmt.Errorf("%w: %s is longer than %s, the longest wait any delay backend expresses", ErrDelayTooLong, delay, MaxDelay)
	}
	d, err := delayerOf(t.Backend)
	if err != nil {
		return Delayed{}, fmt.Errorf("the %s backend cannot delay a message: %w", t.Backend, err)
	}
	if !d.features().FirstDelivery {
		return Delayed{}, fmt.Errorf("%w: the %s backend waits only a failed message", ErrCannotDelay, t.Backend)
	}
	dest := queue
	h := amqp.Table{}
	if t.requeues() {
		dest = t.Name(RequeueQueue)
		h[HeaderOriginalQueue] = queue
	}
	r := d.route(t, dest, delay)
	maps.Copy(h, r.headers)
	return Delayed{Exchange: r.exchange, Key: r.key, Headers: h, Mandatory: r.mandatory, Wait: r.wait}, nil
}

// PublishDelayed publishes msg along d, with d's headers added to msg's,
// and waits for the broker's confirm, as Publish does.
func (p *Publisher) PublishDelayed(ctx context.Context, d Delayed, msg amqp.Publishing) error {
	return p.PublishAll(ctx, []Outgoing{d.Outgoing(msg)})[0]
}

// Outgoing is msg along d, with d's headers added to msg's, for
// PublishAll.
func (d Delayed) Outgoing(msg amqp.Publishing) Outgoing {
	h := make(amqp.Table, len(msg.Headers)+len(d.Headers))
	maps.Copy(h, msg.Headers)
	maps.Copy(h, d.Headers)
	msg.Headers = h
	return Outgoing{Exchange: d.Exchange, Key: d.Key, Msg: msg, NotMandatory: !d.Mandatory}
}
