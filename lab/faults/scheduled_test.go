//go:build faults

package faults_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-demo/relay/demo/flaky"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// TestScheduledBrokerRestart schedules 200 webhook notifications 6 to 24 s
// ahead on the levels backend, restarts the broker while they wait, and
// cancels every other one a second before it is due: none arrives early,
// no cancelled one arrives, and every other one arrives (those due while
// the broker was down, once it is back). QUEUE_TYPE defaults to quorum;
// FAULTS_QUEUE_TYPE=classic runs it on classic queues.
func TestScheduledBrokerRestart(t *testing.T) {
	o := defaults()
	o.rate, o.emailScenario, o.webhookScenario = 0, flaky.Healthy, flaky.Healthy
	if q := os.Getenv("FAULTS_QUEUE_TYPE"); q != "" {
		o.queueType = q
	}
	r := newRig(t, o)
	r.topo.Backend = retry.Levels
	r.env["DELAY_BACKEND"] = "levels"

	var mu sync.Mutex
	arrived := map[string][]time.Time{}
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		at := time.Now()
		mu.Lock()
		arrived[req.Header.Get("webhook-id")] = append(arrived[req.Header.Get("webhook-id")], at)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()
	r.startInProcess(r.env)

	client := &http.Client{Timeout: clientTimeout}
	call := func(method, path string, body []byte) (int, []byte) {
		req, _ := http.NewRequest(method, r.api+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			return 0, []byte(err.Error())
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.Bytes()
	}

	const n = 200
	start := time.Now()
	dues := make([]time.Time, n)
	items := make([]json.RawMessage, n)
	for i := range n {
		dues[i] = start.Add(6*time.Second + time.Duration(i)*18*time.Second/n).Truncate(time.Millisecond)
		items[i] = json.RawMessage(fmt.Sprintf(`{"webhook":{"url":%q,"payload":{"i":%d}},"send_at":%q}`,
			receiver.URL+"/hook", i, dues[i].UTC().Format(time.RFC3339Nano)))
	}
	body, _ := json.Marshal(map[string]any{"notifications": items})
	status, answer := call(http.MethodPost, "/v1/notifications/batch", body)
	if status != http.StatusAccepted {
		t.Fatalf("POST batch = %d %s", status, answer)
	}
	var res struct {
		Results []struct {
			ID string `json:"id"`
		} `json:"results"`
	}
	if err := json.Unmarshal(answer, &res); err != nil || len(res.Results) != n {
		t.Fatalf("batch answer %s: %v", answer, err)
	}
	ids := make([]string, n)
	for i, x := range res.Results {
		ids[i] = x.ID
	}

	// Every other one cancelled a second before it is due, whether the
	// broker is up or not: the cancellation is the history's.
	var wg sync.WaitGroup
	for i := 1; i < n; i += 2 {
		wg.Go(func() {
			timer := time.NewTimer(time.Until(dues[i].Add(-time.Second)))
			defer timer.Stop()
			<-timer.C
			status, answer := call(http.MethodDelete, "/v1/notifications/"+ids[i], nil)
			if status != http.StatusOK || !strings.Contains(string(answer), `"cancelled":[{"channel":"webhook"}]`) {
				t.Errorf("DELETE %s = %d %s; want 200, the webhook copy cancelled", ids[i], status, answer)
			}
		})
	}
	// The broker restarts while every copy waits in its levels.
	restartBroker(t, r.url, 3*time.Second)
	wg.Wait()

	retrytest.Eventually(t, time.Until(dues[n-1])+2*time.Minute, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for i := 0; i < n; i += 2 {
			if len(arrived[ids[i]]) == 0 {
				return false
			}
		}
		return true
	}, "not every notification that was not cancelled arrived after the restart")
	// Everything the levels held has come out: the cancelled copies have
	// reached a worker and been dropped, not delivered.
	if !r.waitDrained(time.Minute) {
		t.Errorf("the topology's queues did not drain")
	}
	if parked, err := r.parked(t.Context()); err != nil || len(parked) > 0 {
		t.Errorf("parked: %d messages (%v), want none: a cancelled copy is acked, not parked", len(parked), err)
	}
	mu.Lock()
	defer mu.Unlock()
	var late []time.Duration
	for i, id := range ids {
		got := arrived[id]
		switch {
		case i%2 == 1 && len(got) > 0:
			t.Errorf("%s was cancelled and arrived at %s (due %s)", id, got[0].Format(time.StampMilli), dues[i].Format(time.StampMilli))
		case i%2 == 0 && got[0].Before(dues[i]):
			t.Errorf("%s arrived %s early", id, dues[i].Sub(got[0]))
		case i%2 == 0:
			late = append(late, got[0].Sub(dues[i]))
		}
	}
	worst := time.Duration(0)
	for _, d := range late {
		worst = max(worst, d)
	}
	t.Logf("%s queues, broker restarted while %d scheduled notifications waited: %d delivered, none early, at most %s late; %d cancelled, none delivered",
		o.queueType, n, len(late), worst.Round(time.Millisecond), n/2)
}
