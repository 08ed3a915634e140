package retry

import (
	"fmt"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// levelsBackend waits in binary delay levels: level k is a queue whose
// messages all expire after 2^k ms, so none blocks another, and a message
// passes through the levels of the bits set in its delay, waiting exactly
// that long in ordinary queues on any broker.
type levelsBackend struct{}

func (levelsBackend) features() Features {
	return Features{
		Backend: Levels, How: "32 queues of 2^k ms (`x-message-ttl`), passed through by the bits of the delay",
		ExactDelays: true, Tolerance: 2 * time.Second, AnySchedule: true, Jitter: true, Types: true, Deferrals: true, FirstDelivery: true, Cluster: true,
		QueueTypes: []QueueType{Classic, Quorum}, Handoffs: []Handoff{ViaStages, Direct},
	}
}

func (levelsBackend) validate(t Topology) error { return validateLevels(t) }

func (levelsBackend) declare(t Topology, p *Plan) { declareLevels(t, p) }

func (levelsBackend) route(t Topology, dest string, delay time.Duration) waitRoute {
	exchange, key := t.levelRoute(delay, dest)
	return waitRoute{exchange: exchange, key: key, mandatory: true, wait: delay.Truncate(time.Millisecond)}
}

// validateLevels checks the destinations' names, which the levels route
// on.
func validateLevels(t Topology) error {
	for _, d := range t.waitDestinations() {
		if len(d)+2*levelCount > 255 || strings.ContainsAny(d, "*#") {
			return fmt.Errorf("queue %q: the delay levels route on its name, which must be at most %d bytes without * or #", d, 255-2*levelCount)
		}
	}
	return nil
}

// declareLevels adds the levels, and the deliver exchange that routes a
// message whose levels are over to its destination.
func declareLevels(t Topology, p *Plan) {
	// A message the deliver exchange cannot route (its queue was
	// deleted) goes to the dead-letter exchange rather than nowhere.
	p.Exchanges = append(p.Exchanges, Exchange{Name: t.deliverExchange(), Kind: amqp.ExchangeTopic,
		Args: amqp.Table{"alternate-exchange": t.Name(DeadExchange)}})
	for k := levelCount - 1; k >= 0; k-- {
		next := t.deliverExchange()
		if k > 0 {
			next = t.levelExchange(k - 1)
		}
		args := t.queueArgs(true)
		args["x-message-ttl"] = int64(1) << k
		args["x-dead-letter-exchange"] = next
		p.Exchanges = append(p.Exchanges, Exchange{Name: t.levelExchange(k), Kind: amqp.ExchangeTopic})
		p.Queues = append(p.Queues, Queue{Name: t.levelQueue(k), Args: args})
		// The word of level k in the routing key says whether the
		// message waits here (1) or passes on at once (0).
		stars := strings.Repeat("*.", levelCount-1-k)
		p.Bindings = append(p.Bindings,
			Binding{Exchange: t.levelExchange(k), Queue: t.levelQueue(k), Key: stars + "1.#"},
			Binding{Exchange: t.levelExchange(k), ToExchange: next, Key: stars + "0.#"})
	}
	for _, d := range t.waitDestinations() {
		p.Bindings = append(p.Bindings, Binding{Exchange: t.deliverExchange(), Queue: d,
			Key: strings.Repeat("*.", levelCount) + d})
	}
}

// levelExchange and levelQueue name delay level k (0..31).
func (t Topology) levelExchange(k int) string { return t.Name(fmt.Sprintf("wait.level.%02d", k)) }

func (t Topology) levelQueue(k int) string { return t.levelExchange(k) }

// deliverExchange routes a message whose levels are over to its
// destination, by the last words of its routing key.
func (t Topology) deliverExchange() string { return t.Name("wait.deliver") }

// levelRoute is where a message that waits delay and then goes to dest
// enters the levels: the exchange of its delay's highest set bit, with a
// routing key of one word per level, "1" where the delay's bit is set,
// then dest. Lower levels with a 0 pass it on at once; a delay of 0 goes
// straight to the deliver exchange.
func (t Topology) levelRoute(delay time.Duration, dest string) (exchange, key string) {
	ms := uint64(min(max(delay.Milliseconds(), 0), 1<<32-1))
	var b strings.Builder
	b.Grow(2*levelCount + len(dest))
	top := -1
	for k := levelCount - 1; k >= 0; k-- {
		if ms&(1<<k) != 0 {
			b.WriteString("1.")
			if top < 0 {
				top = k
			}
		} else {
			b.WriteString("0.")
		}
	}
	b.WriteString(dest)
	if top < 0 {
		return t.deliverExchange(), b.String()
	}
	return t.levelExchange(top), b.String()
}
