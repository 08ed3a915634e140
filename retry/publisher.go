package retry

import (
	"context"
	"errors"
	"fmt"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"
)

// ErrClosed means the Publisher's channel is gone; make a new one on a
// live connection.
var ErrClosed = errors.New("publisher closed")

// Publisher publishes messages with publisher confirms, safe for
// concurrent use, with many confirms in flight on one channel: a producer
// such as an HTTP API calls Publish from every request and each call
// returns once the broker has the message (or has refused it).
//
// Every publish is mandatory, so a message no queue would take comes back
// as ErrUnroutable instead of vanishing. The broker sends a basic.return
// before the confirm of the same publish, and the client queues it before
// it resolves the confirm; Publish therefore finds a return, matched by
// message id and routing key, by the time its confirm arrives. Message ids
// must be unique among publishes in flight for that match to hold.
type Publisher struct {
	ch    *amqp.Channel
	slots chan struct{}
	user  string

	mu       sync.Mutex
	returns  chan amqp.Return
	returned map[string]amqp.Return
}

// NewPublisher opens a confirm-mode channel on conn. inFlight bounds the
// publishes awaiting a confirm at once (zero means 256); more callers wait.
func NewPublisher(conn *amqp.Connection, inFlight int) (*Publisher, error) {
	if inFlight <= 0 {
		inFlight = 256
	}
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("open publish channel: %w", err)
	}
	if err := ch.Confirm(false /* noWait */); err != nil {
		ch.Close()
		return nil, fmt.Errorf("enable publisher confirms: %w", err)
	}
	return &Publisher{
		ch:    ch,
		slots: make(chan struct{}, inFlight),
		user:  User(conn),
		// Room for a return per publish in flight, so the connection's
		// reader never blocks on a full channel.
		returns:  ch.NotifyReturn(make(chan amqp.Return, inFlight+1)),
		returned: map[string]amqp.Return{},
	}, nil
}

// User is the user the Publisher's connection logged in as (see User): a
// message published with it as its user-id is known to come from that
// user.
func (p *Publisher) User() string { return p.user }

func returnKey(id, key string) string { return id + "\x00" + key }

// Publish sends msg to exchange with routing key and waits for the
// broker's confirm. It returns nil only when the broker took the message.
func (p *Publisher) Publish(ctx context.Context, exchange, key string, msg amqp.Publishing) error {
	return p.PublishAll(ctx, []Outgoing{{Exchange: exchange, Key: key, Msg: msg}})[0]
}

// Outgoing is one message of PublishAll: what Publish takes.
type Outgoing struct {
	Exchange, Key string
	Msg           amqp.Publishing
	// NotMandatory publishes without the mandatory flag, for an exchange
	// that cannot route at publish time (the delayed-message plugin's):
	// such a message never comes back as ErrUnroutable.
	NotMandatory bool
}

// pending is a message sent and not yet confirmed; it holds a slot.
type pending struct {
	i  int
	dc *amqp.DeferredConfirmation
}

// PublishAll sends every message of msgs, then waits for their confirms
// together: n messages cost one wait for the broker, not n, and no
// goroutine of their own. errs[i] is nil only when the broker took
// msgs[i], as Publish says. A caller holds a slot per message in flight
// but never waits for a slot while it holds one: when none is free it
// first waits for its own confirms, which frees theirs.
func (p *Publisher) PublishAll(ctx context.Context, msgs []Outgoing) (errs []error) {
	errs = make([]error, len(msgs))
	var inFlight []pending
	settle := func() {
		for _, f := range inFlight {
			errs[f.i] = p.settle(ctx, msgs[f.i], f.dc)
			<-p.slots
		}
		inFlight = inFlight[:0]
	}
	defer settle()
	for i, m := range msgs {
		select {
		case p.slots <- struct{}{}:
		default:
			settle()
			select {
			case p.slots <- struct{}{}:
			case <-ctx.Done():
				errs[i] = ctx.Err()
				continue
			}
		}
		dc, err := p.send(ctx, m)
		if err != nil {
			<-p.slots
			errs[i] = err
			continue
		}
		inFlight = append(inFlight, pending{i: i, dc: dc})
	}
	return errs
}

// send publishes m, mandatory unless it says otherwise, in confirm mode,
// without waiting.
func (p *Publisher) send(ctx context.Context, m Outgoing) (*amqp.DeferredConfirmation, error) {
	if p.ch.IsClosed() {
		return nil, ErrClosed
	}
	dc, err := p.ch.PublishWithDeferredConfirmWithContext(ctx, m.Exchange, m.Key, !m.NotMandatory, false /* immediate */, m.Msg)
	if err != nil {
		if p.ch.IsClosed() {
			return nil, fmt.Errorf("%w: %w", ErrClosed, err)
		}
		return nil, fmt.Errorf("publish to exchange %q key %q: %w", m.Exchange, m.Key, err)
	}
	return dc, nil
}

// settle waits for the confirm of m, sent as dc, and says whether the
// broker took it.
func (p *Publisher) settle(ctx context.Context, m Outgoing, dc *amqp.DeferredConfirmation) error {
	exchange, key := m.Exchange, m.Key
	acked, err := dc.WaitContext(ctx)
	if err != nil {
		return fmt.Errorf("wait for confirm from exchange %q: %w", exchange, err)
	}
	if r, ok := p.takeReturn(m.Msg.MessageId, key); ok {
		return fmt.Errorf("publish to exchange %q key %q: %w (%d %s)", exchange, key, ErrUnroutable, r.ReplyCode, r.ReplyText)
	}
	if !acked {
		if p.ch.IsClosed() {
			return fmt.Errorf("publish to exchange %q key %q: %w before the confirm", exchange, key, ErrClosed)
		}
		return fmt.Errorf("publish to exchange %q key %q: %w", exchange, key, ErrNacked)
	}
	return nil
}

// takeReturn moves the queued returns into the map and takes the one for
// this publish, if any.
func (p *Publisher) takeReturn(id, key string) (amqp.Return, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
drain:
	for {
		select {
		case r, ok := <-p.returns:
			if !ok {
				// The channel closed: no return is coming, and a closed
				// Go channel would read as an endless stream of zeros.
				break drain
			}
			p.returned[returnKey(r.MessageId, r.RoutingKey)] = r
		default:
			break drain
		}
	}
	k := returnKey(id, key)
	r, ok := p.returned[k]
	delete(p.returned, k)
	return r, ok
}

// Closed reports whether the channel is gone.
func (p *Publisher) Closed() bool { return p.ch.IsClosed() }

// Close closes the channel; publishes in flight fail.
func (p *Publisher) Close() error { return p.ch.Close() }
