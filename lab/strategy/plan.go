package strategy

import (
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
