package retry

import (
	"context"
	"errors"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"
)

// ErrNacked means the broker refused to take responsibility for a message
// (a negative publisher confirm): the publish must be treated as failed.
var ErrNacked = errors.New("broker nacked the publish")

// ErrUnroutable means the broker returned a mandatory message because no
// queue was bound to take it.
var ErrUnroutable = errors.New("message unroutable")

// publisher publishes on its own confirm-mode channel, one message at a
// time. Keeping one publish in flight per channel is what lets a
// basic.return be matched to its publish without tagging the message: the
// broker sends the return before the confirm, on the same channel. Callers
// get parallelism by running several publishers (one per stage worker).
type publisher struct {
	conn    *amqp.Connection
	ch      *amqp.Channel
	returns chan amqp.Return
}

func newPublisher(conn *amqp.Connection) (*publisher, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("open publish channel: %w", err)
	}
	if err := ch.Confirm(false /* noWait */); err != nil {
		ch.Close()
		return nil, fmt.Errorf("enable publisher confirms: %w", err)
	}
	return &publisher{conn: conn, ch: ch, returns: ch.NotifyReturn(make(chan amqp.Return, 1))}, nil
}

// publish sends msg and waits for the broker's confirm. It returns nil only
// when the broker has the message: confirmed, and not returned.
func (p *publisher) publish(ctx context.Context, exchange, key string, mandatory bool, msg amqp.Publishing) error {
	dc, err := p.ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, mandatory, false /* immediate */, msg)
	if err != nil {
		return fmt.Errorf("publish to exchange %q key %q: %w", exchange, key, err)
	}
	acked, err := dc.WaitContext(ctx)
	if err != nil {
		return fmt.Errorf("wait for confirm from exchange %q: %w", exchange, err)
	}
	// The return, if any, was queued before the confirm was: look now.
	select {
	case r, ok := <-p.returns:
		if !ok {
			return fmt.Errorf("publish to exchange %q key %q: %w before the confirm", exchange, key, ErrClosed)
		}
		return fmt.Errorf("publish to exchange %q key %q: %w (%d %s)", exchange, key, ErrUnroutable, r.ReplyCode, r.ReplyText)
	default:
	}
	if !acked {
		return fmt.Errorf("publish to exchange %q key %q: %w", exchange, key, ErrNacked)
	}
	return nil
}

// broken reports whether the publisher must be replaced: its channel is
// gone, or a wait was abandoned and a late return could be misread.
func (p *publisher) broken(err error) bool {
	return p.ch.IsClosed() || (err != nil && !errors.Is(err, ErrNacked) && !errors.Is(err, ErrUnroutable))
}

func (p *publisher) close() {
	if p != nil {
		p.ch.Close()
	}
}

// republish builds the publishing that carries d on to its next hop: the
// body and properties it came with, persistent, under new headers. The
// expiration and user-id stay behind: one would fire in the wrong queue,
// the other must match the connection that publishes.
func republish(d *amqp.Delivery, headers amqp.Table) amqp.Publishing {
	return amqp.Publishing{
		Headers:         headers,
		ContentType:     d.ContentType,
		ContentEncoding: d.ContentEncoding,
		DeliveryMode:    amqp.Persistent,
		Priority:        d.Priority,
		CorrelationId:   d.CorrelationId,
		ReplyTo:         d.ReplyTo,
		MessageId:       d.MessageId,
		Timestamp:       d.Timestamp,
		Type:            d.Type,
		AppId:           d.AppId,
		Body:            d.Body,
	}
}
