//go:build integration

package dashboard

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

func TestQueueDepths(t *testing.T) {
	conn := retrytest.Conn(t)
	topo := retrytest.Declare(t, conn, retry.Topology{Backend: retry.TTL,
		Policy: retry.Policy{Delays: []time.Duration{500 * time.Millisecond, 5 * time.Second}}})
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	publish := func(queue string, n int) {
		for i := range n {
			if err := ch.PublishWithContext(context.Background(), "", topo.Name(queue),
				false, // mandatory
				false, // immediate
				amqp.Publishing{MessageId: fmt.Sprint(i), Body: []byte("{}")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish("email-queue", 3)
	publish("dead-letter-queue", 1)
	// A queue of the plan that is gone is left out, not an error.
	if _, err := ch.QueueDelete(topo.Name("requeue-queue"), false, false, false); err != nil {
		t.Fatal(err)
	}

	depths := QueueDepths(conn, topo)
	want := map[string]int{"email-queue": 3, "webhook-queue": 0, "error-queue": 0,
		"wait.500ms": 0, "wait.5s": 0, "dead-letter-queue": 1}
	// Published messages show in the counts a moment later: poll.
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := depths(context.Background())
		if err == nil && cmp.Equal(want, got) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue depths = %v, %v; want %v", got, err, want)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The connection still works: the failed look-up had a channel of its own.
	if _, err := depths(context.Background()); err != nil {
		t.Errorf("second look-up: %v", err)
	}
	conn.Close()
	if _, err := depths(context.Background()); err == nil {
		t.Error("look-up on a closed connection: no error")
	}
}
