//go:build integration

package retry_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// TestManagementCounts reads a real quorum queue's counts through the
// management API: what the stages' watch for held dead letters reads.
func TestManagementCounts(t *testing.T) {
	conn := retrytest.Conn(t)
	m := retrytest.Management(t)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	q := retrytest.Prefix(t) + ".counts"
	if _, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c, err := conn.Channel(); err == nil {
			_, _ = c.QueueDelete(q, false, false, false)
			c.Close()
		}
	})
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		dc, err := ch.PublishWithDeferredConfirm("", q, false, false, amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte("x")})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := dc.WaitContext(context.Background()); !ok || err != nil {
			t.Fatalf("publish not confirmed: %v", err)
		}
	}
	if _, ok, err := ch.Get(q, false); !ok || err != nil {
		t.Fatalf("get: %v %v", ok, err)
	}
	// The API's figures are the broker's last stats emission: wait for it.
	var c retry.QueueCounts
	retrytest.Eventually(t, 30*time.Second, func() bool {
		c, err = m.Counts(context.Background(), q)
		if err != nil {
			t.Log(err)
		}
		return err == nil && c.Messages == 3 && c.Unacked == 1
	}, "the counts of %s never showed 3 messages, 1 of them unacknowledged", q)
	if c.Ready != 2 || c.Held() != 0 || c.Leader == "" {
		t.Errorf("counts %+v: want 2 ready, none held, a leader", c)
	}
	if _, err := m.Counts(context.Background(), q+".missing"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a missing queue: %v, want a 404", err)
	}
}

// TestManagementCheckOnTheBroker checks the test broker's management API
// against an AMQP connection to it: the cluster_name the broker announces
// over AMQP is the one its API reports. An HTTP server that is not that
// API (here one that answers 404 to everything, as another broker's does
// for queues it lacks) is told apart, and no longer asked.
func TestManagementCheckOnTheBroker(t *testing.T) {
	conn := retrytest.Conn(t)
	if name, _ := conn.Properties["cluster_name"].(string); name == "" {
		t.Fatalf("the broker announces no cluster_name: %v", conn.Properties)
	}
	real := retrytest.Management(t)
	m := &retry.Management{URL: real.URL, Vhost: real.Vhost}
	if err := m.Check(context.Background(), conn); err != nil {
		t.Fatalf("the broker's own management API: %v", err)
	}

	var asked atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.NotFound(w, r)
	}))
	defer other.Close()
	m = &retry.Management{URL: other.URL, Vhost: "/"}
	if err := m.Check(context.Background(), conn); !errors.Is(err, retry.ErrOtherCluster) {
		t.Fatalf("a server that is not the broker's API: %v, want ErrOtherCluster", err)
	}
	for range 3 {
		if _, err := m.Counts(context.Background(), "jobs"); !errors.Is(err, retry.ErrOtherCluster) {
			t.Errorf("Counts: %v, want ErrOtherCluster", err)
		}
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("the other server was asked %d times, want once", n)
	}
}
