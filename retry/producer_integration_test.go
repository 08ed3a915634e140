//go:build integration

package retry_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
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

// TestProducerReconnects has the broker close a Producer's publish
// channel (a publish to an exchange that does not exist), and the
// Producer goes on by itself: publishes fail with ErrNotConnected while it
// reconnects, never silently, and succeed again on the new connection,
// where the message reaches its queue.
func TestProducerReconnects(t *testing.T) {
	url := retrytest.URL(t)
	topo := retry.Topology{Prefix: retrytest.Prefix(t), Backend: retry.TTL, Routes: []retry.Route{{Queue: "jobs", Key: "job"}}}
	t.Cleanup(func() {
		if c, err := retry.Dial(url, "relay test cleanup"); err == nil {
			_ = topo.Delete(c)
			c.Close()
		}
	})
	prod := retry.NewProducer(retry.ProducerConfig{Topology: topo, URLs: []string{url}, Name: "relay test producer"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := prod.Publish(ctx, "job", amqp.Publishing{MessageId: "too-early"}); !errors.Is(err, retry.ErrNotConnected) {
		t.Errorf("Publish before Run = %v, want ErrNotConnected", err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- prod.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()
	// publish tries until the broker has msg, with a deadline; any error
	// but ErrNotConnected ends the test.
	publish := func(id string) {
		t.Helper()
		for {
			err := prod.Publish(ctx, "job", amqp.Publishing{MessageId: id, Body: []byte(id)})
			if err == nil {
				return
			}
			if !errors.Is(err, retry.ErrNotConnected) || ctx.Err() != nil {
				t.Fatalf("Publish %s = %v, want nil or, while it connects, ErrNotConnected", id, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	publish("before")
	if prod.User() == "" {
		t.Error("User() is empty on a connected producer")
	}
	errs := prod.PublishAll(ctx, []retry.Outgoing{{Exchange: topo.Name("no-such-exchange"), Key: "job", Msg: amqp.Publishing{MessageId: "nowhere"}}})
	if errs[0] == nil {
		t.Fatal("a publish to an exchange that does not exist succeeded")
	}
	publish("after")

	conn := retrytest.Conn(t)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	want := map[string]bool{"before": true, "after": true}
	for len(want) > 0 {
		d, ok, err := ch.Get(topo.Name("jobs"), true /* autoAck */)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			if ctx.Err() != nil {
				t.Fatalf("messages %v never reached the queue", want)
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if !want[d.MessageId] {
			t.Fatalf("the queue holds %q, want only %v", d.MessageId, want)
		}
		delete(want, d.MessageId)
	}
}

// TestProducerWindow publishes through a Producer whose window holds four
// messages, from several flows at once, with calls of one message, of
// three, and of more than the window holds: every call returns, and
// every message reaches its queue once.
func TestProducerWindow(t *testing.T) {
	url := retrytest.URL(t)
	topo := retry.Topology{Prefix: retrytest.Prefix(t), Backend: retry.TTL, Routes: []retry.Route{{Queue: "jobs", Key: "job"}}}
	conn, err := retry.Dial(url, "relay test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = topo.Delete(conn)
		conn.Close()
	})
	prod := retry.NewProducer(retry.ProducerConfig{Topology: topo, URLs: []string{url}, Name: "relay test producer", Channels: 2, Window: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- prod.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()
	retrytest.Eventually(t, 30*time.Second, func() bool { return prod.Connected() == nil }, "the producer never connected")
	sizes := []int{1, 3, 10}
	const flows, calls = 4, 10
	errs := make(chan error, flows*calls*len(sizes))
	want := map[string]int{}
	var wg sync.WaitGroup
	for f := range flows {
		flow := retry.NewFlow(ctx, fmt.Sprint("owner ", f%2))
		for c := range calls {
			for _, size := range sizes {
				msgs := make([]retry.Outgoing, size)
				for i := range msgs {
					id := fmt.Sprintf("f%d-c%d-n%d-%d", f, c, size, i)
					want[id] = 1
					msgs[i] = retry.Outgoing{Exchange: topo.Ingress(), Key: "job", Msg: amqp.Publishing{MessageId: id, DeliveryMode: amqp.Persistent}}
				}
				wg.Go(func() { errs <- errors.Join(prod.PublishAll(flow, msgs)...) })
			}
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("PublishAll: %v", err)
		}
	}
	got := retrytest.TakeAll(t, conn, topo.Name("jobs"))
	if !maps.Equal(got, want) {
		t.Errorf("the queue held %d distinct messages, want each of %d once", len(got), len(want))
	}
}
