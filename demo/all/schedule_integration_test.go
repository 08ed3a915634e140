//go:build integration

package all_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// scheduleResult is what runScheduled saw.
type scheduleResult struct {
	// late is, for each notification not cancelled, how long after its
	// due time its webhook arrived, sorted.
	late []time.Duration
}

// quantile is the q-quantile of sorted durations.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(int(q*float64(len(sorted))), len(sorted)-1)]
}

func (r scheduleResult) String() string {
	return fmt.Sprintf("%d delivered, late by p50 %s, p99 %s, max %s", len(r.late),
		quantile(r.late, 0.5), quantile(r.late, 0.99), quantile(r.late, 1))
}

// schedulePace is the time between two batches of runScheduled.
const schedulePace = 100 * time.Millisecond

// runScheduled runs relay all on the levels backend with queueType, sends
// n webhook notifications in batches of per (every one in one batch when
// per is 0), a batch every schedulePace, scheduled from 2 s to 20 s ahead,
// cancels every other one a second before it is due, and checks what the
// issue of a scheduled send must never be: a copy early, a cancelled copy
// delivered, a copy not cancelled lost. It returns how late the others
// arrived.
func runScheduled(t *testing.T, queueType string, n, per int) scheduleResult {
	t.Helper()
	var mu sync.Mutex
	arrived := map[string][]time.Time{}
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		mu.Lock()
		arrived[r.Header.Get("webhook-id")] = append(arrived[r.Header.Get("webhook-id")], at)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()

	prefix := retrytest.Prefix(t)
	const token = "schedule-token-0123456789abcdef"
	policy := retry.Policy{Delays: []time.Duration{200 * time.Millisecond, 400 * time.Millisecond}, MaxRetries: 3}
	env := map[string]string{
		"AMQP_URL": retrytest.URL(t), "TOPOLOGY_PREFIX": prefix, "DELAY_BACKEND": "levels", "QUEUE_TYPE": queueType,
		"RETRY_DELAYS": "200ms,400ms", "RETRY_MAX": "3", "API_TOKENS": token, "DATA_DIR": t.TempDir(),
		"HTTP_ADDR": anyPort, "FLAKY_HTTP_ADDR": anyPort, "FLAKY_SMTP_ADDR": anyPort,
		"FLAKY_EMAIL_SCENARIO": "healthy", "FLAKY_WEBHOOK_SCENARIO": "healthy", "WEBHOOK_ALLOW_CIDRS": "127.0.0.0/8",
	}
	topo := retry.Topology{Prefix: prefix, Routes: channel.Routes(), Backend: retry.Levels, QueueType: retry.QueueType(queueType), Policy: policy}
	relay := startOn(t, env, topo)
	logs, api := relay.logs, relay.api

	call := func(method, path string, body []byte) (int, []byte) {
		req, _ := http.NewRequest(method, api+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("%s %s: %v", method, path, err)
			return 0, nil
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.Bytes()
	}

	// Due from 2 s to 20 s ahead, spread evenly.
	start := time.Now()
	dues := make([]time.Time, n)
	items := make([]json.RawMessage, n)
	for i := range n {
		dues[i] = start.Add(2*time.Second + time.Duration(i)*18*time.Second/time.Duration(n)).Truncate(time.Millisecond)
		items[i] = json.RawMessage(fmt.Sprintf(`{"webhook":{"url":%q,"payload":{"i":%d}},"send_at":%q}`,
			receiver.URL+"/hook", i, dues[i].UTC().Format(time.RFC3339Nano)))
	}
	if per <= 0 {
		per = n
	}
	ids := make([]string, 0, n)
	for from := 0; from < n; from += per {
		if from > 0 {
			// Paced by the clock: batch k goes at start + k × schedulePace.
			<-time.After(time.Until(start.Add(time.Duration(from/per) * schedulePace)))
		}
		to := min(from+per, n)
		body, _ := json.Marshal(map[string]any{"notifications": items[from:to]})
		status, answer := call(http.MethodPost, "/v1/notifications/batch", body)
		if status != http.StatusAccepted {
			t.Fatalf("POST batch = %d %s", status, answer)
		}
		var res struct {
			Results []struct {
				ID    string    `json:"id"`
				DueAt time.Time `json:"due_at"`
			} `json:"results"`
		}
		if err := json.Unmarshal(answer, &res); err != nil || len(res.Results) != to-from {
			t.Fatalf("batch answer %s: %v", answer, err)
		}
		for i, r := range res.Results {
			ids = append(ids, r.ID)
			if !r.DueAt.Equal(dues[from+i]) {
				t.Errorf("item %d: due_at %s, want %s (levels waits exactly)", from+i, r.DueAt, dues[from+i])
			}
		}
	}

	// Every other one cancelled a second before it is due.
	var wg sync.WaitGroup
	for i := 1; i < n; i += 2 {
		wg.Go(func() {
			timer := time.NewTimer(time.Until(dues[i].Add(-time.Second)))
			defer timer.Stop()
			<-timer.C
			status, answer := call(http.MethodDelete, "/v1/notifications/"+ids[i], nil)
			if status != http.StatusOK || !strings.Contains(string(answer), `"cancelled":[{"channel":"webhook"}]`) {
				t.Errorf("DELETE %s, %s before due = %d %s; want 200, the webhook copy cancelled", ids[i], time.Until(dues[i]).Round(time.Millisecond), status, answer)
			}
		})
	}
	wg.Wait()
	// Cancelling again answers the same.
	if status, answer := call(http.MethodDelete, "/v1/notifications/"+ids[1], nil); status != http.StatusOK {
		t.Errorf("DELETE again = %d %s, want 200", status, answer)
	}

	last := dues[n-1]
	retrytest.Eventually(t, time.Until(last)+30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for i := 0; i < n; i += 2 {
			if len(arrived[ids[i]]) == 0 {
				return false
			}
		}
		return true
	}, "not every notification that was not cancelled arrived")
	// Every cancelled copy reached its worker, which dropped it.
	dropped := regexp.MustCompile(`"message_id":"([^"]+)"`)
	retrytest.Eventually(t, 30*time.Second, func() bool {
		seen := map[string]bool{}
		for line := range strings.SplitSeq(logs.String(), "\n") {
			if strings.Contains(line, "cancelled, not sent") {
				if m := dropped.FindStringSubmatch(line); m != nil {
					seen[m[1]] = true
				}
			}
		}
		for i := 1; i < n; i += 2 {
			if !seen[ids[i]] {
				return false
			}
		}
		return true
	}, "the workers did not drop every cancelled copy")

	mu.Lock()
	defer mu.Unlock()
	var r scheduleResult
	for i, id := range ids {
		got := arrived[id]
		switch {
		case i%2 == 1 && len(got) > 0:
			t.Errorf("%s was cancelled and arrived at %s (due %s)", id, got[0].Format(time.StampMilli), dues[i].Format(time.StampMilli))
		case i%2 == 0 && got[0].Before(dues[i]):
			t.Errorf("%s arrived %s early", id, dues[i].Sub(got[0]))
		case i%2 == 0:
			r.late = append(r.late, got[0].Sub(dues[i]))
		}
	}
	slices.Sort(r.late)
	return r
}

// startOn runs relay all in-process with env until the test ends, waits
// for its API to be ready, and deletes topo (the one env declares) and the
// history's queue afterwards.
func startOn(t *testing.T, env map[string]string, topo retry.Topology) relayAll {
	t.Helper()
	return runOn(t, retrytest.Conn(t), env, topo)
}

// TestScheduledSends sends 200 notifications scheduled 2 to 20 s ahead in
// one batch, cancels half, and holds relay to what a scheduled send must
// never do (runScheduled): arrive early, arrive once cancelled, or not
// arrive. How late the others came is logged: make test-timing's
// TestScheduleAccuracy reports it on a quiet broker.
func TestScheduledSends(t *testing.T) {
	for _, qt := range []string{"classic", "quorum"} {
		t.Run(qt, func(t *testing.T) {
			r := runScheduled(t, qt, 200, 0)
			t.Logf("%s queues: %s", qt, r)
		})
	}
}

// TestScheduledRetries schedules notifications 3 s ahead with a
// RETRY_DEADLINE of 2 s, to a receiver that fails each one's first
// attempt: each is retried once it is due and delivered. Were the deadline
// counted from the time the API accepted it (3 s before its first
// attempt), the first failure would park it.
func TestScheduledRetries(t *testing.T) {
	var mu sync.Mutex
	attempts := map[string]int{}
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		id := r.Header.Get("webhook-id")
		attempts[id]++
		if attempts[id] == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()

	prefix := retrytest.Prefix(t)
	const token = "schedule-token-0123456789abcdef"
	env := map[string]string{
		"AMQP_URL": retrytest.URL(t), "TOPOLOGY_PREFIX": prefix, "DELAY_BACKEND": "levels",
		"RETRY_DELAYS": "300ms", "RETRY_MAX": "3", "RETRY_DEADLINE": "2s", "API_TOKENS": token, "DATA_DIR": t.TempDir(),
		"HTTP_ADDR": anyPort, "FLAKY_HTTP_ADDR": anyPort, "FLAKY_SMTP_ADDR": anyPort,
		"FLAKY_EMAIL_SCENARIO": "healthy", "FLAKY_WEBHOOK_SCENARIO": "healthy", "WEBHOOK_ALLOW_CIDRS": "127.0.0.0/8",
	}
	topo := retry.Topology{Prefix: prefix, Routes: channel.Routes(), Backend: retry.Levels,
		Policy: retry.Policy{Delays: []time.Duration{300 * time.Millisecond}, MaxRetries: 3}}
	api := startOn(t, env, topo).api
	get := func(path string) map[string]any {
		req, _ := http.NewRequest(http.MethodGet, api+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&v)
		return v
	}

	var ids []string
	for i := range 3 {
		body := fmt.Sprintf(`{"webhook":{"url":%q,"payload":{"i":%d}},"delay":"3s"}`, receiver.URL+"/hook", i)
		req, _ := http.NewRequest(http.MethodPost, api+"/v1/notifications", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var res struct {
			ID    string    `json:"id"`
			DueAt time.Time `json:"due_at"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&res)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted || res.DueAt.IsZero() {
			t.Fatalf("POST = %d, due_at %v", resp.StatusCode, res.DueAt)
		}
		ids = append(ids, res.ID)
	}
	// Scheduled, and listed as such, until due.
	retrytest.Eventually(t, 2*time.Second, func() bool {
		list, _ := get("/v1/notifications?status=scheduled")["notifications"].([]any)
		return len(list) == 3
	}, "GET /v1/notifications?status=scheduled does not list the 3 scheduled notifications")

	status := func(id string) string {
		copies, _ := get("/v1/notifications/" + id)["copies"].([]any)
		if len(copies) != 1 {
			return ""
		}
		s, _ := copies[0].(map[string]any)["status"].(string)
		return s
	}
	retrytest.Eventually(t, 20*time.Second, func() bool {
		for _, id := range ids {
			if status(id) != "delivered" {
				return false
			}
		}
		return true
	}, "not every scheduled notification was delivered after its retry: %v", func() []string {
		var out []string
		for _, id := range ids {
			out = append(out, id+" "+status(id))
		}
		return out
	}())
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if attempts[id] != 2 {
			t.Errorf("%s: %d attempts at the receiver, want 2 (a failure, then the retry)", id, attempts[id])
		}
	}
	// Nothing left to cancel: every copy went out.
	req, _ := http.NewRequest(http.MethodDelete, api+"/v1/notifications/"+ids[0], nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("DELETE a delivered notification = %d, want 409", resp.StatusCode)
	}
	req, _ = http.NewRequest(http.MethodDelete, api+"/v1/notifications/ntf_unknown", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if resp, err = http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("DELETE an unknown id = %d, want 404", resp.StatusCode)
		}
	}
}

// TestScheduledTTL schedules on the ttl backend: a delay between two of its
// steps, and one longer than its longest step, each wait exactly as long,
// in the delay levels the ttl backend declares beside its steps.
func TestScheduledTTL(t *testing.T) {
	var mu sync.Mutex
	arrivedAt := map[string]time.Time{}
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if id := r.Header.Get("webhook-id"); arrivedAt[id].IsZero() {
			arrivedAt[id] = time.Now()
		}
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()
	prefix := retrytest.Prefix(t)
	const token = "schedule-token-0123456789abcdef"
	env := map[string]string{
		"AMQP_URL": retrytest.URL(t), "TOPOLOGY_PREFIX": prefix, "DELAY_BACKEND": "ttl",
		"RETRY_DELAYS": "1s,3s", "RETRY_MAX": "2", "API_TOKENS": token, "DATA_DIR": t.TempDir(),
		"HTTP_ADDR": anyPort, "FLAKY_HTTP_ADDR": anyPort, "FLAKY_SMTP_ADDR": anyPort,
		"FLAKY_EMAIL_SCENARIO": "healthy", "FLAKY_WEBHOOK_SCENARIO": "healthy", "WEBHOOK_ALLOW_CIDRS": "127.0.0.0/8",
	}
	topo := retry.Topology{Prefix: prefix, Routes: channel.Routes(), Backend: retry.TTL,
		Policy: retry.Policy{Delays: []time.Duration{time.Second, 3 * time.Second}, MaxRetries: 2}}
	api := startOn(t, env, topo).api
	post := func(delay string) (int, map[string]any) {
		body := fmt.Sprintf(`{"webhook":{"url":%q,"payload":{}},"delay":%q}`, receiver.URL+"/hook", delay)
		req, _ := http.NewRequest(http.MethodPost, api+"/v1/notifications", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&v)
		return resp.StatusCode, v
	}
	due := map[string]time.Time{}
	for _, delay := range []string{"2s", "5s"} {
		sent := time.Now()
		status, v := post(delay)
		answered := time.Now()
		if status != http.StatusAccepted || v["rounded"] != nil {
			t.Fatalf("delay %s = %d %v, want a 202, not rounded", delay, status, v)
		}
		// The API accepted it between sent and answered, and counts the
		// delay from then, however long the request took.
		at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(v["due_at"]))
		want, _ := time.ParseDuration(delay)
		if err != nil || at.Before(sent.Add(want-50*time.Millisecond)) || at.After(answered.Add(want)) {
			t.Fatalf("delay %s: due_at %v (%v), want %s after the API accepted it", delay, v["due_at"], err, delay)
		}
		due[fmt.Sprint(v["id"])] = at
	}
	retrytest.Eventually(t, 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(arrivedAt) == len(due)
	}, "the notifications scheduled on the ttl backend never arrived")
	mu.Lock()
	defer mu.Unlock()
	for id, at := range due {
		arrived, ok := arrivedAt[id]
		switch {
		case !ok:
			t.Errorf("%s arrived under another id: %v", id, arrivedAt)
		case arrived.Before(at):
			t.Errorf("%s arrived %s before its due time", id, at.Sub(arrived))
		default:
			t.Logf("ttl: %s arrived %s after its due time", id, arrived.Sub(at).Round(time.Millisecond))
		}
	}
}
