package strategy

import (
	"context"
	"errors"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
)

// ingress adds the ingress exchange, the work queue with args, and the
// binding between them.
func (n names) ingress(p *retry.Plan, workArgs amqp.Table) {
	p.Exchanges = append(p.Exchanges, retry.Exchange{Name: n.of(IngressExchange), Kind: amqp.ExchangeDirect})
	p.Queues = append(p.Queues, retry.Queue{Name: n.of(WorkQueue), Args: workArgs})
	p.Bindings = append(p.Bindings, retry.Binding{Exchange: n.of(IngressExchange), Queue: n.of(WorkQueue), Key: RoutingKey})
}

// park adds the headers dead-letter exchange and its catch-all queue. A
// headers binding with x-match all and no other arguments matches every
// message.
func (n names) park(p *retry.Plan) {
	p.Exchanges = append(p.Exchanges, retry.Exchange{Name: n.of(DeadExchange), Kind: amqp.ExchangeHeaders})
	p.Queues = append(p.Queues, retry.Queue{Name: n.of(DeadQueue)})
	p.Bindings = append(p.Bindings, retry.Binding{Exchange: n.of(DeadExchange), Queue: n.of(DeadQueue),
		Args: amqp.Table{"x-match": "all"}})
}

// waitBack adds a wait queue fed by a fanout wait exchange, whose expired
// messages dead-letter into a direct requeue exchange that routes each back
// to the queue named by its routing key. ttl is the queue's x-message-ttl
// in milliseconds, or zero for none (per-message expiration instead).
func (n names) waitBack(p *retry.Plan, ttl int64) {
	args := amqp.Table{"x-dead-letter-exchange": n.of(RequeueExchange)}
	if ttl > 0 {
		args["x-message-ttl"] = ttl
	}
	p.Exchanges = append(p.Exchanges,
		retry.Exchange{Name: n.of(WaitExchange), Kind: amqp.ExchangeFanout},
		retry.Exchange{Name: n.of(RequeueExchange), Kind: amqp.ExchangeDirect})
	p.Queues = append(p.Queues, retry.Queue{Name: n.of(WaitQueue), Args: args})
	p.Bindings = append(p.Bindings,
		retry.Binding{Exchange: n.of(WaitExchange), Queue: n.of(WaitQueue)},
		// The routing key a message carries is the queue it failed on.
		retry.Binding{Exchange: n.of(RequeueExchange), Queue: n.of(WorkQueue), Key: n.of(WorkQueue)})
}

// declare creates every exchange, queue and binding of p, durable.
func declare(ctx context.Context, conn *amqp.Connection, p retry.Plan) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open channel: %w", err)
	}
	defer ch.Close()
	for _, e := range p.Exchanges {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := ch.ExchangeDeclare(e.Name, e.Kind,
			true,  // durable
			false, // autoDelete
			false, // internal
			false, // noWait
			e.Args); err != nil {
			return fmt.Errorf("declare exchange %q (%s): %w", e.Name, e.Kind, err)
		}
	}
	for _, q := range p.Queues {
		if _, err := ch.QueueDeclare(q.Name,
			true,  // durable
			false, // autoDelete
			false, // exclusive
			false, // noWait
			q.Args); err != nil {
			return fmt.Errorf("declare queue %q: %w", q.Name, err)
		}
	}
	for _, b := range p.Bindings {
		if err := ch.QueueBind(b.Queue, b.Key, b.Exchange, false /* noWait */, b.Args); err != nil {
			return fmt.Errorf("bind queue %q to %q: %w", b.Queue, b.Exchange, err)
		}
	}
	return nil
}

// remove deletes every queue and exchange of p, going on past what is
// already gone, and returns the first other error.
func remove(conn *amqp.Connection, p retry.Plan) error {
	var first error
	keep := func(what, name string, err error) {
		var aerr *amqp.Error
		if err != nil && !(errors.As(err, &aerr) && aerr.Code == amqp.NotFound) && first == nil {
			first = fmt.Errorf("delete %s %q: %w", what, name, err)
		}
	}
	// A failed command closes its channel: one channel per deletion.
	one := func(del func(*amqp.Channel) error) error {
		ch, err := conn.Channel()
		if err != nil {
			return err
		}
		defer ch.Close()
		return del(ch)
	}
	for _, q := range p.Queues {
		keep("queue", q.Name, one(func(ch *amqp.Channel) error {
			_, err := ch.QueueDelete(q.Name,
				false, // ifUnused: a run's consumers may still be attached
				false, // ifEmpty: messages go with the queue
				false) // noWait
			return err
		}))
	}
	for _, e := range p.Exchanges {
		keep("exchange", e.Name, one(func(ch *amqp.Channel) error {
			return ch.ExchangeDelete(e.Name, false /* ifUnused */, false /* noWait */)
		}))
	}
	return first
}
