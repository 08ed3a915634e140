//go:build integration

package bench

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// TestPileUpStopsNearTheMemoryLimit piles messages into a queue while the
// management API (a fake one) reports the broker's memory near its limit:
// the pile-up stops after its first tenth, naming --waiting, and goes no
// further.
func TestPileUpStopsNearTheMemoryLimit(t *testing.T) {
	url := retrytest.URL(t)
	conn := retrytest.Conn(t)
	queue := retrytest.Prefix(t) + "pile-up"
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := declareQueue(ch, queue, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = ch.QueueDelete(queue,
			false, // ifUnused
			false, // ifEmpty
			false) // noWait
	})
	api, _ := apiFor(t, &fakeManagement{node: node(850<<20, 1000<<20, 850<<20, 500<<20)})
	var progress strings.Builder
	b := &bench{url: url, api: api, out: &progress}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	checkpoints := 0
	_, err = b.pileUp(ctx, retry.Classic, retry.TTL, 1000, func(i int) (string, string, amqp.Publishing) {
		return "", queue, amqp.Publishing{Body: []byte("waiting")}
	}, func() (string, error) {
		checkpoints++
		return "", nil
	})
	if !errors.Is(err, errBlocked) || !strings.Contains(err.Error(), "--waiting 1000") || !strings.Contains(err.Error(), "100 of 1,000") {
		t.Fatalf("pileUp near the limit = %v, want errBlocked after 100 of 1,000, naming --waiting", err)
	}
	q, err := ch.QueueDeclarePassive(queue,
		true,  // durable
		false, // autoDelete
		false, // exclusive
		false, // noWait
		nil)
	if err != nil {
		t.Fatal(err)
	}
	if q.Messages != 100 || checkpoints != 1 {
		t.Errorf("%d messages published, %d checkpoints; want 100 and 1", q.Messages, checkpoints)
	}
}
