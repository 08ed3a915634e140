package retry

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// nativeBackend is RabbitMQ 4.3's delayed retry for quorum queues: a
// consumer rejects a failed message back into its work queue, and the
// queue holds it min(first × delivery count, last) before delivering it
// again. No stage and no wait queue moves it.
//
// The broker's schedule is linear and knows nothing of a Retry-After or a
// rate-limit slot, and a reject carries no header. A wait the broker
// would not wait exactly (a deferral, a retry whose count the broker does
// not know because the message was published again since) is published
// to the binary delay levels instead, which this backend declares too, to
// come back to the work queue with relay's count in its headers.
type nativeBackend struct{}

func (nativeBackend) features() Features {
	return Features{
		Backend: Native, How: "the quorum work queue holds a rejected message (`x-delayed-retry-*`); any other wait in the binary delay levels",
		ExactDelays: true, Tolerance: 2 * time.Second, AnySchedule: false, Jitter: false, Deferrals: true, FirstDelivery: true, Cluster: true,
		QueueTypes: []QueueType{Quorum}, Handoffs: []Handoff{ViaStages, Direct},
		MinVersion: "4.3",
	}
}

func (nativeBackend) validate(t Topology) error {
	if t.QueueType != Quorum {
		return errors.New("the native delay backend is RabbitMQ 4.3's delayed retry for quorum queues: set the queue type to quorum")
	}
	first, last := t.Policy.Delay(1), t.Policy.Delay(t.Policy.Retries())
	for n := 1; n <= t.Policy.Retries(); n++ {
		if want := min(first*time.Duration(n), last); t.Policy.Delay(n) != want {
			return fmt.Errorf("%w: the native backend waits min(first × attempt, last), here %s, but the schedule is %s",
				ErrNotLinear, linear(first, last, t.Policy.Retries()), t.Policy)
		}
	}
	return validateLevels(t)
}

// declare gives each work queue the delayed-retry arguments: a rejected
// message waits min(first × attempt, last) in its own queue, and past the
// limit the queue dead-letters it to error-exchange, whose stage parks
// it. The levels serve every other wait.
func (nativeBackend) declare(t Topology, p *Plan) {
	first, last := t.Policy.Delay(1), t.Policy.Delay(t.Policy.Retries())
	for i, q := range p.Queues {
		if !t.Destination(q.Name) {
			continue
		}
		p.Queues[i].Args["x-delayed-retry-type"] = "failed"
		p.Queues[i].Args["x-delayed-retry-min"] = first.Milliseconds()
		p.Queues[i].Args["x-delayed-retry-max"] = last.Milliseconds()
		p.Queues[i].Args["x-delivery-limit"] = int64(t.Policy.Retries())
	}
	declareLevels(t, p)
}

func (nativeBackend) route(t Topology, dest string, delay time.Duration) waitRoute {
	return levelsBackend{}.route(t, dest, delay)
}

// rejects reports whether the broker, rejecting a message it has seen
// rejected deliveries times since its publish, waits delay: min(first ×
// (deliveries + 1), last).
func (nativeBackend) rejects(t Topology, deliveries int, delay time.Duration) bool {
	first, last := t.Policy.Delay(1), t.Policy.Delay(t.Policy.Retries())
	return min(first*time.Duration(deliveries+1), last) == delay
}

// linear writes the schedule the native backend would wait.
func linear(first, last time.Duration, n int) string {
	parts := make([]string, n)
	for i := range n {
		parts[i] = min(first*time.Duration(i+1), last).String()
	}
	return strings.Join(parts, ",")
}
