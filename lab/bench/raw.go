package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
)

// queueArgs are the arguments relay gives a queue of type qt (see
// retry.Topology): the raw baseline declares its queues the same way, so
// both sides pay for the same queue type and dead-letter strategy.
func queueArgs(qt retry.QueueType, deadLetters bool) amqp.Table {
	args := amqp.Table{}
	if qt == retry.Quorum {
		args["x-queue-type"] = string(retry.Quorum)
		if deadLetters {
			args["x-dead-letter-strategy"] = "at-least-once"
			args["x-overflow"] = "reject-publish"
		}
	}
	return args
}

// declareQueue declares a durable queue.
func declareQueue(ch *amqp.Channel, name string, args amqp.Table) error {
	if _, err := ch.QueueDeclare(name,
		true,  // durable
		false, // autoDelete
		false, // exclusive
		false, // noWait
		args); err != nil {
		return fmt.Errorf("declare queue %q: %w", name, err)
	}
	return nil
}

// declareExchange declares a durable exchange of kind.
func declareExchange(ch *amqp.Channel, name, kind string, args amqp.Table) error {
	if err := ch.ExchangeDeclare(name, kind,
		true,  // durable
		false, // autoDelete
		false, // internal
		false, // noWait
		args); err != nil {
		return fmt.Errorf("declare exchange %q (%s): %w", name, kind, err)
	}
	return nil
}

// message builds publish i of a run: where it goes and what it carries.
type message func(i int) (exchange, key string, msg amqp.Publishing)

// publishPipelined publishes n messages on a confirm-mode channel of its
// own, keeping up to window of them unconfirmed: the fastest way a plain
// amqp091-go client can hand the broker persistent messages it answers for.
// It returns each publish's time from send to confirm when timed is set.
func publishPipelined(ctx context.Context, conn *amqp.Connection, window, n int, timed bool, msg message) ([]time.Duration, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("open publish channel: %w", err)
	}
	defer ch.Close()
	if err := ch.Confirm(false /* noWait */); err != nil {
		return nil, fmt.Errorf("enable publisher confirms: %w", err)
	}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, window+1))
	slots := make(chan struct{}, window)
	sent := make([]atomic.Int64, n) // UnixNano of each send, by delivery tag - 1
	var lat []time.Duration
	if timed {
		lat = make([]time.Duration, 0, n)
	}
	done := make(chan error, 1)
	go func() {
		for got := 0; got < n; got++ {
			c, ok := <-confirms
			switch {
			case !ok:
				done <- fmt.Errorf("publish channel closed after %d of %d confirms", got, n)
				return
			case !c.Ack:
				done <- fmt.Errorf("publish %d of %d: %w", c.DeliveryTag, n, retry.ErrNacked)
				return
			}
			if timed {
				lat = append(lat, time.Duration(time.Now().UnixNano()-sent[c.DeliveryTag-1].Load()))
			}
			<-slots
		}
		done <- nil
	}()
	for i := range n {
		select {
		case slots <- struct{}{}:
		case err := <-done:
			return nil, err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		exchange, key, m := msg(i)
		sent[i].Store(time.Now().UnixNano())
		if err := ch.PublishWithContext(ctx, exchange, key, false /* mandatory */, false /* immediate */, m); err != nil {
			return nil, fmt.Errorf("publish %d of %d to exchange %q: %w", i+1, n, exchange, err)
		}
	}
	select {
	case err := <-done:
		return lat, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// janitor remembers everything a bench run declares and deletes it, on a
// connection of its own so that it works after the run's connections broke
// or its context ended.
type janitor struct {
	url string

	mu         sync.Mutex
	topologies []retry.Topology
	queues     []string
	exchanges  []string
}

func (j *janitor) topology(t retry.Topology) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.topologies = append(j.topologies, t)
}

func (j *janitor) queue(names ...string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.queues = append(j.queues, names...)
}

func (j *janitor) exchange(names ...string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.exchanges = append(j.exchanges, names...)
}

// clean deletes what was declared so far, messages and all, and forgets
// it. Entities already gone are no error.
func (j *janitor) clean() error {
	j.mu.Lock()
	topos, queues, exchanges := j.topologies, j.queues, j.exchanges
	j.topologies, j.queues, j.exchanges = nil, nil, nil
	j.mu.Unlock()
	if len(topos)+len(queues)+len(exchanges) == 0 {
		return nil
	}
	conn, err := j.dial()
	if err != nil {
		return fmt.Errorf("clean up: %w", err)
	}
	defer conn.Close()
	var errs []error
	for _, t := range topos {
		if err := t.Delete(conn); err != nil {
			errs = append(errs, err)
		}
	}
	// Loose queues and exchanges, as a plan of their own.
	loose := retry.Plan{}
	for _, q := range queues {
		loose.Queues = append(loose.Queues, retry.Queue{Name: q})
	}
	for _, e := range exchanges {
		loose.Exchanges = append(loose.Exchanges, retry.Exchange{Name: e})
	}
	if err := loose.Delete(conn); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// cleanupPatience is how long clean keeps trying to reach a broker that
// refuses connections, as one does for a moment while it restarts.
const cleanupPatience = 15 * time.Second

// dial connects for the cleanup, retrying for up to cleanupPatience: it
// runs on its own, after the run's context may have ended.
func (j *janitor) dial() (*amqp.Connection, error) {
	deadline := time.Now().Add(cleanupPatience)
	for attempt := 1; ; attempt++ {
		conn, err := retry.Dial(j.url, "relay-lab bench cleanup")
		if err == nil || time.Now().After(deadline) {
			return conn, err
		}
		time.Sleep(retry.Backoff(attempt)) // a pause between attempts, not a wait for an event
	}
}
