package peers

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wamqp "github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
)

// watermillPeer runs watermill-amqp's durable queue configuration with a
// message.Router: the Retry middleware retries a failed message inside
// the handler, sleeping between attempts while it holds the delivery,
// and the PoisonQueue middleware around it publishes a message whose
// retries are exhausted to a poison queue, then acks it. That is how
// watermill's own router example retries (middleware.Retry, 100ms
// InitialInterval); watermill v1.3 has no delayed requeue and
// watermill-amqp no broker-side delay, so a retry that waits has to wait
// in the handler.
//
// Each of the handlers is a subscription of its own, on a channel with
// prefetch 1: NewDurableQueueConfig's Consume.Qos.PrefetchCount, which
// every watermill-amqp configuration sets and which QosConfig's doc
// recommends ("don't dispatch a new message to a worker until it has
// processed and acknowledged the previous one"). A subscription hands the
// router one delivery and waits for its ack or nack before it takes the
// next, so a larger prefetch would add no concurrency, only deliveries
// held behind a sleeping retry: Concurrency handlers take Concurrency
// messages at once.
type watermillPeer struct {
	o             Options
	w             Workload
	topic, poison string
	conn          *amqp.Connection // for inspecting and deleting the queues
	pub           *wamqp.Publisher
	sub           *wamqp.Subscriber
	broker        string
}

func newWatermill(o Options, w Workload) peer {
	name := uniqueName()
	return &watermillPeer{o: o, w: w, topic: name + ".jobs", poison: name + ".poison"}
}

func (p *watermillPeer) config() wamqp.Config {
	c := wamqp.NewDurableQueueConfig(p.o.AMQPURL)
	c.Publish.ConfirmDelivery = true
	c.Publish.ChannelPoolSize = 8
	return c
}

func (p *watermillPeer) Setup(ctx context.Context) error {
	conn, err := retry.Dial(p.o.AMQPURL, "bench-peers watermill setup")
	if err != nil {
		return err
	}
	p.conn, p.broker = conn, brokerName(conn)
	log := watermill.NopLogger{}
	if p.pub, err = wamqp.NewPublisher(p.config(), log); err != nil {
		return fmt.Errorf("watermill publisher: %w", err)
	}
	if p.sub, err = wamqp.NewSubscriber(p.config(), log); err != nil {
		return fmt.Errorf("watermill subscriber: %w", err)
	}
	// Declared now: publishing to the default exchange drops a message
	// no queue takes.
	for _, t := range []string{p.topic, p.poison} {
		if err := p.sub.SubscribeInitialize(t); err != nil {
			return fmt.Errorf("declare %q: %w", t, err)
		}
	}
	return nil
}

func (p *watermillPeer) Enqueue(ctx context.Context, ids []string) error {
	// Publish confirms one message at a time: publish from as many
	// goroutines as the channel pool has channels.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for k := range 8 {
		wg.Go(func() {
			var msgs []*message.Message
			for i := k; i < len(ids); i += 8 {
				m := message.NewMessage(ids[i], []byte(ids[i]))
				msgs = append(msgs, m)
			}
			if err := p.pub.Publish(p.topic, msgs...); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	return firstErr(errs)
}

func firstErr(errs <-chan error) error {
	for err := range errs {
		return err
	}
	return nil
}

func (p *watermillPeer) Work(ctx context.Context, tr *tracker) error {
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 20 * time.Second}, watermill.NopLogger{})
	if err != nil {
		return fmt.Errorf("watermill router: %w", err)
	}
	poison, err := middleware.PoisonQueue(p.pub, p.poison)
	if err != nil {
		return fmt.Errorf("poison queue middleware: %w", err)
	}
	router.AddMiddleware(
		poison, // outermost: sees the error once the retries are over
		middleware.Retry{
			MaxRetries:      p.w.MaxRetries,
			InitialInterval: p.w.Delay,
			// Without MaxInterval the backoff drops to zero after the
			// first wait.
			MaxInterval: p.w.Delay,
			Multiplier:  1,
		}.Middleware,
	)
	for i := range p.w.Concurrency {
		router.AddNoPublisherHandler(fmt.Sprintf("jobs-%d", i), p.topic, p.sub, func(m *message.Message) error {
			return tr.AttemptNext(m.UUID)
		})
	}
	return router.Run(ctx)
}

func (p *watermillPeer) Parked(context.Context) (int, error) { return queueDepth(p.conn, p.poison) }

func (p *watermillPeer) Cleanup(context.Context) error {
	if p.conn == nil {
		return nil
	}
	defer p.conn.Close()
	if p.sub != nil {
		p.sub.Close()
	}
	if p.pub != nil {
		p.pub.Close()
	}
	return deleteQueues(p.conn, p.topic, p.poison)
}

func (p *watermillPeer) Server() string { return p.broker }

func (p *watermillPeer) Settings() []string {
	return []string{
		fmt.Sprintf("NewDurableQueueConfig (durable queue, persistent messages, prefetch 1 per subscription, as every watermill-amqp configuration sets and its QosConfig doc recommends: a subscription handles one delivery at a time and waits for its ack, so more prefetch adds no concurrency), publisher confirms on; %d router handlers on the queue, each a subscription of its own", p.w.Concurrency),
		fmt.Sprintf("middleware.Retry{MaxRetries: %d, InitialInterval: %s, MaxInterval: %s, Multiplier: 1}, as watermill's router example retries: the retry sleeps in the handler, which holds the delivery meanwhile (watermill v1.3 has no delayed requeue, watermill-amqp no broker-side delay); the attempt number is counted in the worker's memory", p.w.MaxRetries, p.w.Delay, p.w.Delay),
		"parked: middleware.PoisonQueue publishes an exhausted message to a poison queue, then the router acks it",
	}
}
