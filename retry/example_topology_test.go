package retry_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/relay-demo/relay/retry"
)

// Plan is everything a topology declares, before anything touches the
// broker: what Declare creates, Delete removes and relay's topology
// command draws. With the TTL backend each delay of the Policy is a wait
// queue whose messages expire, after their delay, to requeue-queue; any
// other wait (a Retry-After, a scheduled send) goes through the 32 binary
// delay levels it declares too, left out here.
func ExampleTopology_Plan() {
	topo := retry.Topology{
		Prefix:  "shop.",
		Routes:  []retry.Route{{Queue: "invoices", Key: "invoice.created"}},
		Backend: retry.TTL,
		Policy:  retry.Policy{Delays: []time.Duration{time.Second, 10 * time.Second}},
	}
	plan := topo.Plan()
	level := func(name string) bool {
		return strings.HasPrefix(name, "shop.wait.level.") || name == "shop.wait.deliver"
	}
	for _, e := range plan.Exchanges {
		if level(e.Name) {
			continue
		}
		fmt.Printf("exchange %s (%s)\n", e.Name, e.Kind)
	}
	for _, q := range plan.Queues {
		if level(q.Name) {
			continue
		}
		if ttl, ok := q.Args["x-message-ttl"]; ok {
			fmt.Printf("queue %s: waits %vms, then to %s\n", q.Name, ttl, q.Args["x-dead-letter-routing-key"])
			continue
		}
		fmt.Printf("queue %s\n", q.Name)
	}
	for _, b := range plan.Bindings {
		if b.Key != "" && !level(b.Exchange) {
			fmt.Printf("bind %s -> %s with %q\n", b.Exchange, b.Queue, b.Key)
		}
	}
	// Output:
	// exchange shop.notification-exchange (direct)
	// exchange shop.error-exchange (fanout)
	// exchange shop.wait-exchange (direct)
	// exchange shop.dead-letter-exchange (headers)
	// queue shop.invoices
	// queue shop.error-queue
	// queue shop.requeue-queue
	// queue shop.wait.1s: waits 1000ms, then to shop.requeue-queue
	// queue shop.wait.10s: waits 10000ms, then to shop.requeue-queue
	// queue shop.dead-letter-queue
	// bind shop.notification-exchange -> shop.invoices with "invoice.created"
	// bind shop.wait-exchange -> shop.wait.1s with "1s"
	// bind shop.wait-exchange -> shop.wait.10s with "10s"
}
