//go:build integration

package events

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// bindOps declares a queue of the test's own bound to every operational
// event of topo, deleted when the test ends, and returns its deliveries.
func bindOps(t *testing.T, conn *amqp.Connection, topo retry.Topology) <-chan amqp.Delivery {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := Declare(ch, topo); err != nil {
		t.Fatal(err)
	}
	q := topo.Name("test-ops")
	if _, err := ch.QueueDeclare(q, false /* durable */, false /* autoDelete */, false /* exclusive */, false /* noWait */, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := ch.QueueDelete(q, false /* ifUnused */, false /* ifEmpty */, false /* noWait */); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		ch.Close()
	})
	if err := ch.QueueBind(q, OpRoutingPrefix+"#", ExchangeName(topo), false /* noWait */, nil); err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume(q, "", true /* autoAck */, false /* exclusive */, false /* noLocal */, false /* noWait */, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func TestParkedIsAnOperationalEvent(t *testing.T) {
	conn := retrytest.Conn(t)
	topo := retry.Topology{Prefix: retrytest.Prefix(t), Backend: retry.TTL, Routes: retrytest.Routes}
	cleanupExchange(t, topo)
	ops := bindOps(t, conn, topo)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	em := NewEmitter(topo, "retrier", nil)
	go func() { _ = em.Run(ctx, retrytest.Conn(t)) }()

	at := time.Now().UTC().Truncate(time.Millisecond)
	webhook := topo.Name("webhook-queue")
	// A retry is no operational event; the park is.
	em.Observe(retry.Event{Outcome: retry.Retrying, MessageID: "n-1", Queue: webhook, Attempt: 1, At: at})
	em.Observe(retry.Event{Outcome: retry.Parked, MessageID: "n-1", Queue: webhook, Attempt: 3, Round: 1,
		Reason: retry.ReasonMaxRetries, Err: "503 Service Unavailable", At: at})

	var d amqp.Delivery
	select {
	case d = <-ops:
	case <-ctx.Done():
		t.Fatal("no operational event")
	}
	if d.RoutingKey != "operator.copy.parked" || d.Type != notification.OpCopyParked || d.DeliveryMode != amqp.Persistent {
		t.Errorf("published with key %q, type %q, delivery mode %d; want operator.copy.parked, copy.parked, persistent",
			d.RoutingKey, d.Type, d.DeliveryMode)
	}
	var got notification.Operational
	if err := json.Unmarshal(d.Body, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.ID) != len(OpIDPrefix)+26 || got.ID[:len(OpIDPrefix)] != OpIDPrefix || d.MessageId != got.ID {
		t.Errorf("event id %q (message id %q), want evt_ and 26 characters", got.ID, d.MessageId)
	}
	want := notification.Operational{Type: "copy.parked", ID: got.ID, Timestamp: at, Service: "retrier",
		Data: notification.OpData{NotificationID: "n-1", Channel: "webhook", Queue: webhook, Attempt: 3, Round: 1,
			Reason: "max-retries", LastError: "503 Service Unavailable"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("copy.parked event (-want +got):\n%s", diff)
	}
	em.Operate(notification.Operational{Type: notification.OpEndpointEnabled, Data: notification.OpData{EndpointID: "ep_x"}})
	select {
	case d = <-ops:
		if d.RoutingKey != "operator.endpoint.enabled" {
			t.Errorf("next event routed as %q, want operator.endpoint.enabled (the retry is none)", d.RoutingKey)
		}
	case <-ctx.Done():
		t.Fatal("no endpoint.enabled event")
	}
}

// TestOperatorQueueKeepsReturnedEvents returns an event to the quorum
// operator queue more often than RabbitMQ 4's default delivery limit
// (20), as the forwarder does while the broker refuses its publishes (a
// reject: it counts on every version, as a channel closed with the event
// unacked does; a nack stops counting on 4.3), and finds it still there:
// the queue has no dead-letter exchange, so a limit would drop it.
func TestOperatorQueueKeepsReturnedEvents(t *testing.T) {
	conn := retrytest.Conn(t)
	topo := retry.Topology{Prefix: retrytest.Prefix(t), Backend: retry.TTL, Routes: retrytest.Routes, QueueType: retry.Quorum}
	cleanupExchange(t, topo)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q := topo.Name(OperatorQueue)
	t.Cleanup(func() {
		if _, err := ch.QueueDelete(q, false /* ifUnused */, false /* ifEmpty */, false /* noWait */); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		ch.Close()
	})
	if err := DeclareOperatorQueue(ch, topo, retry.BrokerVersion(conn)); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false /* noWait */); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, ExchangeName(topo), OpRoutingPrefix+"copy.parked", true /* mandatory */, false, /* immediate */
		amqp.Publishing{DeliveryMode: amqp.Persistent, MessageId: "evt_kept", Body: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := dc.WaitContext(ctx); !ok || err != nil {
		t.Fatalf("publish not confirmed: %v", err)
	}
	const returns = 25
	for i := 1; i <= returns+1; i++ {
		var d amqp.Delivery
		for {
			var ok bool
			d, ok, err = ch.Get(q, false /* autoAck */)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("RabbitMQ %s: the event is gone after %d returns", retry.BrokerVersion(conn), i-1)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if d.MessageId != "evt_kept" {
			t.Fatalf("got message %q, want evt_kept", d.MessageId)
		}
		if i > returns {
			if err := d.Ack(false); err != nil {
				t.Fatal(err)
			}
			break
		}
		if err := d.Reject(true /* requeue */); err != nil {
			t.Fatal(err)
		}
	}
}
