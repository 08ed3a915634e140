//go:build integration

package retry_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// TestEventsCarryTheTenant: every decision about a message, the
// consumer's and the stages', names the tenant its producer put in the
// topology's TenantHeader, and a message without one names none.
func TestEventsCarryTheTenant(t *testing.T) {
	const header = "x-tenant"
	conn := retrytest.Conn(t)
	topo := retrytest.Declare(t, conn, retry.Topology{Backend: retry.TTL, TenantHeader: header,
		Policy: retry.Policy{Delays: []time.Duration{ms(50)}}})

	var (
		mu     sync.Mutex
		events []retry.Event
	)
	observe := func(e retry.Event) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stagesDone, consumerDone := make(chan error, 1), make(chan error, 1)
	st := &retry.Stages{Topology: topo, Options: retry.Options{Observe: observe}}
	go func() { stagesDone <- st.Run(ctx, conn) }()
	var tries sync.Map
	c := &retry.Consumer{Topology: topo, Queue: topo.WorkRoutes()[0].Queue, Options: retry.Options{Observe: observe},
		Handler: retry.HandlerFunc(func(_ context.Context, m *retry.Message) error {
			// Each message fails once, so the stages decide about it too.
			if _, again := tries.LoadOrStore(m.ID, true); again {
				return nil
			}
			return errors.New("smtp 451")
		})}
	go func() { consumerDone <- c.Run(ctx, conn) }()
	t.Cleanup(func() {
		cancel()
		for _, done := range []chan error{stagesDone, consumerDone} {
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
		}
	})

	publish(t, conn, topo, "email", "acme-1", amqp.Table{header: "acme"})
	publish(t, conn, topo, "email", "default-1", nil)
	delivered := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, e := range events {
			if e.Outcome == retry.Delivered {
				n++
			}
		}
		return n
	}
	retrytest.Eventually(t, 10*time.Second, func() bool { return delivered() == 2 }, "both messages delivered")

	mu.Lock()
	defer mu.Unlock()
	want := map[string]string{"acme-1": "acme", "default-1": ""}
	outcomes := map[retry.Outcome]bool{}
	for _, e := range events {
		outcomes[e.Outcome] = true
		if e.Tenant != want[e.MessageID] {
			t.Errorf("%s event of %s names tenant %q, want %q", e.Outcome, e.MessageID, e.Tenant, want[e.MessageID])
		}
	}
	for _, o := range []retry.Outcome{retry.Failed, retry.Retrying, retry.Requeued, retry.Delivered} {
		if !outcomes[o] {
			t.Errorf("no %s event among %d: the test covers less than it says", o, len(events))
		}
	}
}
