//go:build integration

package strategy_test

import (
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// TestDeliveryLimitCounting shows the trap the quorum-delivery-limit and
// native-delayed-retry chapters warn of, on the suite's broker: a quorum
// queue with x-delivery-limit 3 and one message, settled again and again
// with requeue. basic.reject counts toward the limit on every version: the
// fourth reject dead-letters the message. basic.nack counts before RabbitMQ
// 4.3 and not from 4.3 on, where it comes back for ever (here, 30 times,
// when the test stops). A strategy that means to count must reject.
func TestDeliveryLimitCounting(t *testing.T) {
	conn := retrytest.Conn(t)
	version := retry.BrokerVersion(conn)
	const limit, tries = 3, 30
	for _, tt := range []struct {
		name string
		nack bool
		want int // deliveries before the message is dead-lettered; tries: never
	}{
		{"reject", false, limit + 1},
		{"nack", true, map[bool]int{false: limit + 1, true: tries}[retry.VersionAtLeast(version, 4, 3)]},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ch, err := conn.Channel()
			if err != nil {
				t.Fatal(err)
			}
			defer ch.Close()
			q := retrytest.Prefix(t) + "counting"
			t.Cleanup(func() {
				if ch, err := retrytest.Conn(t).Channel(); err == nil {
					_, _ = ch.QueueDelete(q, false, false, false)
					_, _ = ch.QueueDelete(q+".dead", false, false, false)
					ch.Close()
				}
			})
			if _, err := ch.QueueDeclare(q+".dead", true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
				t.Fatal(err)
			}
			if _, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": "quorum",
				"x-delivery-limit": int64(limit), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": q + ".dead"}); err != nil {
				t.Fatal(err)
			}
			if err := ch.Publish("", q, false, false, amqp.Publishing{Body: []byte("x"), DeliveryMode: amqp.Persistent}); err != nil {
				t.Fatal(err)
			}
			deliveries, dead := 0, false
			for deliveries < tries && !dead {
				// A returned message is back in the queue, one
				// dead-lettered in the dead-letter queue: wait for
				// either, however long the broker takes.
				var d amqp.Delivery
				var back bool
				retrytest.Eventually(t, 30*time.Second, func() bool {
					var err error
					if d, back, err = ch.Get(q, false /* autoAck */); err != nil || back {
						return err == nil
					}
					_, dead, err = ch.Get(q+".dead", true /* autoAck */)
					return err == nil && dead
				}, "after %d deliveries, the message is neither back in %s nor dead-lettered", deliveries, q)
				if !back {
					break
				}
				deliveries++
				if tt.nack {
					err = d.Nack(false, true /* requeue */)
				} else {
					err = d.Reject(true /* requeue */)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if deliveries != tt.want || dead != (tt.want < tries) {
				t.Errorf("RabbitMQ %s, %s with requeue: %d deliveries, dead-lettered %v; want %d (x-delivery-limit %d)", version, tt.name, deliveries, dead, tt.want, limit)
			}
			t.Logf("RabbitMQ %s, %s with requeue, x-delivery-limit %d: %d deliveries", version, tt.name, limit, deliveries)
		})
	}
}
