//go:build integration

package events

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/internal/store/storetest"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// flakySink fails its first writes, as a database that is down would.
type flakySink struct {
	Sink
	failures atomic.Int32
}

func (s *flakySink) Record(ctx context.Context, evs []notification.Event) error {
	if s.failures.Add(-1) >= 0 {
		return errors.New("database is down")
	}
	return s.Sink.Record(ctx, evs)
}

// TestFeedFillsTheHistory publishes what the API and the pipeline publish
// for one notification, with junk in between, while the store is down for
// its first writes, and reads the notification's timeline back from the
// store.
func TestFeedFillsTheHistory(t *testing.T) {
	for _, backend := range storetest.Backends() {
		t.Run(backend, func(t *testing.T) {
			st := storetest.Open(t, backend)
			conn := retrytest.Conn(t)
			topo := retry.Topology{Prefix: retrytest.Prefix(t), Backend: retry.TTL, Routes: []retry.Route{{Queue: "email-queue", Key: "email"}}}
			cleanupExchange(t, topo)
			t.Cleanup(func() {
				if ch, err := retrytest.Conn(t).Channel(); err == nil {
					_, _ = ch.QueueDelete(topo.Name(HistoryQueue), false, false, false)
				}
			})
			ch, err := conn.Channel()
			if err != nil {
				t.Fatal(err)
			}
			defer ch.Close()
			if err := DeclareHistory(ch, topo, retry.BrokerVersion(conn)); err != nil {
				t.Fatal(err)
			}
			at := time.Now().UTC().Truncate(time.Millisecond)
			acc, err := AcceptedPublishing(notification.Accepted{ID: "ntf_1", CreatedAt: at, Channels: []string{"email"}, Recipients: []string{"ada@example.com"},
				Payload: json.RawMessage(`{"email":{"to":["ada@example.com"]}}`)}, "api")
			if err != nil {
				t.Fatal(err)
			}
			acc.UserId = retry.User(conn)
			// A producer's forgery: the broker refuses any user-id but the
			// publisher's own, so it carries none (or its own).
			forged, err := AcceptedPublishing(notification.Accepted{ID: "ntf_forged", CreatedAt: at, Channels: []string{"email"}}, "api")
			if err != nil {
				t.Fatal(err)
			}
			email := topo.Name("email-queue")
			msgs := []amqp.Publishing{acc, {Body: []byte("junk")}, {Body: []byte(`{"type":"other"}`)}, forged}
			for _, ev := range []notification.Event{
				{Outcome: "failed", ID: "ntf_1", Channel: "email", Queue: email, Attempt: 1, Error: "452 mailbox full", At: at.Add(10 * time.Millisecond), Service: "worker-email"},
				{Outcome: "retrying", ID: "ntf_1", Channel: "email", Queue: email, Attempt: 1, DelayMS: 500, At: at.Add(12 * time.Millisecond), Service: "retrier"},
				{Outcome: "delivered", ID: "ntf_1", Channel: "email", Queue: email, Attempt: 2, At: at.Add(600 * time.Millisecond), Service: "worker-email"},
				{Outcome: "parked", ID: "ghost", Queue: "", Attempt: 1, Reason: retry.ReasonNoSource, At: at, Service: "retrier"},
			} {
				ev.Type = TypeAttempt
				b, _ := json.Marshal(ev)
				msgs = append(msgs, amqp.Publishing{ContentType: "application/json", DeliveryMode: amqp.Persistent, UserId: retry.User(conn), Body: b})
			}
			// The delivered event first: the history orders by attempt,
			// not by arrival.
			msgs[0], msgs[len(msgs)-2] = msgs[len(msgs)-2], msgs[0]
			for _, m := range msgs {
				if err := ch.Publish(ExchangeName(topo), "x", false, false, m); err != nil {
					t.Fatal(err)
				}
			}
			sink := &flakySink{Sink: st}
			sink.failures.Store(2)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			f := &Feed{Topology: topo, Sink: sink, Linger: 20 * time.Millisecond}
			go func() { done <- f.Run(ctx, conn) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Feed.Run: %v", err)
				}
			}()
			var n *notification.View
			retrytest.Eventually(t, 15*time.Second, func() bool {
				n, err = st.Get(context.Background(), "ntf_1")
				return err == nil && n.Accepted && len(n.Copies) == 1 && n.Copies[0].Status == notification.StatusDelivered
			}, "ntf_1 never delivered in the history: %+v, %v", n, err)
			tl := n.Copies[0].Attempts
			if len(tl) != 2 || tl[0].Outcome != "failed" || tl[0].Error != "452 mailbox full" || tl[0].DelayMS == nil || *tl[0].DelayMS != 500 || tl[1].Outcome != "delivered" {
				t.Errorf("timeline = %+v", tl)
			}
			if _, err := st.Get(context.Background(), "ntf_forged"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("an accepted record relay's user did not publish was stored: %v", err)
			}
			if _, err := st.Get(context.Background(), "ghost"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("an event outside any work queue was stored: %v", err)
			}
			retrytest.Eventually(t, 5*time.Second, func() bool {
				q, err := retrytest.Conn(t).Channel()
				if err != nil {
					return false
				}
				defer q.Close()
				st, err := q.QueueDeclarePassive(topo.Name(HistoryQueue), true, false, false, false, nil)
				return err == nil && st.Messages == 0
			}, "the history queue did not drain")
		})
	}
}

// TestFeedMovesOversizedAside puts a message whose headers exceed the
// AMQP frame at the head of the history queue, over the management API,
// with an accepted record behind it. With the management API the feed
// parks it as headers-too-large and stores the record; without, the queue
// stalls and Stuck says why and how to fix it.
func TestFeedMovesOversizedAside(t *testing.T) {
	for _, withManagement := range []bool{true, false} {
		name := map[bool]string{true: "management", false: "no management"}[withManagement]
		t.Run(name, func(t *testing.T) {
			m := retrytest.Management(t)
			conn := retrytest.Conn(t)
			topo := retrytest.Declare(t, conn, retry.Topology{Backend: retry.TTL})
			cleanupExchange(t, topo)
			t.Cleanup(func() {
				if ch, err := retrytest.Conn(t).Channel(); err == nil {
					_, _ = ch.QueueDelete(topo.Name(HistoryQueue), false, false, false)
				}
			})
			ch, err := conn.Channel()
			if err != nil {
				t.Fatal(err)
			}
			defer ch.Close()
			if err := DeclareHistory(ch, topo, retry.BrokerVersion(conn)); err != nil {
				t.Fatal(err)
			}
			retrytest.PublishHTTP(t, m, topo.Name(HistoryQueue), "oversized", map[string]any{
				"x-padding": strings.Repeat("p", 2*conn.Config.FrameSize)}, `{"type":"attempt"}`)
			acc, err := AcceptedPublishing(notification.Accepted{ID: "ntf_behind", CreatedAt: time.Now().UTC(), Channels: []string{"email"}}, "api")
			if err != nil {
				t.Fatal(err)
			}
			acc.UserId = retry.User(conn)
			if err := ch.Publish(ExchangeName(topo), AcceptedRoutingKey, false, false, acc); err != nil {
				t.Fatal(err)
			}

			st := storetest.Open(t, storetest.SQLite)
			f := &Feed{Topology: topo, Sink: st, Linger: 20 * time.Millisecond}
			if withManagement {
				f.Management = m
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- retry.Supervise(ctx, retrytest.URL(t), "relay test history", slog.New(slog.DiscardHandler), f.Run)
			}()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("feed: %v", err)
				}
			}()

			if !withManagement {
				retrytest.Eventually(t, 30*time.Second, func() bool {
					err := f.Stuck()
					return errors.Is(err, ErrStuck) && strings.Contains(err.Error(), "too large for the AMQP frame") && strings.Contains(err.Error(), "MANAGEMENT_URL")
				}, "the stalled history queue is not reported: Stuck = %v", f.Stuck())
				if _, err := st.Get(context.Background(), "ntf_behind"); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("the record behind the culprit was stored without the management API: %v", err)
				}
				return
			}
			retrytest.Eventually(t, 30*time.Second, func() bool {
				_, err := st.Get(context.Background(), "ntf_behind")
				return err == nil
			}, "the record behind the oversized message never reached the history")
			parked, err := (retry.DeadLetters{Conn: conn, Topology: topo}).List(context.Background(), retry.Filter{}, 0)
			if err != nil || len(parked) != 1 || parked[0].ID != "oversized" || parked[0].Reason != retry.ReasonTooLarge {
				t.Errorf("parked = %+v, %v; want the oversized message, %s", parked, err, retry.ReasonTooLarge)
			}
			if err := f.Stuck(); err != nil {
				t.Errorf("Stuck = %v after the culprit was moved aside", err)
			}
		})
	}
}
