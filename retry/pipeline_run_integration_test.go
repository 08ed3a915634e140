//go:build integration

package retry_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// TestPipelineRun runs a whole Pipeline: a handler that fails twice, then
// succeeds, behind a middleware; a message that fails for good; and a stop
// that waits for the handler in hand.
func TestPipelineRun(t *testing.T) {
	url := retrytest.URL(t)
	prefix := retrytest.Prefix(t)
	var mu sync.Mutex
	attempts := map[string][]int{}
	var outcomes []retry.Event
	p := retry.New(retry.Config{
		Topology: retry.Topology{Prefix: prefix, Backend: retry.TTL, Policy: retry.Policy{Delays: []time.Duration{ms(50), ms(100)}}},
		Options: retry.Options{Observe: func(e retry.Event) {
			mu.Lock()
			outcomes = append(outcomes, e)
			mu.Unlock()
		}},
	})
	var wrapped int
	p.Use(func(next retry.Handler) retry.Handler {
		return retry.HandlerFunc(func(ctx context.Context, m *retry.Message) error {
			mu.Lock()
			wrapped++
			mu.Unlock()
			return next.Handle(ctx, m)
		})
	})
	p.Handle("jobs", "job", retry.HandlerFunc(func(ctx context.Context, m *retry.Message) error {
		mu.Lock()
		attempts[m.ID] = append(attempts[m.ID], m.Attempt)
		mu.Unlock()
		switch {
		case m.ID == "bad":
			return retry.Permanent(errors.New("cannot be done"))
		case m.Attempt < 3:
			return errors.New("try again")
		}
		return nil
	}))
	p.ServeStages()
	topo := p.Topology()
	topo.Backend = retry.TTL
	t.Cleanup(func() {
		if c, err := retry.Dial(url, "relay test cleanup"); err == nil {
			_ = topo.Delete(c)
			c.Close()
		}
	})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, url) }()
	conn := retrytest.Conn(t)
	retrytest.Eventually(t, 10*time.Second, func() bool {
		ch, err := conn.Channel()
		if err != nil {
			return false
		}
		defer ch.Close()
		q, err := ch.QueueDeclarePassive(topo.Name("jobs"), true, false, false, false, nil)
		return err == nil && q.Consumers > 0
	}, "the pipeline never consumed its queue")
	publish(t, conn, topo, "job", "good", nil)
	publish(t, conn, topo, "job", "bad", nil)

	retrytest.Eventually(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(attempts["good"]) == 3
	}, "good never got through")
	d := parked(t, conn, topo, 5*time.Second)
	assertParked(t, d, "bad", topo.Name("jobs"), retry.ReasonPermanent, 0)

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}
	mu.Lock()
	defer mu.Unlock()
	if got := attempts["good"]; len(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Errorf("attempts of good = %v, want [1 2 3]", got)
	}
	if wrapped != 4 {
		t.Errorf("the middleware saw %d calls, want 4", wrapped)
	}
	var delivered, retrying, parkedN int
	for _, e := range outcomes {
		switch e.Outcome {
		case retry.Delivered:
			delivered++
		case retry.Retrying:
			retrying++
		case retry.Parked:
			parkedN++
		}
	}
	if delivered != 1 || retrying != 2 || parkedN != 1 {
		t.Errorf("observed %d delivered, %d retrying, %d parked; want 1, 2, 1", delivered, retrying, parkedN)
	}
}

func TestPipelineNeedsWork(t *testing.T) {
	if err := retry.New(retry.Config{}).Run(context.Background(), "amqp://localhost/"); !errors.Is(err, retry.ErrNothingToRun) {
		t.Errorf("Run of an empty pipeline = %v, want ErrNothingToRun", err)
	}
}
