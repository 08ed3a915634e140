//go:build integration

package retry_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// BenchmarkRetryRoundTrip measures retry round trips per second — fail,
// error stage, TTL wait, requeue stage, redelivery, success — next to a raw
// amqp091-go loop on the same broker (work queue → DLX → TTL queue → DLX
// back), and reports the ratio. Run with -benchtime Nx: N messages each.
func BenchmarkRetryRoundTrip(b *testing.B) {
	n := b.N
	b.StopTimer()
	raw := rawRoundTrips(b, n)
	relay := relayRoundTrips(b, n)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(raw, "raw-rt/s")
	b.ReportMetric(relay, "relay-rt/s")
	b.ReportMetric(relay/raw, "ratio")
}

const benchPrefetch = 64

func publishN(b *testing.B, conn *amqp.Connection, exchange, key string, n int) {
	ch, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		b.Fatal(err)
	}
	var pending []*amqp.DeferredConfirmation
	for i := range n {
		dc, err := ch.PublishWithDeferredConfirm(exchange, key, false, false, amqp.Publishing{
			MessageId: fmt.Sprint(i), DeliveryMode: amqp.Persistent, Body: []byte(`{"v":1}`)})
		if err != nil {
			b.Fatal(err)
		}
		pending = append(pending, dc)
	}
	for _, dc := range pending {
		if !dc.Wait() {
			b.Fatal("nacked")
		}
	}
}

func waitFor(b *testing.B, done *atomic.Int64, n int) {
	deadline := time.Now().Add(2 * time.Minute)
	for done.Load() < int64(n) {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d round trips done", done.Load(), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func rawRoundTrips(b *testing.B, n int) float64 {
	conn := retrytest.Conn(b)
	prefix := retrytest.Prefix(b)
	work, wait := prefix+"raw-work", prefix+"raw-wait"
	ch, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		_, _ = ch.QueueDelete(work, false, false, false)
		_, _ = ch.QueueDelete(wait, false, false, false)
		ch.Close()
	}()
	if _, err := ch.QueueDeclare(work, true, false, false, false, amqp.Table{
		"x-dead-letter-exchange": "", "x-dead-letter-routing-key": wait}); err != nil {
		b.Fatal(err)
	}
	if _, err := ch.QueueDeclare(wait, true, false, false, false, amqp.Table{
		"x-message-ttl": int32(1), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": work}); err != nil {
		b.Fatal(err)
	}
	if err := ch.Qos(benchPrefetch, 0, false); err != nil {
		b.Fatal(err)
	}
	ds, err := ch.Consume(work, "", false, false, false, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	var done atomic.Int64
	go func() {
		for d := range ds {
			if _, died := d.Headers["x-death"]; died {
				_ = d.Ack(false)
				done.Add(1)
			} else {
				_ = d.Nack(false, false)
			}
		}
	}()
	start := time.Now()
	publishN(b, conn, "", work, n)
	waitFor(b, &done, n)
	return float64(n) / time.Since(start).Seconds()
}

func relayRoundTrips(b *testing.B, n int) float64 {
	conn := retrytest.Conn(b)
	topo := retrytest.Declare(b, conn, retry.Topology{Backend: retry.TTL,
		Policy: retry.Policy{Delays: []time.Duration{time.Millisecond}}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := &retry.Stages{Topology: topo, Options: retry.Options{Prefetch: benchPrefetch}}
	go func() { _ = st.Run(ctx, conn) }()
	var done atomic.Int64
	c := &retry.Consumer{Topology: topo, Queue: topo.WorkRoutes()[0].Queue, Options: retry.Options{Prefetch: benchPrefetch, Concurrency: 8},
		Handler: retry.HandlerFunc(func(ctx context.Context, m *retry.Message) error {
			if m.Attempt == 1 {
				return errFirst
			}
			done.Add(1)
			return nil
		})}
	go func() { _ = c.Run(ctx, conn) }()
	start := time.Now()
	publishN(b, conn, topo.Ingress(), "email", n)
	waitFor(b, &done, n)
	return float64(n) / time.Since(start).Seconds()
}

var errFirst = fmt.Errorf("first attempt fails")
