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
	// The TTL backend's levels, for any wait that is not one of its steps.
	for k := range 32 {
		want[fmt.Sprintf("wait.level.%02d", k)] = 0
	}
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

// TestPipelineDepthsOnBroker reads the real broker's depths into the
// pipeline's boxes: the wait box holds the total of its queues, on the
// TTL steps and the binary delay levels, with either hand-off.
func TestPipelineDepthsOnBroker(t *testing.T) {
	tests := []struct {
		backend retry.Backend
		handoff retry.Handoff
		fill    []string // wait queues that each get one message
	}{
		{retry.TTL, retry.ViaStages, []string{"wait.1m", "wait.2m"}},
		{retry.TTL, retry.Direct, []string{"wait.1m.email-queue", "wait.2m.webhook-queue"}},
		// The longest levels: their messages stay for weeks.
		{retry.Levels, retry.ViaStages, []string{"wait.level.31", "wait.level.30"}},
		{retry.Levels, retry.Direct, []string{"wait.level.31", "wait.level.30"}},
	}
	for _, tt := range tests {
		handoff := "stages"
		if tt.handoff == retry.Direct {
			handoff = "direct"
		}
		t.Run(string(tt.backend)+"/"+handoff, func(t *testing.T) {
			conn := retrytest.Conn(t)
			topo := retrytest.Declare(t, conn, retry.Topology{Backend: tt.backend, Handoff: tt.handoff,
				Policy: retry.Policy{Delays: []time.Duration{time.Minute, 2 * time.Minute}}})
			ch, err := conn.Channel()
			if err != nil {
				t.Fatal(err)
			}
			defer ch.Close()
			for _, q := range append([]string{"email-queue"}, tt.fill...) {
				if err := ch.PublishWithContext(context.Background(), "", topo.Name(q),
					false, // mandatory
					false, // immediate
					amqp.Publishing{MessageId: q, Body: []byte("{}")}); err != nil {
					t.Fatal(err)
				}
			}
			p := NewPipeline(topo)
			depths := QueueDepths(conn, topo)
			retrytest.Eventually(t, 10*time.Second, func() bool {
				var wait, email pipelineNode
				d, err := depths(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				for _, n := range p.view(d).Nodes {
					switch n.ID {
					case "wait":
						wait = n
					case "email-queue":
						email = n
					}
				}
				return wait.Depth != nil && *wait.Depth == len(tt.fill) && email.Depth != nil && *email.Depth == 1
			}, "the wait box did not show the %d messages of its queues, or email-queue its 1", len(tt.fill))
		})
	}
}
