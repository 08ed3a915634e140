//go:build integration

package all_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
	"github.com/relay-demo/relay/services/all"
	"github.com/relay-demo/relay/services/notification"
)

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

type event struct {
	Outcome string `json:"outcome"`
	ID      string `json:"id"`
	Channel string `json:"channel"`
	Attempt int    `json:"attempt"`
	Reason  string `json:"reason"`
}

// TestEndToEnd runs every service in-process, posts notifications over
// HTTP, and checks that each copy ends delivered or parked, and that the
// event stream, the downstream's /stats and the dead-letter queue agree.
func TestEndToEnd(t *testing.T) {
	prefix := retrytest.Prefix(t)
	const token = "e2e-token-0123456789abcdef"
	env := map[string]string{
		"AMQP_URL": retrytest.URL(t), "TOPOLOGY_PREFIX": prefix, "DELAY_BACKEND": "ttl",
		"RETRY_DELAYS": "100ms,200ms,400ms", "RETRY_MAX": "8", "FLAKY_RATE": "0.5", "FLAKY_SEED": "3",
		"API_TOKENS": token, "HTTP_ADDR": freePort(t), "FLAKY_HTTP_ADDR": freePort(t), "FLAKY_SMTP_ADDR": freePort(t),
	}
	conn := retrytest.Conn(t)
	topo := retry.Topology{Prefix: prefix, Routes: notification.Routes(), Backend: retry.TTL,
		Policy: retry.Policy{Delays: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}, MaxRetries: 8}}
	t.Cleanup(func() {
		if err := topo.Delete(conn); err != nil {
			t.Error(err)
		}
		ch, err := conn.Channel()
		if err == nil {
			_ = ch.ExchangeDelete(prefix+"notification-events", false, false)
			ch.Close()
		}
	})

	ctx, cancel := context.WithCancel(context.Background())
	var logs retrytest.Buffer
	done := make(chan error, 1)
	go func() { done <- all.Run(ctx, func(k string) string { return env[k] }, &logs) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("relay all: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("relay all did not stop within 30s")
		}
	}()

	api := "http://" + env["HTTP_ADDR"]
	retrytest.Eventually(t, 15*time.Second, func() bool {
		resp, err := http.Get(api + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "API never ready; log:\n%s", logs.String())

	// Follow the event stream before sending anything.
	sctx, stopStream := context.WithCancel(ctx)
	defer stopStream()
	req, _ := http.NewRequestWithContext(sctx, http.MethodGet, api+"/dashboard/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var mu sync.Mutex
	var seen []event
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var e event
				if json.Unmarshal([]byte(data), &e) == nil {
					mu.Lock()
					seen = append(seen, e)
					mu.Unlock()
				}
			}
		}
	}()

	hook := "http://" + env["FLAKY_HTTP_ADDR"] + "/webhooks/e2e"
	const n = 8
	ids := map[string]bool{}
	for i := range n {
		url := hook
		if i == 0 {
			// No such route on the receiver: a 404 is permanent, so this
			// webhook copy is parked after one attempt.
			url = "http://" + env["FLAKY_HTTP_ADDR"] + "/nowhere"
		}
		body := fmt.Sprintf(`{"email":{"to":["ada@example.com"],"subject":"n%d","text":"hi"},"webhook":{"url":%q,"payload":{"i":%d}}}`, i, url, i)
		req, _ := http.NewRequest(http.MethodPost, api+"/v1/notifications", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var res struct{ ID string }
		_ = json.NewDecoder(resp.Body).Decode(&res)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted || res.ID == "" {
			t.Fatalf("POST = %d %+v", resp.StatusCode, res)
		}
		ids[res.ID] = true
	}

	terminal := func() map[string]string {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]string{}
		for _, e := range seen {
			if ids[e.ID] && (e.Outcome == "delivered" || e.Outcome == "parked") {
				out[e.ID+"/"+e.Channel] = e.Outcome
			}
		}
		return out
	}
	retrytest.Eventually(t, 30*time.Second, func() bool { return len(terminal()) == 2*n },
		"only %d of %d copies finished", len(terminal()), 2*n)

	var stats struct {
		Email, Webhook struct {
			Accepted, Duplicates int
		}
	}
	resp, err = http.Get("http://" + env["FLAKY_HTTP_ADDR"] + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	_ = json.NewDecoder(resp.Body).Decode(&stats)
	resp.Body.Close()
	delivered := map[string]int{}
	for key, outcome := range terminal() {
		if outcome == "delivered" {
			delivered[key[strings.Index(key, "/")+1:]]++
		}
	}
	if stats.Email.Accepted != delivered["email"] || stats.Webhook.Accepted != delivered["webhook"] {
		t.Errorf("downstream accepted email %d webhook %d; events say delivered %v", stats.Email.Accepted, stats.Webhook.Accepted, delivered)
	}
	if stats.Email.Duplicates+stats.Webhook.Duplicates != 0 {
		t.Errorf("duplicates at the downstream: %+v", stats)
	}
	parked, err := (retry.DeadLetters{Conn: conn, Topology: topo}).List(context.Background(), retry.Filter{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(parked) != 2*n-delivered["email"]-delivered["webhook"] {
		t.Errorf("%d parked, but events say %d copies were not delivered", len(parked), 2*n-delivered["email"]-delivered["webhook"])
	}

	// The shared registry: the API's /metrics shows the workers' counters.
	resp, err = http.Get(api + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var metrics bytes.Buffer
	_, _ = metrics.ReadFrom(resp.Body)
	resp.Body.Close()
	re := regexp.MustCompile(`relay_deliveries_total\{channel="email",outcome="delivered"\} (\d+)`)
	m := re.FindStringSubmatch(metrics.String())
	if m == nil || m[1] != fmt.Sprint(delivered["email"]) {
		t.Errorf("metrics say %v email deliveries, events say %d", m, delivered["email"])
	}
	if len(parked) == 0 || parked[0].Reason != retry.ReasonPermanent {
		t.Errorf("parked = %+v, want the webhook sent nowhere, parked as permanent", parked)
	}
}
