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

// Hop is one worker's hand-off: it publishes on a confirm-mode channel of
// its own, one message at a time, and waits for the broker's confirm.
// Keeping one publish in flight per channel is what lets a basic.return be
// matched to its publish without tagging the message: the broker sends the
// return before the confirm, on the same channel. The pipeline gets
// parallelism by giving every worker a Hop of its own; Serve does so.
type Hop struct {
	conn    *amqp.Connection
	ch      *amqp.Channel
	returns chan amqp.Return
}

// NewHop opens a Hop's channel on conn.
func NewHop(conn *amqp.Connection) (*Hop, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("open publish channel: %w", err)
	}
	if err := ch.Confirm(false /* noWait */); err != nil {
		ch.Close()
		return nil, fmt.Errorf("enable publisher confirms: %w", err)
	}
	return &Hop{conn: conn, ch: ch, returns: ch.NotifyReturn(make(chan amqp.Return, 1))}, nil
}

// Publish sends msg and waits for the broker's confirm. It returns nil only
// when the broker has the message: confirmed and, with mandatory, not
// returned (ErrUnroutable); a negative confirm is ErrNacked.
func (p *Hop) Publish(ctx context.Context, exchange, key string, mandatory bool, msg amqp.Publishing) error {
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

// broken reports whether the Hop must be replaced: its channel is
// gone, or a wait was abandoned and a late return could be misread.
func (p *Hop) broken(err error) bool {
	return p.ch.IsClosed() || (err != nil && !errors.Is(err, ErrNacked) && !errors.Is(err, ErrUnroutable))
}

// Close closes the Hop's channel; a nil Hop is fine.
func (p *Hop) Close() error {
	if p == nil {
		return nil
	}
	return p.ch.Close()
}

// Republish builds the publishing that carries d on to its next hop: the
// body and properties it came with, persistent, under new headers. The
// expiration and user-id stay behind: one would fire in the wrong queue,
// the other must match the connection that publishes.
func Republish(d *amqp.Delivery, headers amqp.Table) amqp.Publishing {
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
