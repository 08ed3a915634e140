package retry

import (
	"slices"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// ttlBackend waits the policy's delays in one queue per step, each with
// its x-message-ttl: the production fallback of the article's readers,
// on any broker, every wait visible as a queue of its own. Every message
// in a step queue waits as long as the next, so none blocks another.
//
// A wait that is not one of the steps (a downstream's Retry-After, a
// rate-limit slot, a jittered delay, a scheduled send) would have to be
// rounded up to a step, and come back after the moment it waited for: a
// rate-limited copy would miss its slot and be deferred again, for ever.
// Such a wait goes through the binary delay levels instead (levels.go),
// which the TTL backend declares beside its steps, and ends exactly.
type ttlBackend struct{}

func (ttlBackend) features() Features {
	return Features{
		Backend: TTL, How: "one queue per delay step (`x-message-ttl`); any other wait in the binary delay levels",
		ExactDelays: true, Tolerance: 2 * time.Second, AnySchedule: true, Jitter: true, Types: true, Deferrals: true, FirstDelivery: true, Cluster: true,
		QueueTypes: []QueueType{Classic, Quorum}, Handoffs: []Handoff{ViaStages, Direct},
	}
}

func (ttlBackend) validate(t Topology) error { return validateLevels(t) }

func (ttlBackend) declare(t Topology, p *Plan) {
	p.Exchanges = append(p.Exchanges, Exchange{Name: t.Name(WaitExchange), Kind: amqp.ExchangeDirect})
	for _, s := range t.steps() {
		for _, d := range t.waitDestinations() {
			q, key := t.WaitQueue(s), StepName(s)
			if !t.requeues() {
				q = t.directWaitQueue(s, d)
				key = q
			}
			args := t.queueArgs(true)
			args["x-message-ttl"] = s.Milliseconds()
			args["x-dead-letter-exchange"] = "" // the default exchange,
			args["x-dead-letter-routing-key"] = d
			p.Queues = append(p.Queues, Queue{Name: q, Args: args})
			p.Bindings = append(p.Bindings, Binding{Exchange: t.Name(WaitExchange), Queue: q, Key: key})
		}
	}
	declareLevels(t, p)
}

// route sends a wait of exactly one step to that step's queue, and any
// other to the levels.
func (ttlBackend) route(t Topology, dest string, delay time.Duration) waitRoute {
	if delay%time.Millisecond != 0 || !slices.Contains(t.steps(), delay) {
		return levelsBackend{}.route(t, dest, delay)
	}
	key := StepName(delay)
	if !t.requeues() {
		key = t.directWaitQueue(delay, dest)
	}
	return waitRoute{exchange: t.Name(WaitExchange), key: key, mandatory: true, wait: delay}
}

// directWaitQueue is the TTL backend's wait queue of one step for one
// destination, with a direct hand-off.
func (t Topology) directWaitQueue(step time.Duration, dest string) string {
	return t.Name("wait." + StepName(step) + "." + strings.TrimPrefix(dest, t.Prefix))
}
