package retry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// ErrNotConnected means a Producer has no connection to the broker at the
// moment: it has not made its first yet, or it lost one and is making the
// next. A publish that gets it did not happen; try again later, or tell
// the caller (relay's API answers 503).
var ErrNotConnected = errors.New("not connected to the broker")

// ProducerConfig is what a Producer publishes into and how it connects.
type ProducerConfig struct {
	// Topology is declared on every connection before anything is
	// published; Publish sends to its ingress exchange.
	Topology Topology
	// URLs are the brokers (the nodes of a cluster), tried in turn.
	URLs []string
	// Name names the connection in the management UI ("relay producer"
	// if empty).
	Name string
	// Channels is how many confirm-mode channels it publishes on, each
	// publish on the least busy one, so that one large batch's publishes
	// do not hold every other publish's confirm behind them (1 if zero).
	Channels int
	// InFlight bounds each channel's unconfirmed publishes (zero: the
	// Publisher's default).
	InFlight int
	// Window, if above zero, bounds the messages of every channel in
	// flight together, and shares it among the flows publishing (see
	// NewFlow) in turn. Whatever is in flight when a message is sent is
	// what its confirm waits behind, so the window is the most one flow's
	// backlog can hold another's publish back: small enough for a quick
	// confirm, large enough to keep the broker busy.
	Window int
	// Declare, if set, declares what else must exist on a connection
	// before the first publish (after the topology): relay's API declares
	// the history queue, so that no accepted record is unroutable.
	Declare func(ctx context.Context, conn *amqp.Connection) error
	// Logger says when the connection is made and lost (none if nil).
	Logger *slog.Logger
}

// Producer publishes into a topology with publisher confirms, on a
// connection of its own that it keeps: when the connection, or one of its
// channels, is lost, it dials again (SuperviseAny: the next URL, with
// backoff), declares the topology again and goes on. It is safe for
// concurrent use; every publish is mandatory (except where the delay
// backend cannot route at publish time) and confirmed. While it
// reconnects, a publish fails at once with ErrNotConnected.
//
// Pipeline.Producer makes one that runs until Close; a process that
// supervises its own goroutines makes one with NewProducer and calls Run.
type Producer struct {
	cfg       ProducerConfig
	window    *window // nil: no window
	current   atomic.Pointer[Publishers]
	connected chan struct{} // closed once the first connection is ready
	ready     atomic.Bool
	stop      context.CancelFunc
	done      chan error
}

// NewProducer returns a Producer for cfg, not yet connected: Run connects
// it.
func NewProducer(cfg ProducerConfig) *Producer {
	if cfg.Name == "" {
		cfg.Name = "relay producer"
	}
	if cfg.Channels <= 0 {
		cfg.Channels = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Producer{cfg: cfg, connected: make(chan struct{})}
	if cfg.Window > 0 {
		p.window = newWindow(cfg.Window)
	}
	return p
}

// hold waits for room in the window for n messages of ctx's flow, and
// returns what hands it back; without a window it returns at once.
func (p *Producer) hold(ctx context.Context, n int) (release func(), err error) {
	if p.window == nil {
		return func() {}, nil
	}
	got, err := p.window.acquire(ctx, n)
	if err != nil {
		return nil, err
	}
	return func() { p.window.release(got) }, nil
}

// Run keeps the producer connected until ctx is done, and returns nil
// then, or the error no reconnection can mend (a refused login, a
// topology that conflicts with the broker's).
func (p *Producer) Run(ctx context.Context) error {
	return SuperviseAny(ctx, p.cfg.URLs, p.cfg.Name, p.cfg.Logger, p.connect)
}

// checkEvery is how often a connected producer checks that its publish
// channels are still open: a channel error (say, the exchange was
// deleted) closes a channel but not the connection.
const checkEvery = 250 * time.Millisecond

// connect is the work of one connection: declare, open the publish
// channels, offer them until the connection or a channel closes, then
// withdraw them so that SuperviseAny dials again.
func (p *Producer) connect(ctx context.Context, conn *amqp.Connection) error {
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	if err := p.cfg.Topology.Declare(ctx, conn); err != nil {
		return err
	}
	if p.cfg.Declare != nil {
		if err := p.cfg.Declare(ctx, conn); err != nil {
			return err
		}
	}
	pubs, err := NewPublishers(conn, p.cfg.Channels, p.cfg.InFlight)
	if err != nil {
		return err
	}
	defer pubs.Close()
	p.current.Store(pubs)
	defer p.current.CompareAndSwap(pubs, nil)
	if p.ready.CompareAndSwap(false, true) {
		close(p.connected)
	}
	p.cfg.Logger.Info("broker connected", "connection", p.cfg.Name, "exchange", p.cfg.Topology.Ingress())
	tick := time.NewTicker(checkEvery)
	defer tick.Stop()
	for {
		select {
		case err := <-closed:
			if err == nil {
				return errors.New("broker connection closed")
			}
			return fmt.Errorf("broker connection closed: %w", err)
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if pubs.Closed() {
				return errors.New("publish channel closed by the broker")
			}
		}
	}
}

// publishers returns the publish channels of the connection at hand, or
// ErrNotConnected.
func (p *Producer) publishers() (*Publishers, error) {
	if pubs := p.current.Load(); pubs != nil && !pubs.Closed() {
		return pubs, nil
	}
	return nil, ErrNotConnected
}

// Connected reports whether the producer can publish now: nil when it
// can, else why not (ErrNotConnected, or that a channel closed).
func (p *Producer) Connected() error {
	pubs := p.current.Load()
	switch {
	case pubs == nil:
		return ErrNotConnected
	case pubs.Closed():
		return fmt.Errorf("%w: the publish channel closed; reconnecting", ErrNotConnected)
	}
	return nil
}

// Publish sends msg to the topology's ingress exchange with routing key,
// and returns once the broker has it: nil only when the broker took it,
// ErrUnroutable when no queue is bound with key, ErrNotConnected while it
// reconnects. A msg whose DeliveryMode is not set is sent persistent.
// Give each message a MessageId of its own: it is the Message.ID handlers
// see, and how a return is matched to its publish.
func (p *Producer) Publish(ctx context.Context, key string, msg amqp.Publishing) error {
	pubs, err := p.publishers()
	if err != nil {
		return err
	}
	if msg.DeliveryMode == 0 {
		msg.DeliveryMode = amqp.Persistent
	}
	release, err := p.hold(ctx, 1)
	if err != nil {
		return err
	}
	defer release()
	return lost(pubs, pubs.Publish(ctx, p.cfg.Topology.Ingress(), key, msg))
}

// lost marks err ErrNotConnected when the channels it came from have
// closed meanwhile: the publish did not happen, and the producer is
// reconnecting.
func lost(pubs *Publishers, err error) error {
	if err != nil && !errors.Is(err, ErrNotConnected) && pubs.Closed() {
		return fmt.Errorf("%w: %w", ErrNotConnected, err)
	}
	return err
}

// PublishAll publishes msgs, all at once on one channel, and waits for
// every confirm: errs[i] is msgs[i]'s outcome. While the producer
// reconnects every one is ErrNotConnected.
func (p *Producer) PublishAll(ctx context.Context, msgs []Outgoing) []error {
	pubs, err := p.publishers()
	if err != nil {
		return every(err, len(msgs))
	}
	release, err := p.hold(ctx, len(msgs))
	if err != nil {
		return every(err, len(msgs))
	}
	defer release()
	errs := pubs.PublishAll(ctx, msgs)
	for i := range errs {
		errs[i] = lost(pubs, errs[i])
	}
	return errs
}

// every is n outcomes, each err.
func every(err error, n int) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// PublishDelayed publishes msg along d, a way through the delay backend
// (Topology.Delayed): it reaches d's work queue once its delay is over.
func (p *Producer) PublishDelayed(ctx context.Context, d Delayed, msg amqp.Publishing) error {
	pubs, err := p.publishers()
	if err != nil {
		return err
	}
	release, err := p.hold(ctx, 1)
	if err != nil {
		return err
	}
	defer release()
	return lost(pubs, pubs.PublishDelayed(ctx, d, msg))
}

// User is the broker user the producer publishes as ("" before its first
// connection): what the broker stamps a message's user-id with.
func (p *Producer) User() string {
	if pubs := p.current.Load(); pubs != nil {
		return pubs.User()
	}
	return ""
}

// Producer declares the pipeline's topology on the first of urls that
// answers and returns a Producer into it, connected, which reconnects by
// itself until Close. The topology is the one Handle and Route have named
// so far, declared now so that a message published at once has its queue
// to go to; the pipeline need not be running, nor in this process. Auto is
// resolved as Run resolves it. It waits for a broker until ctx is done,
// and returns what no reconnection can mend (a refused login, a topology
// that conflicts with the broker's) at once.
func (p *Pipeline) Producer(ctx context.Context, urls ...string) (*Producer, error) {
	topo, err := Resolve(ctx, p.Topology(), urls, p.cfg.Logger)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	prod := NewProducer(ProducerConfig{Topology: topo, URLs: urls, Name: p.cfg.Name + " producer", Logger: p.cfg.Logger})
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	prod.stop, prod.done = stop, make(chan error, 1)
	go func() { prod.done <- prod.Run(runCtx) }()
	select {
	case <-prod.connected:
		return prod, nil
	case err := <-prod.done:
		stop()
		if err == nil {
			err = ErrNotConnected
		}
		return nil, err
	case <-ctx.Done():
		stop()
		<-prod.done
		return nil, fmt.Errorf("connect the producer: %w", ctx.Err())
	}
}

// Close stops a Producer that Pipeline.Producer made: it disconnects, and
// publishes in flight fail. It returns what stopped it, if not Close. A
// Producer run with Run stops when Run's context is done instead.
func (p *Producer) Close() error {
	if p.stop == nil {
		return nil
	}
	p.stop()
	err := <-p.done
	p.done <- err // a second Close returns the same
	return err
}
