//go:build integration

package retry_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// TestConsumerConcurrency checks that Concurrency bounds the handlers
// running at once, and that it is reached, while every message fails once
// and its hand-off to wait is confirmed after its handler has returned:
// the worker waiting for the confirm holds no handler slot.
func TestConsumerConcurrency(t *testing.T) {
	for _, handoff := range []retry.Handoff{retry.ViaStages, retry.Direct} {
		t.Run(fmt.Sprintf("handoff %q", handoff), func(t *testing.T) {
			const concurrency, n = 3, 60
			conn := retrytest.Conn(t)
			topo := retrytest.Declare(t, conn, retry.Topology{Prefix: retrytest.Prefix(t),
				Routes: []retry.Route{{Queue: "work", Key: "work"}}, Backend: retry.TTL, Handoff: handoff,
				Policy: retry.Policy{Delays: []time.Duration{20 * time.Millisecond}}})
			if handoff == retry.ViaStages {
				runStages(t, conn, topo)
			}
			var running, most atomic.Int32
			var mu sync.Mutex
			seen := map[string]int{}
			done := make(chan struct{})
			c := &retry.Consumer{Topology: topo, Queue: topo.WorkRoutes()[0].Queue, Options: retry.Options{Concurrency: concurrency, Prefetch: 4 * concurrency},
				Handler: retry.HandlerFunc(func(ctx context.Context, m *retry.Message) error {
					now := running.Add(1)
					defer running.Add(-1)
					for {
						old := most.Load()
						if now <= old || most.CompareAndSwap(old, now) {
							break
						}
					}
					time.Sleep(2 * time.Millisecond) // the handler's own work
					mu.Lock()
					defer mu.Unlock()
					seen[m.ID]++
					if seen[m.ID] == 1 {
						return errors.New("fails once")
					}
					if len(seen) == n && allTwice(seen) {
						close(done)
					}
					return nil
				})}
			ctx, cancel := context.WithCancel(context.Background())
			stopped := make(chan error, 1)
			go func() { stopped <- c.Run(ctx, conn) }()
			t.Cleanup(func() {
				cancel()
				if err := <-stopped; err != nil {
					t.Errorf("consumer: %v", err)
				}
			})
			for i := range n {
				publish(t, conn, topo, "work", fmt.Sprintf("m%d", i), nil)
			}
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("%d of %d messages came back and succeeded within 30s", len(seen), n)
			}
			if got := most.Load(); got != concurrency {
				t.Errorf("at most %d handlers ran at once, want exactly Concurrency %d", got, concurrency)
			}
		})
	}
}

func allTwice(seen map[string]int) bool {
	for _, k := range seen {
		if k < 2 {
			return false
		}
	}
	return true
}
