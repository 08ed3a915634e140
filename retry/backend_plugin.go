package retry

import (
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// pluginBackend waits in the delayed-message plugin's exchange: the
// article's design. The exchange holds each message until its x-delay is
// over, then routes it on like a direct exchange.
type pluginBackend struct{}

func (pluginBackend) features() Features {
	return Features{
		Backend: Plugin, How: "an `x-delayed-message` exchange holds each message for its `x-delay`",
		ExactDelays: true, Tolerance: 2 * time.Second, AnySchedule: true, Jitter: true, Types: true, Deferrals: true, FirstDelivery: true,
		// The plugin keeps waiting messages on one node, outside any
		// queue: a cluster does not replicate them.
		Cluster: false,
		// Classic queues only: quorum queues would promise what the
		// plugin does not keep. At the broker's start it routes at once
		// the waits that fell due while the broker was down, and a quorum
		// queue without a leader yet drops them ("leader not known");
		// and it confirms a wait before its store has it on disk.
		QueueTypes: []QueueType{Classic}, Handoffs: []Handoff{ViaStages, Direct},
		QueueTypesWhy: "its waits sit in the plugin's store, outside any queue, and a quorum queue without a leader yet drops those it routes as the broker starts; " +
			"with quorum queues set DELAY_BACKEND to ttl, levels, native (RabbitMQ 4.3) or auto",
		MaxVersion: "4.2", Needs: "the rabbitmq_delayed_message_exchange plugin",
	}
}

func (pluginBackend) validate(Topology) error { return nil }

func (pluginBackend) declare(t Topology, p *Plan) {
	p.Exchanges = append(p.Exchanges, Exchange{Name: t.Name(WaitExchange), Kind: "x-delayed-message",
		Args: amqp.Table{"x-delayed-type": amqp.ExchangeDirect}})
	for _, d := range t.waitDestinations() {
		p.Bindings = append(p.Bindings, Binding{Exchange: t.Name(WaitExchange), Queue: d, Key: t.waitKey(d)})
	}
}

// route publishes to the delayed exchange with x-delay. The exchange
// routes only once the delay is over: with mandatory, it returns every
// message as unroutable (312 NO_ROUTE) at publish time and still delivers
// it later, so relay never sets mandatory here.
func (pluginBackend) route(t Topology, dest string, delay time.Duration) waitRoute {
	return waitRoute{exchange: t.Name(WaitExchange), key: t.waitKey(dest), mandatory: false,
		headers: amqp.Table{HeaderDelay: clampDelay(delay)}, wait: delay.Truncate(time.Millisecond)}
}

// waitKey is the plugin's routing key for a destination: requeue-queue's
// is "requeue", a work queue's is its name.
func (t Topology) waitKey(dest string) string {
	if dest == t.Name(RequeueQueue) {
		return requeueKey
	}
	return dest
}
