//go:build integration

package worker_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/relay-demo/relay/internal/events"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// TestCancelWhileTheHistoryLags runs the API, the retrier and the webhook
// worker, and cuts the history off from the events once it has heard of
// three scheduled notifications: the history still says scheduled for
// each, whatever happens to them. A cancellation after the first was
// delivered answers that it was delivered, never that it was cancelled;
// one after the second's first attempt failed cancels its retry, which
// never goes out; the third, still waiting, is cancelled and never sent.
func TestCancelWhileTheHistoryLags(t *testing.T) {
	s := startEndpointStack(t, map[string]string{"RETRY_DELAYS": "5s"})
	r := newHookReceiver(t)
	conn := retrytest.Conn(t)

	// The workers' decisions, as the events exchange carries them.
	var mu sync.Mutex
	seen := map[string][]notification.Event{}
	feed, err := events.Subscribe(t.Context(), conn, s.topo)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for ev := range feed {
			mu.Lock()
			seen[ev.ID] = append(seen[ev.ID], ev)
			mu.Unlock()
		}
	}()
	decided := func(id string, outcome retry.Outcome, attempt int) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, ev := range seen[id] {
				if ev.Outcome == outcome && ev.Attempt == attempt && ev.Service == "worker-webhook" {
					return true
				}
			}
			return false
		}
	}

	send := func(path, delay string) string {
		var out struct {
			ID string `json:"id"`
		}
		body := fmt.Sprintf(`{"webhook":{"url":%q,"payload":{}},"delay":%q}`, r.srv.URL+path, delay)
		if code := s.call(t, http.MethodPost, "/v1/notifications", body, &out); code != http.StatusAccepted {
			t.Fatalf("POST %s = %d", body, code)
		}
		return out.ID
	}
	sent, failing, waiting := send("/ok", "2s"), send("/down", "2s"), send("/ok", "4s")
	for _, id := range []string{sent, failing, waiting} {
		retrytest.Eventually(t, 10*time.Second, func() bool {
			return s.call(t, http.MethodGet, "/v1/notifications/"+id, "", nil) == http.StatusOK
		}, "the history never heard of %s", id)
	}
	// From here on the history hears of nothing: its queue takes no more
	// events, as when its consumer lags far behind.
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.QueueUnbind(s.topo.Name(events.HistoryQueue), "#", events.ExchangeName(s.topo), nil); err != nil {
		t.Fatal(err)
	}

	type answer struct {
		Cancelled    []notification.CopyRef    `json:"cancelled"`
		NotCancelled []notification.CopyStatus `json:"not_cancelled"`
	}
	cancel := func(id string) (int, answer) {
		var a answer
		code := s.call(t, http.MethodDelete, "/v1/notifications/"+id, "", &a)
		return code, a
	}
	status := func(id string) notification.Status {
		var v struct {
			Copies []struct {
				Status notification.Status `json:"status"`
			} `json:"copies"`
		}
		if code := s.call(t, http.MethodGet, "/v1/notifications/"+id, "", &v); code != http.StatusOK || len(v.Copies) != 1 {
			t.Fatalf("GET %s = %d %+v", id, code, v)
		}
		return v.Copies[0].Status
	}

	// Still waiting: cancelled.
	if code, a := cancel(waiting); code != http.StatusOK || len(a.Cancelled) != 1 {
		t.Errorf("DELETE the waiting notification = %d %+v; want 200, its copy cancelled", code, a)
	}

	// Delivered, its worker's hold given back, the history none the wiser.
	retrytest.Eventually(t, 15*time.Second, decided(sent, retry.Delivered, 1), "%s was never delivered", sent)
	if got := status(sent); got != notification.StatusScheduled {
		t.Fatalf("the history says %s of the delivered copy, want scheduled still: it heard of the delivery, the test proves nothing", got)
	}
	if code, a := cancel(sent); code != http.StatusConflict || len(a.Cancelled) != 0 ||
		len(a.NotCancelled) != 1 || a.NotCancelled[0].Status != notification.StatusDelivered {
		t.Errorf("DELETE the delivered notification = %d %+v; want 409, its copy delivered", code, a)
	}

	// Its first attempt failed: the retry is what is cancelled.
	retrytest.Eventually(t, 15*time.Second, decided(failing, retry.Failed, 1), "%s's first attempt never failed", failing)
	if code, a := cancel(failing); code != http.StatusOK || len(a.Cancelled) != 1 {
		t.Errorf("DELETE after a failed attempt = %d %+v; want 200, the copy cancelled", code, a)
	}

	// The worker drops the cancelled copies unsent.
	retrytest.Eventually(t, 20*time.Second, decided(failing, retry.Cancelled, 2), "the worker never dropped %s's retry", failing)
	retrytest.Eventually(t, 20*time.Second, decided(waiting, retry.Cancelled, 1), "the worker never dropped %s", waiting)
	ok, _ := r.received("/ok")
	down, _ := r.received("/down")
	if !ok[sent] || ok[waiting] || len(ok) != 1 {
		t.Errorf("/ok received %v; want %s only", ok, sent)
	}
	if _, reqs := r.received("/down"); len(reqs) != 1 || !down[failing] {
		t.Errorf("/down received %d requests, want the first attempt only", len(reqs))
	}
}
