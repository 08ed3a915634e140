//go:build integration

package retry_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

func TestDeadLetters(t *testing.T) {
	conn := retrytest.Conn(t)
	topo := retrytest.Declare(t, conn, retry.Topology{Backend: retry.TTL})
	email, webhook := topo.WorkRoutes()[0].Queue, topo.WorkRoutes()[1].Queue
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	parkedAt := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, m := range []struct{ id, source string }{{"a", email}, {"b", webhook}, {"c", email}} {
		if err := ch.Publish(topo.Name(retry.DeadExchange), "", false, false, amqp.Publishing{
			MessageId: m.id, Body: []byte(`{"v":1}`), DeliveryMode: amqp.Persistent,
			Headers: amqp.Table{retry.HeaderDeadSource: m.source, retry.HeaderDeadReason: retry.ReasonMaxRetries,
				retry.HeaderRetryCount: int32(4), retry.HeaderParkedAt: parkedAt.Format(time.RFC3339Nano),
				retry.HeaderFirstFailedAt: parkedAt.Add(-time.Minute).Format(time.RFC3339Nano),
				retry.HeaderLastError:     "503", "priority": "high"},
		}); err != nil {
			t.Fatal(err)
		}
	}
	var replayed []retry.Event
	dl := retry.DeadLetters{Conn: conn, Topology: topo, Observe: func(e retry.Event) { replayed = append(replayed, e) }}
	ctx := context.Background()
	retrytest.Eventually(t, 5*time.Second, func() bool { return depth(t, conn, topo.Name(retry.DeadQueue)) == 3 }, "not parked")

	ids := func(f retry.Filter, limit int) []string {
		t.Helper()
		list, err := dl.List(ctx, f, limit)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range list {
			out = append(out, p.ID)
		}
		return out
	}
	tests := []struct {
		name  string
		f     retry.Filter
		limit int
		want  []string
	}{
		{"all", retry.Filter{}, 0, []string{"a", "b", "c"}},
		{"limit", retry.Filter{}, 2, []string{"a", "b"}},
		{"by source", retry.Filter{Source: email}, 0, []string{"a", "c"}},
		{"by id", retry.Filter{ID: "b"}, 0, []string{"b"}},
		{"no match", retry.Filter{ID: "zzz"}, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, ids(tt.f, tt.limit)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	// Listing leaves everything in place.
	if got := depth(t, conn, topo.Name(retry.DeadQueue)); got != 3 {
		t.Fatalf("after listing, dead-letter queue holds %d", got)
	}
	list, _ := dl.List(ctx, retry.Filter{ID: "a"}, 0)
	want := retry.DeadLetter{ID: "a", Source: email, Reason: retry.ReasonMaxRetries, Retries: 4, ParkedAt: parkedAt, LastError: "503",
		FirstFailedAt: parkedAt.Add(-time.Minute)}
	if diff := cmp.Diff(want, list[0], cmp.FilterPath(func(p cmp.Path) bool {
		return p.Last().String() == ".Headers" || p.Last().String() == ".Body"
	}, cmp.Ignore())); diff != "" {
		t.Errorf("parked a (-want +got):\n%s", diff)
	}

	n, err := dl.Replay(ctx, retry.Filter{ID: "b"})
	if err != nil || n != 1 {
		t.Fatalf("Replay = %d, %v", n, err)
	}
	var back amqp.Delivery
	retrytest.Eventually(t, 5*time.Second, func() bool {
		d, ok, err := ch.Get(webhook, true)
		if err != nil {
			t.Fatal(err)
		}
		back = d
		return ok
	}, "replayed message not in %s", webhook)
	if back.MessageId != "b" || back.Headers["priority"] != "high" {
		t.Errorf("replayed message lost its id or business headers: %v", back.Headers)
	}
	for _, h := range []string{retry.HeaderRetryCount, retry.HeaderDeadSource, retry.HeaderDeadReason, retry.HeaderLastError} {
		if _, ok := back.Headers[h]; ok {
			t.Errorf("replayed message still has %s: a fresh cycle must start clean", h)
		}
	}
	// Its history runs on: the first failure stays, the round advances,
	// the round's retries and last error are kept as the prior ones.
	if back.Headers[retry.HeaderFirstFailedAt] != parkedAt.Add(-time.Minute).Format(time.RFC3339Nano) || back.Headers[retry.HeaderReplays] != int32(1) ||
		back.Headers[retry.HeaderPriorRetries] != int32(4) || back.Headers[retry.HeaderPriorError] != "503" {
		t.Errorf("replayed headers = %v, want the first failure kept, %s = 1, %s = 4 and %s = 503", back.Headers,
			retry.HeaderReplays, retry.HeaderPriorRetries, retry.HeaderPriorError)
	}
	if len(replayed) != 1 || replayed[0].Outcome != "replayed" || replayed[0].MessageID != "b" || replayed[0].Round != 1 || replayed[0].Queue != webhook {
		t.Errorf("observed %+v, want one replayed event for b in round 1", replayed)
	}

	// An id that matches nothing is an error for Get, Replay and Purge,
	// not a quiet zero; a source that matches nothing is not.
	for name, op := range map[string]func(retry.Filter) (int, error){
		"Get": func(f retry.Filter) (int, error) {
			list, err := dl.Get(ctx, f)
			return len(list), err
		},
		"Replay": func(f retry.Filter) (int, error) { return dl.Replay(ctx, f) },
		"Purge":  func(f retry.Filter) (int, error) { return dl.Purge(ctx, f) },
	} {
		if n, err := op(retry.Filter{ID: "zzz"}); n != 0 || !errors.Is(err, retry.ErrNotParked) || !strings.Contains(err.Error(), `"zzz"`) {
			t.Errorf("%s(unknown id) = %d, %v; want 0 and ErrNotParked naming the id", name, n, err)
		}
		if n, err := op(retry.Filter{ID: "a", Source: webhook}); n != 0 || !errors.Is(err, retry.ErrNotParked) {
			t.Errorf("%s(id a from the wrong source) = %d, %v; want ErrNotParked", name, n, err)
		}
	}
	if n, err := dl.Purge(ctx, retry.Filter{Source: topo.Name("nowhere")}); n != 0 || err != nil {
		t.Errorf("Purge(a source with nothing parked) = %d, %v; want 0, nil", n, err)
	}
	// Get shows the message in full and leaves it parked.
	got, err := dl.Get(ctx, retry.Filter{ID: "a"})
	if err != nil || len(got) != 1 {
		t.Fatalf("Get(a) = %v, %v", got, err)
	}
	if d := got[0].Detail(); string(d.Body) != `{"v":1}` || d.Headers["priority"] != "high" || d.Size != 7 || d.LastError != "503" {
		t.Errorf("Get(a) in full = %+v", d)
	}

	n, err = dl.Purge(ctx, retry.Filter{Source: email})
	if err != nil || n != 2 {
		t.Fatalf("Purge = %d, %v", n, err)
	}
	if got := ids(retry.Filter{}, 0); len(got) != 0 {
		t.Errorf("after replay and purge, still parked: %v", got)
	}
}

// TestReplayKeepsWhatItCannotSend: a parked message whose source is not a
// work queue of the topology, or a work queue that is gone, stays parked,
// nothing reaches the queue it names, and the error says why.
func TestReplayKeepsWhatItCannotSend(t *testing.T) {
	conn := retrytest.Conn(t)
	topo := retrytest.Declare(t, conn, retry.Topology{Backend: retry.TTL})
	target := victim(t, conn)
	gone := topo.WorkRoutes()[1].Queue
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if _, err := ch.QueueDelete(gone, false, false, false); err != nil {
		t.Fatal(err)
	}
	for id, source := range map[string]string{"to-victim": target, "to-error-queue": topo.Name(retry.ErrorQueue), "to-gone": gone} {
		if err := ch.Publish(topo.Name(retry.DeadExchange), "", false, false, amqp.Publishing{MessageId: id,
			Headers: amqp.Table{retry.HeaderDeadSource: source}}); err != nil {
			t.Fatal(err)
		}
	}
	retrytest.Eventually(t, 5*time.Second, func() bool { return depth(t, conn, topo.Name(retry.DeadQueue)) == 3 }, "not parked")
	dl := retry.DeadLetters{Conn: conn, Topology: topo}
	n, err := dl.Replay(context.Background(), retry.Filter{ID: "to-victim"})
	if n != 0 || !errors.Is(err, retry.ErrNotDestination) || !strings.Contains(err.Error(), target) {
		t.Fatalf("Replay by id = %d, %v; want 0 and ErrNotDestination naming %s", n, err, target)
	}
	n, err = dl.Replay(context.Background(), retry.Filter{})
	if n != 0 || !errors.Is(err, retry.ErrNotDestination) || !errors.Is(err, retry.ErrUnroutable) {
		t.Fatalf("Replay all = %d, %v; want 0, ErrNotDestination and ErrUnroutable", n, err)
	}
	retrytest.Eventually(t, 5*time.Second, func() bool { return depth(t, conn, topo.Name(retry.DeadQueue)) == 3 }, "a parked copy was lost")
	for _, q := range []string{target, topo.Name(retry.ErrorQueue)} {
		if got := depth(t, conn, q); got != 0 {
			t.Errorf("%s holds %d messages", q, got)
		}
	}
}

// TestReplayedAndParkedAgain replays a parked message, parks it again as
// its next round would, and replays it again: the parked copy still says
// when the message first failed, which round it was in and what the
// rounds before left, and each replay's event carries the round it starts.
func TestReplayedAndParkedAgain(t *testing.T) {
	conn := retrytest.Conn(t)
	topo := retrytest.Declare(t, conn, retry.Topology{Backend: retry.TTL})
	email, webhook := topo.WorkRoutes()[0].Queue, topo.WorkRoutes()[1].Queue
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	first := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	// The two channel copies of one notification share its id.
	for _, source := range []string{email, webhook} {
		if err := ch.Publish(topo.Name(retry.DeadExchange), "", false, false, amqp.Publishing{
			MessageId: "twin", Body: []byte(`{"v":1}`), ContentType: "application/json",
			Headers: amqp.Table{retry.HeaderDeadSource: source, retry.HeaderDeadReason: retry.ReasonMaxRetries,
				retry.HeaderRetryCount: int32(4), retry.HeaderFirstFailedAt: first.Format(time.RFC3339Nano),
				retry.HeaderParkedAt: first.Add(time.Minute).Format(time.RFC3339Nano), retry.HeaderLastError: "503"},
		}); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	var rounds []int
	dl := retry.DeadLetters{Conn: conn, Topology: topo, Observe: func(e retry.Event) { rounds = append(rounds, e.Round) }}
	retrytest.Eventually(t, 5*time.Second, func() bool { return depth(t, conn, topo.Name(retry.DeadQueue)) == 2 }, "not parked")
	if both, err := dl.Get(ctx, retry.Filter{ID: "twin"}); err != nil || len(both) != 2 {
		t.Fatalf("Get(twin) = %d copies, %v; want both channels' copies", len(both), err)
	}
	if one, err := dl.Get(ctx, retry.Filter{ID: "twin", Source: email}); err != nil || len(one) != 1 || one[0].Source != email {
		t.Fatalf("Get(twin from email) = %+v, %v", one, err)
	}

	hop, err := retry.NewHop(conn)
	if err != nil {
		t.Fatal(err)
	}
	defer hop.Close()
	// replayAndPark replays the email copy, takes it from its work queue
	// and parks it again after retries more failures ending in lastErr.
	replayAndPark := func(retries int, lastErr string) {
		t.Helper()
		if n, err := dl.Replay(ctx, retry.Filter{ID: "twin", Source: email}); err != nil || n != 1 {
			t.Fatalf("Replay = %d, %v", n, err)
		}
		var d amqp.Delivery
		retrytest.Eventually(t, 5*time.Second, func() bool {
			var ok bool
			d, ok, err = ch.Get(email, false /* autoAck */)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}, "the replayed copy never reached %s", email)
		if err := retry.Park(ctx, hop, topo, &d, email, retry.ReasonMaxRetries, lastErr, retries); err != nil {
			t.Fatal(err)
		}
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
		retrytest.Eventually(t, 5*time.Second, func() bool { return depth(t, conn, topo.Name(retry.DeadQueue)) == 2 }, "not parked again")
	}
	parkedEmail := func() retry.DeadLetter {
		t.Helper()
		got, err := dl.Get(ctx, retry.Filter{ID: "twin", Source: email})
		if err != nil || len(got) != 1 {
			t.Fatalf("Get = %v, %v", got, err)
		}
		return got[0]
	}
	ignore := cmp.FilterPath(func(p cmp.Path) bool {
		switch p.Last().String() {
		case ".Headers", ".Body", ".ParkedAt", ".ContentType":
			return true
		}
		return false
	}, cmp.Ignore())

	replayAndPark(2, "timeout")
	want := retry.DeadLetter{ID: "twin", Source: email, Reason: retry.ReasonMaxRetries, Retries: 2, Replays: 1,
		PriorRetries: 4, PriorError: "503", FirstFailedAt: first, LastError: "timeout"}
	if diff := cmp.Diff(want, parkedEmail(), ignore); diff != "" {
		t.Errorf("parked again after one replay (-want +got):\n%s", diff)
	}
	replayAndPark(3, "refused")
	want.Retries, want.Replays, want.PriorRetries, want.PriorError, want.LastError = 3, 2, 6, "timeout", "refused"
	if diff := cmp.Diff(want, parkedEmail(), ignore); diff != "" {
		t.Errorf("parked again after two replays (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{1, 2}, rounds); diff != "" {
		t.Errorf("replay events' rounds (-want +got):\n%s", diff)
	}
	// The webhook copy was never touched.
	if w, err := dl.Get(ctx, retry.Filter{ID: "twin", Source: webhook}); err != nil || len(w) != 1 || w[0].Replays != 0 || w[0].Retries != 4 {
		t.Errorf("webhook copy = %+v, %v", w, err)
	}
}

// TestReplayOneRecipient parks the two email copies of one notification,
// one per recipient (the topology's CopyHeader), and replays one by its
// recipient: that copy goes back to the work queue, the other stays parked
// as it was.
func TestReplayOneRecipient(t *testing.T) {
	conn := retrytest.Conn(t)
	const header = "x-recipient"
	topo := retrytest.Declare(t, conn, retry.Topology{Backend: retry.TTL, CopyHeader: header})
	email := topo.WorkRoutes()[0].Queue
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	const typo, full = "typo@exmaple.com", "full@example.com"
	for _, to := range []string{typo, full} {
		if err := ch.Publish(topo.Name(retry.DeadExchange), "", false, false, amqp.Publishing{
			MessageId: "split", Body: []byte(`{"to":["` + to + `"]}`), ContentType: "application/json",
			Headers: amqp.Table{retry.HeaderDeadSource: email, retry.HeaderDeadReason: retry.ReasonPermanent,
				header: to, retry.HeaderRetryCount: int32(0), retry.HeaderLastError: "550 " + to},
		}); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	var replayed []retry.Event
	dl := retry.DeadLetters{Conn: conn, Topology: topo, Observe: func(e retry.Event) { replayed = append(replayed, e) }}
	retrytest.Eventually(t, 5*time.Second, func() bool { return depth(t, conn, topo.Name(retry.DeadQueue)) == 2 }, "not parked")

	if both, err := dl.Get(ctx, retry.Filter{ID: "split", Source: email}); err != nil || len(both) != 2 {
		t.Fatalf("Get(split from email) = %d copies, %v; want both recipients'", len(both), err)
	}
	if one, err := dl.Get(ctx, retry.Filter{ID: "split", Copy: typo}); err != nil || len(one) != 1 || one[0].Copy != typo {
		t.Fatalf("Get(split for %s) = %+v, %v; want its copy alone", typo, one, err)
	}
	// A recipient with nothing parked for the id is ErrNotParked naming
	// both, and moves nothing.
	if n, err := dl.Replay(ctx, retry.Filter{ID: "split", Copy: "nobody@example.com"}); n != 0 || !errors.Is(err, retry.ErrNotParked) ||
		!strings.Contains(err.Error(), `"split" for "nobody@example.com"`) {
		t.Errorf("Replay(split for nobody) = %d, %v; want 0 and ErrNotParked naming the id and the recipient", n, err)
	}

	if n, err := dl.Replay(ctx, retry.Filter{ID: "split", Source: email, Copy: typo}); err != nil || n != 1 {
		t.Fatalf("Replay(split for %s) = %d, %v; want 1", typo, n, err)
	}
	var back amqp.Delivery
	retrytest.Eventually(t, 5*time.Second, func() bool {
		d, ok, err := ch.Get(email, true /* autoAck */)
		if err != nil {
			t.Fatal(err)
		}
		back = d
		return ok
	}, "the replayed copy never reached %s", email)
	if back.MessageId != "split" || topo.Copy(back.Headers) != typo {
		t.Errorf("replayed %s for %q, want split for %s", back.MessageId, topo.Copy(back.Headers), typo)
	}
	if got := depth(t, conn, email); got != 0 {
		t.Errorf("%s holds %d more: only %s's copy was to be replayed", email, got, typo)
	}
	if len(replayed) != 1 || replayed[0].Copy != typo {
		t.Errorf("observed %+v, want one replay for %s", replayed, typo)
	}
	left, err := dl.List(ctx, retry.Filter{ID: "split"}, 0)
	if err != nil || len(left) != 1 || left[0].Copy != full || left[0].Replays != 0 || left[0].LastError != "550 "+full {
		t.Errorf("still parked: %+v, %v; want %s's copy alone, untouched", left, err, full)
	}
}

// TestDeadLettersSurviveListing lists a quorum dead-letter queue more often
// than RabbitMQ 4's default delivery limit (20): every listing takes the
// messages and returns them, and a broker that counted those returns would
// drop the parked messages. They must all still be there, on every
// version.
func TestDeadLettersSurviveListing(t *testing.T) {
	conn := retrytest.Conn(t)
	topo := retrytest.Declare(t, conn, retry.Topology{Backend: retry.Levels, QueueType: retry.Quorum})
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	for _, id := range []string{"a", "b"} {
		if err := ch.Publish(topo.Name(retry.DeadExchange), "", false, false, amqp.Publishing{
			MessageId: id, Body: []byte(`{"v":1}`), DeliveryMode: amqp.Persistent,
			Headers: amqp.Table{retry.HeaderDeadSource: topo.WorkRoutes()[0].Queue, retry.HeaderDeadReason: retry.ReasonMaxRetries},
		}); err != nil {
			t.Fatal(err)
		}
	}
	dl := retry.DeadLetters{Conn: conn, Topology: topo}
	retrytest.Eventually(t, 10*time.Second, func() bool {
		got, err := dl.List(context.Background(), retry.Filter{}, 0)
		return err == nil && len(got) == 2
	}, "the two parked messages never showed")
	// A quorum queue takes back what a closed channel held a moment after
	// the close; each listing waits for that, so the one right after it
	// sees both messages.
	const listings = 25
	for i := 1; i <= listings; i++ {
		got, err := dl.List(context.Background(), retry.Filter{}, 0)
		if err != nil {
			t.Fatalf("listing %d: %v", i, err)
		}
		if len(got) != 2 {
			t.Fatalf("listing %d of %d on RabbitMQ %s shows %d parked messages, want 2: the broker dropped what it was given back",
				i, listings, retry.BrokerVersion(conn), len(got))
		}
	}
}
