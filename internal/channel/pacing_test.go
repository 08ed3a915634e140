package channel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relay-demo/relay/webhooks"
)

// maxBacklogDeferrals is the most TestPacedBacklog lets one copy be
// deferred.
const maxBacklogDeferrals = 6

// TestPacedBacklog runs workers over a backlog of copies to one slow
// host, each deferral coming back after its wait as the delay backend
// would bring it: the host never has more requests in flight than its
// cap, every copy arrives once, and none is deferred more than a few
// times, however long the backlog.
func TestPacedBacklog(t *testing.T) {
	const limit, workers, backlog = 4, 8, 400
	var inFlight, most atomic.Int32
	var got sync.Map
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		var p struct{ Seq int }
		_ = json.NewDecoder(r.Body).Decode(&p)
		if _, dup := got.LoadOrStore(p.Seq, true); dup {
			t.Errorf("copy %d arrived twice", p.Seq)
		}
		time.Sleep(20 * time.Millisecond) // the receiver's work
	}))
	t.Cleanup(slow.Close)
	sig, err := webhooks.NewSigner(globalSecret)
	if err != nil {
		t.Fatal(err)
	}
	s := webhooks.NewSender(webhooks.Config{Timeout: time.Minute, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, sig)
	noStore := func(context.Context) (endpointStore, error) { return nil, errors.New("no store") }
	w := newWebhookSender(s, EndpointConfig{Concurrency: limit, Failures: 0, Cooldown: time.Minute}, noStore, EndpointCacheTTL, time.Now)

	// The pace the host takes at its cap: limit senders one after another.
	var floor sync.WaitGroup
	floorStart := time.Now()
	for k := range limit {
		floor.Go(func() {
			for i := range 25 {
				_ = w.deliver(context.Background(), fmt.Sprintf("floor_%d_%d", k, i), &WebhookPart{URL: slow.URL, Payload: json.RawMessage(fmt.Sprintf(`{"seq":%d}`, backlog+k*25+i))})
			}
		})
	}
	floor.Wait()
	pace := float64(limit*25) / time.Since(floorStart).Seconds()

	jobs := make(chan int, backlog)
	deferrals := make([]atomic.Int32, backlog)
	var left sync.WaitGroup
	left.Add(backlog)
	started := time.Now()
	for range workers {
		go func() {
			for seq := range jobs {
				err := w.deliver(context.Background(), fmt.Sprintf("ntf_%d", seq), &WebhookPart{URL: slow.URL, Payload: json.RawMessage(fmt.Sprintf(`{"seq":%d}`, seq))})
				var d *Deferred
				switch {
				case errors.As(err, &d):
					deferrals[seq].Add(1)
					time.AfterFunc(d.Wait, func() { jobs <- seq })
				case err != nil:
					t.Errorf("copy %d: %v", seq, err)
					left.Done()
				default:
					left.Done()
				}
			}
		}()
	}
	for seq := range backlog {
		jobs <- seq
	}
	done := make(chan struct{})
	go func() { left.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the backlog never ended")
	}
	took := time.Since(started)
	close(jobs)
	var most3 int32
	for i := range deferrals {
		most3 = max(most3, deferrals[i].Load())
	}
	t.Logf("%d copies in %s (%.0f/s, the host's pace at its cap %.0f/s); most deferrals of one copy %d; most in flight %d",
		backlog, took.Round(time.Millisecond), float64(backlog)/took.Seconds(), pace, most3, most.Load())
	if most.Load() > limit {
		t.Errorf("%d requests in flight at once, over the cap of %d", most.Load(), limit)
	}
	// A line that keeps its turns defers a copy once, or a few times when
	// the host's time in flight moves under a loaded machine and a copy
	// comes back before its turn; one that does not defers the last
	// copies of the backlog many times more (400 copies take 2s at 4 ×
	// 20ms, and a round away is at least minPacedWait).
	if most3 > maxBacklogDeferrals {
		t.Errorf("a copy was deferred %d times, want at most %d: the line does not keep its turns", most3, maxBacklogDeferrals)
	}
}
