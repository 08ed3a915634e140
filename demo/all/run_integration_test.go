//go:build integration

package all_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/demo/all"
	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// ready waits until relay all, writing logs, listens and its API answers
// /readyz, and returns its addresses.
func ready(t *testing.T, logs *retrytest.Buffer) all.Addrs {
	t.Helper()
	var addrs all.Addrs
	retrytest.Eventually(t, 15*time.Second, func() bool {
		a, ok := all.Listening(logs.String())
		if !ok {
			return false
		}
		addrs = a
		resp, err := http.Get("http://" + a.API + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "relay all never listened or its API never became ready; log:\n%s", logs)
	return addrs
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
		"API_TOKENS": token, "DATA_DIR": t.TempDir(), "HTTP_ADDR": anyPort, "FLAKY_HTTP_ADDR": anyPort, "FLAKY_SMTP_ADDR": anyPort,
	}
	r := startAll(t, env, retry.Policy{Delays: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}, MaxRetries: 8})
	ctx, api := r.ctx, r.api

	// Follow the event stream before sending anything.
	sctx, stopStream := context.WithCancel(ctx)
	defer stopStream()
	req, _ := http.NewRequestWithContext(sctx, http.MethodGet, api+"/dashboard/events", nil)
	// The dashboard's stream needs the API's token, as its data does.
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /dashboard/events = %s, want 200", resp.Status)
	}
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

	hook := r.hooks + "/webhooks/e2e"
	const n = 8
	ids := map[string]bool{}
	for i := range n {
		url := hook
		if i == 0 {
			// No such route on the receiver: a 404 is permanent, so this
			// webhook copy is parked after one attempt.
			url = r.hooks + "/nowhere"
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
	resp, err = http.Get(r.hooks + "/stats")
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
	topo := retry.Topology{Prefix: prefix, Routes: channel.Routes(), Backend: retry.TTL}
	parked, err := (retry.DeadLetters{Conn: retrytest.Conn(t), Topology: topo}).List(context.Background(), retry.Filter{}, 0)
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

// copyState is a channel copy as GET /v1/notifications/{id} shows it.
type copyState struct {
	Channel  string `json:"channel"`
	Status   string `json:"status"`
	Attempts []struct {
		N       int    `json:"n"`
		Outcome string `json:"outcome"`
		Error   string `json:"error"`
		DelayMS *int64 `json:"delay_ms"`
	} `json:"attempts"`
}

// TestHistorySurvivesRestart sends notifications through relay all, reads
// each one's timeline from the API once every copy has ended, stops every
// service, starts them again on the same data directory, and reads the
// same timelines back.
func TestHistorySurvivesRestart(t *testing.T) {
	prefix := retrytest.Prefix(t)
	const token = "e2e-token-0123456789abcdef"
	env := map[string]string{
		"AMQP_URL": retrytest.URL(t), "TOPOLOGY_PREFIX": prefix, "DELAY_BACKEND": "ttl",
		"RETRY_DELAYS": "100ms,200ms", "RETRY_MAX": "8", "FLAKY_RATE": "0.5", "FLAKY_SEED": "5",
		"API_TOKENS": token, "DATA_DIR": t.TempDir(), "HTTP_ADDR": anyPort, "FLAKY_HTTP_ADDR": anyPort, "FLAKY_SMTP_ADDR": anyPort,
	}
	conn := retrytest.Conn(t)
	topo := retry.Topology{Prefix: prefix, Routes: channel.Routes(), Backend: retry.TTL,
		Policy: retry.Policy{Delays: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}, MaxRetries: 8}}
	t.Cleanup(func() {
		_ = topo.Delete(conn)
		if ch, err := conn.Channel(); err == nil {
			_, _ = ch.QueueDelete(prefix+"history-queue", false, false, false)
			_ = ch.ExchangeDelete(prefix+"notification-events", false, false)
			ch.Close()
		}
	})
	// Each start listens on ports of its own: the API's and the
	// downstreams' addresses are read again.
	var api, hooks string
	start := func() func() {
		ctx, cancel := context.WithCancel(context.Background())
		var logs retrytest.Buffer
		done := make(chan error, 1)
		go func() { done <- all.Run(ctx, func(k string) string { return env[k] }, &logs) }()
		addrs := ready(t, &logs)
		api, hooks = "http://"+addrs.API, "http://"+addrs.FlakyHTTP
		return func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("relay all: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("relay all did not stop within 30s")
			}
		}
	}
	call := func(method, path, body string) (int, []byte) {
		req, _ := http.NewRequest(method, api+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.Bytes()
	}
	stop := start()
	hook := hooks + "/webhooks/history"
	var ids []string
	for i := range 6 {
		code, body := call(http.MethodPost, "/v1/notifications",
			fmt.Sprintf(`{"email":{"to":["h%d@example.com"],"subject":"h","text":"hi"},"webhook":{"url":%q,"payload":{"i":%d}}}`, i, hook, i))
		var res struct{ ID string }
		_ = json.Unmarshal(body, &res)
		if code != http.StatusAccepted || res.ID == "" {
			t.Fatalf("POST = %d %s", code, body)
		}
		ids = append(ids, res.ID)
	}
	read := func(id string) ([]copyState, bool) {
		code, body := call(http.MethodGet, "/v1/notifications/"+id, "")
		var n struct{ Copies []copyState }
		if code != http.StatusOK || json.Unmarshal(body, &n) != nil || len(n.Copies) != 2 {
			return nil, false
		}
		for _, c := range n.Copies {
			if c.Status != "delivered" && c.Status != "parked" {
				return nil, false
			}
		}
		return n.Copies, true
	}
	before := map[string][]copyState{}
	retrytest.Eventually(t, 30*time.Second, func() bool {
		for _, id := range ids {
			c, ok := read(id)
			if !ok {
				return false
			}
			before[id] = c
		}
		return true
	}, "not every copy ended in the history")
	failures := 0
	for id, copies := range before {
		for _, c := range copies {
			for i, a := range c.Attempts {
				last := i == len(c.Attempts)-1
				switch {
				case last && a.Outcome != c.Status:
					t.Errorf("%s/%s: last attempt %s, status %s", id, c.Channel, a.Outcome, c.Status)
				case !last && (a.Outcome != "failed" || a.Error == "" || a.DelayMS == nil || a.N != i+1):
					t.Errorf("%s/%s: attempt %d = %+v, want a failure with its error and delay", id, c.Channel, i+1, a)
				case !last:
					failures++
				}
			}
		}
	}
	if failures == 0 {
		t.Error("no attempt failed: the flaky downstreams did not fail anything")
	}
	stop()

	stop = start()
	defer stop()
	for _, id := range ids {
		after, ok := read(id)
		if !ok {
			t.Fatalf("%s is not in the history after a restart", id)
		}
		a, _ := json.Marshal(after)
		b, _ := json.Marshal(before[id])
		if !bytes.Equal(a, b) {
			t.Errorf("%s after a restart:\n%s\nbefore:\n%s", id, a, b)
		}
	}
	t.Logf("%d notifications, %d failed attempts, read back after a restart", len(ids), failures)
}

// relayAll is relay all running in the test.
type relayAll struct {
	ctx   context.Context // ends when the test does
	logs  *retrytest.Buffer
	api   string // the API's base URL, http://127.0.0.1:port
	hooks string // the flaky webhook receiver's base URL
}

// startAll runs relay all in-process with env (which must set
// TOPOLOGY_PREFIX and DELAY_BACKEND=ttl) until the test ends, waits for
// its API to be ready, and deletes what it declared afterwards; policy is
// env's schedule, for the cleanup.
// post sends one notification, body, with token and returns its id,
// failing t unless the API accepted it.
func (r relayAll) post(t *testing.T, token, body string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.api+"/v1/notifications", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res struct{ ID string }
	_ = json.NewDecoder(resp.Body).Decode(&res)
	if resp.StatusCode != http.StatusAccepted || res.ID == "" {
		t.Fatalf("POST %s = %d %+v", body, resp.StatusCode, res)
	}
	return res.ID
}

func startAll(t *testing.T, env map[string]string, policy retry.Policy) relayAll {
	t.Helper()
	prefix := env["TOPOLOGY_PREFIX"]
	conn := retrytest.Conn(t)
	if u := env["AMQP_URL"]; u != "" && u != retrytest.URL(t) {
		// Another broker than the suite's (a RabbitMQ 4.3 for the native
		// backend): clean up there.
		c, err := retry.Dial(u, "relay test cleanup")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conn = c
	}
	topo := retry.Topology{Prefix: prefix, Routes: channel.Routes(), Backend: retry.TTL, Policy: policy}
	return runOn(t, conn, env, topo)
}

// runOn runs relay all in-process with env until the test ends, waits for
// its API to be ready, and deletes topo (the one env declares) and the
// history's queue and exchange afterwards, through conn.
func runOn(t *testing.T, conn *amqp.Connection, env map[string]string, topo retry.Topology) relayAll {
	t.Helper()
	prefix := topo.Prefix
	t.Cleanup(func() {
		if err := topo.Delete(conn); err != nil {
			t.Error(err)
		}
		ch, err := conn.Channel()
		if err == nil {
			_, _ = ch.QueueDelete(prefix+"history-queue", false, false, false)
			_ = ch.ExchangeDelete(prefix+"notification-events", false, false)
			ch.Close()
		}
	})

	ctx, cancel := context.WithCancel(context.Background())
	logs := &retrytest.Buffer{}
	done := make(chan error, 1)
	go func() { done <- all.Run(ctx, func(k string) string { return env[k] }, logs) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("relay all: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("relay all did not stop within 30s")
		}
	})

	addrs := ready(t, logs)
	return relayAll{ctx: ctx, logs: logs, api: "http://" + addrs.API, hooks: "http://" + addrs.FlakyHTTP}
}
