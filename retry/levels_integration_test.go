//go:build integration

package retry_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
)

// TestLevelsSchedule is TestScheduleThenPark on binary delay levels, with
// the article's stages and with a direct hand-off.
func TestLevelsSchedule(t *testing.T) {
	for _, qt := range []retry.QueueType{retry.Classic, retry.Quorum} {
		for _, h := range []retry.Handoff{retry.ViaStages, retry.Direct} {
			t.Run(fmt.Sprintf("%s/%s", qt, or(string(h), "stages")), func(t *testing.T) {
				schedule := []time.Duration{ms(137), ms(400), ms(800)}
				topo := retry.Topology{Backend: retry.Levels, Handoff: h, QueueType: qt, Policy: retry.Policy{Delays: schedule},
					Routes: []retry.Route{{Queue: "email-queue", Key: "email"}}}
				conn, topo := pipeline(t, topo)
				var seen attempts
				consume(t, conn, topo, func(ctx context.Context, m *retry.Message) error {
					seen.add(m)
					return errors.New("452 mailbox full")
				})
				publish(t, conn, topo, "email", "levels-1", nil)
				d := parked(t, conn, topo, 10*time.Second)
				assertParked(t, d, "levels-1", topo.WorkRoutes()[0].Queue, retry.ReasonMaxRetries, 3)
				seen.mu.Lock()
				defer seen.mu.Unlock()
				if len(seen.at) != 4 {
					t.Fatalf("%d attempts, want 4", len(seen.at))
				}
				// Never early, and in order; how late a wait ends is measured
				// by TestLevelsAccuracy (make test-timing), one package at a
				// time: here every package of make test runs at once on the
				// same cores, so it is logged, never held to a bound.
				for i, want := range schedule {
					gap := seen.at[i+1].Sub(seen.at[i])
					if gap < want {
						t.Errorf("gap before retry %d = %s, want at least %s", i+1, gap, want)
					}
					t.Logf("retry %d: scheduled %s, measured %s", i+1, want, gap.Round(time.Millisecond))
				}
				if got := d.Headers[retry.HeaderLastError]; got != "452 mailbox full" {
					t.Errorf("%s = %v", retry.HeaderLastError, got)
				}
			})
		}
	}
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// publishMany publishes n messages with ids 0..n-1 and headers h to the
// ingress, every gap apart, confirmed.
func publishMany(t *testing.T, conn *amqp.Connection, topo retry.Topology, key string, n int, h amqp.Table, gap time.Duration) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	var pending []*amqp.DeferredConfirmation
	tick := time.NewTicker(max(gap, time.Microsecond))
	defer tick.Stop()
	for i := range n {
		if gap > 0 {
			<-tick.C
		}
		dc, err := ch.PublishWithDeferredConfirm(topo.Ingress(), key, true, false, amqp.Publishing{
			MessageId: strconv.Itoa(i), DeliveryMode: amqp.Persistent, Body: []byte(`{"v":1}`), Headers: h})
		if err != nil {
			t.Fatal(err)
		}
		pending = append(pending, dc)
	}
	for _, dc := range pending {
		if !dc.Wait() {
			t.Fatal("publish nacked")
		}
	}
}
