//go:build integration

package events

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// cleanupExchange deletes topo's events exchange when the test ends.
func cleanupExchange(t *testing.T, topo retry.Topology) {
	t.Cleanup(func() {
		conn, err := retry.Dial(retrytest.URL(t), "relay test cleanup")
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		defer ch.Close()
		if err := ch.ExchangeDelete(ExchangeName(topo), false /* ifUnused */, false /* noWait */); err != nil {
			t.Errorf("cleanup: delete events exchange: %v", err)
		}
	})
}

func TestEmitSubscribe(t *testing.T) {
	conn := retrytest.Conn(t)
	topo := retry.Topology{Prefix: retrytest.Prefix(t), Backend: retry.TTL, Routes: retrytest.Routes}
	cleanupExchange(t, topo)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub, err := Subscribe(ctx, conn, topo)
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}

	em := NewEmitter(topo, "worker", nil)
	runCtx, stop := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() { runErr <- em.Run(runCtx, retrytest.Conn(t)) }()

	at := time.Now().UTC().Truncate(time.Millisecond)
	email, webhook := topo.Name("email-queue"), topo.Name("webhook-queue")
	in := []retry.Event{
		{Outcome: "failed", MessageID: "n-1", Queue: email, Attempt: 1, Delay: 500 * time.Millisecond, Err: "421 try later", At: at, Published: at.Add(-20 * time.Millisecond)},
		{Outcome: "retrying", MessageID: "n-1", Queue: email, Attempt: 1, Delay: 520 * time.Millisecond, At: at.Add(time.Millisecond)},
		{Outcome: "parked", MessageID: "n-2", Queue: webhook, Attempt: 1, Reason: retry.ReasonPermanent, Err: "410 gone", At: at.Add(2 * time.Millisecond)},
	}
	for _, ev := range in {
		em.Observe(ev)
	}
	want := []notification.Event{
		{Type: "attempt", Outcome: "failed", ID: "n-1", Channel: "email", Queue: email, Attempt: 1, DelayMS: 500, Error: "421 try later", At: at, AgeMS: 20, Service: "worker"},
		{Type: "attempt", Outcome: "retrying", ID: "n-1", Channel: "email", Queue: email, Attempt: 1, DelayMS: 520, At: at.Add(time.Millisecond), Service: "worker"},
		{Type: "attempt", Outcome: "parked", ID: "n-2", Channel: "webhook", Queue: webhook, Attempt: 1, Error: "410 gone", Reason: "permanent", At: at.Add(2 * time.Millisecond), Service: "worker"},
	}
	var got []notification.Event
	for len(got) < len(want) {
		select {
		case ev, ok := <-sub:
			if !ok {
				t.Fatalf("subscription closed after %d events", len(got))
			}
			got = append(got, ev)
		case <-ctx.Done():
			t.Fatalf("received %d of %d events: %v", len(got), len(want), got)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	stop()
	select {
	case err := <-runErr:
		if err != nil {
			t.Errorf("Run after cancel = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}

	cancel()
	select {
	case _, ok := <-sub:
		for ok {
			_, ok = <-sub
		}
	case <-time.After(10 * time.Second):
		t.Fatal("subscription not closed after its context was cancelled")
	}
}

// TestSubscribeRoutingAndBadMessages: the subscription skips what is not
// an attempt event and what relay's own user did not publish.
func TestSubscribeRoutingAndBadMessages(t *testing.T) {
	conn := retrytest.Conn(t)
	topo := retry.Topology{Prefix: retrytest.Prefix(t), Backend: retry.TTL, Routes: retrytest.Routes}
	cleanupExchange(t, topo)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub, err := Subscribe(ctx, conn, topo)
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	relay := retry.User(conn)
	for _, m := range []struct{ user, body string }{
		{relay, `not json`}, {relay, `{"type":"other","id":"x"}`},
		// A forgery: without relay's user-id, the only one the broker lets
		// relay's user set.
		{"", `{"type":"attempt","outcome":"delivered","id":"forged"}`},
		{relay, `{"type":"attempt","outcome":"delivered","id":"ok"}`},
	} {
		if err := ch.PublishWithContext(ctx, ExchangeName(topo), "delivered.email",
			false, // mandatory
			false, // immediate
			amqp.Publishing{ContentType: "application/json", UserId: m.user, Body: []byte(m.body)}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case ev := <-sub:
		if diff := cmp.Diff(notification.Event{Type: "attempt", Outcome: "delivered", ID: "ok"}, ev); diff != "" {
			t.Errorf("first decodable event (-want +got):\n%s", diff)
		}
	case <-ctx.Done():
		t.Fatal("no event received")
	}
}

func TestRunReturnsWhenConnectionCloses(t *testing.T) {
	topo := retry.Topology{Prefix: retrytest.Prefix(t), Backend: retry.TTL, Routes: retrytest.Routes}
	cleanupExchange(t, topo)
	conn, err := retry.Dial(retrytest.URL(t), "relay test "+t.Name())
	if err != nil {
		t.Fatal(err)
	}
	em := NewEmitter(topo, "worker", nil)
	done := make(chan error, 1)
	go func() { done <- em.Run(context.Background(), conn) }()
	// An event that arrives shows Run is up and publishing.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sub, err := Subscribe(ctx, retrytest.Conn(t), topo)
	if err != nil {
		t.Fatal(err)
	}
	em.Observe(retry.Event{Outcome: "delivered", MessageID: "x", At: time.Now()})
	select {
	case <-sub:
	case <-ctx.Done():
		t.Fatal("event not received")
	}
	conn.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Run = nil after the connection closed, want an error")
		}
		if errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v, want a connection error", err)
		}
	case <-ctx.Done():
		t.Fatal("Run did not return after the connection closed")
	}
}

// TestRunDrainsOnShutdown: events observed just before shutdown, such as a
// worker's last outcomes, are still published and confirmed.
func TestRunDrainsOnShutdown(t *testing.T) {
	topo := retry.Topology{Prefix: retrytest.Prefix(t), Backend: retry.TTL, Routes: retrytest.Routes}
	cleanupExchange(t, topo)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub, err := Subscribe(ctx, retrytest.Conn(t), topo)
	if err != nil {
		t.Fatal(err)
	}
	em := NewEmitter(topo, "worker", nil)
	const n = 2000
	for i := range n {
		em.Observe(retry.Event{Outcome: "delivered", MessageID: fmt.Sprint(i), At: time.Now()})
	}
	runCtx, stop := context.WithCancel(ctx)
	stop() // shut down before Run even starts
	if err := em.Run(runCtx, retrytest.Conn(t)); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if left := len(em.queue) + len(em.takeRetries()); left != 0 {
		t.Errorf("%d events left unpublished", left)
	}
	for got := 0; got < n; got++ {
		select {
		case <-sub:
		case <-ctx.Done():
			t.Fatalf("received %d of %d events", got, n)
		}
	}
}
