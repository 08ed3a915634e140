//go:build integration

package retry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// TestPipelineProducer publishes through the pipeline's own Producer, before
// and while the pipeline runs, and its handler receives both messages as
// they were sent; a key no queue is bound with comes back as
// ErrUnroutable.
func TestPipelineProducer(t *testing.T) {
	url := retrytest.URL(t)
	got := make(chan *retry.Message, 4)
	p := retry.New(retry.Config{Topology: retry.Topology{Prefix: retrytest.Prefix(t), Backend: retry.TTL}})
	p.Handle("jobs", "job", retry.HandlerFunc(func(_ context.Context, m *retry.Message) error {
		got <- m
		return nil
	}))
	p.StagesElsewhere() // every message succeeds: none needs them
	topo := p.Topology()
	topo.Backend = retry.TTL
	t.Cleanup(func() {
		if c, err := retry.Dial(url, "relay test cleanup"); err == nil {
			_ = topo.Delete(c)
			c.Close()
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pub, err := p.Producer(ctx, url)
	if err != nil {
		t.Fatalf("Producer: %v", err)
	}
	defer pub.Close()
	// Before Run: the Producer declared the queue, which keeps it.
	if err := pub.Publish(ctx, "job", amqp.Publishing{MessageId: "early", Body: []byte("one")}); err != nil {
		t.Fatalf("Publish before Run: %v", err)
	}
	if err := pub.Publish(ctx, "no-such-key", amqp.Publishing{MessageId: "lost"}); !errors.Is(err, retry.ErrUnroutable) {
		t.Errorf("Publish with an unbound key = %v, want ErrUnroutable", err)
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx, url) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()
	if err := pub.Publish(ctx, "job", amqp.Publishing{MessageId: "late", Body: []byte("two")}); err != nil {
		t.Fatalf("Publish while running: %v", err)
	}

	want := map[string]string{"early": "one", "late": "two"}
	for len(want) > 0 {
		select {
		case m := <-got:
			body, ok := want[m.ID]
			if !ok || string(m.Body) != body || m.Attempt != 1 {
				t.Fatalf("handled %q (%q, attempt %d), want one of %v at attempt 1", m.ID, m.Body, m.Attempt, want)
			}
			delete(want, m.ID)
		case <-ctx.Done():
			t.Fatalf("the handler never received %v", want)
		}
	}
}
