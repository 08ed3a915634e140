//go:build integration

package worker_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-demo/relay/demo/flaky"
	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/events"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
	"github.com/relay-demo/relay/services/api"
	"github.com/relay-demo/relay/services/retrier"
	"github.com/relay-demo/relay/services/worker"
	"github.com/relay-demo/relay/webhooks"
)

// endpointStack is the API, the retrier and the webhook worker, sharing
// one history store (DATA_DIR) and a private topology.
type endpointStack struct {
	base, token string
	topo        retry.Topology
}

func startEndpointStack(t *testing.T, env map[string]string) *endpointStack {
	t.Helper()
	prefix := retrytest.Prefix(t)
	var b [16]byte
	_, _ = rand.Read(b[:])
	token := "token-" + hex.EncodeToString(b[:])
	vars := map[string]string{
		"AMQP_URL": retrytest.URL(t), "TOPOLOGY_PREFIX": prefix, "DELAY_BACKEND": "ttl",
		"RETRY_DELAYS": "200ms,400ms,800ms", "WEBHOOK_SECRET": webhooks.NewSecret(),
		"WEBHOOK_ALLOW_CIDRS": "127.0.0.0/8,::1/128", "WEBHOOK_TIMEOUT": "500ms",
		"DATA_DIR": t.TempDir(), "HTTP_ADDR": "127.0.0.1:0", "API_TOKENS": token,
	}
	for k, v := range env {
		vars[k] = v
	}
	getenv := func(k string) string { return vars[k] }

	conn := retrytest.Conn(t)
	// The topology the services declare, wait queues of this schedule
	// included, so that the cleanup deletes all of it.
	cfg, err := worker.LoadConfig(getenv)
	if err != nil {
		t.Fatal(err)
	}
	topo, err := cfg.Topology(channel.Routes())
	if err != nil {
		t.Fatal(err)
	}
	if err := topo.Declare(context.Background(), conn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := topo.Delete(conn); err != nil {
			t.Error(err)
		}
		if ch, err := conn.Channel(); err == nil {
			_, _ = ch.QueueDelete(topo.Name(events.HistoryQueue), false, false, false)
			_ = ch.ExchangeDelete(events.ExchangeName(topo), false, false)
			ch.Close()
		}
	})

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	apiLogs := &retrytest.Buffer{}
	for name, run := range map[string]func(context.Context, func(string) string, io.Writer) error{
		"retrier": retrier.Run,
		"worker": func(ctx context.Context, g func(string) string, w io.Writer) error {
			return worker.Run(ctx, "webhook", g, w)
		},
		"api": func(ctx context.Context, g func(string) string, _ io.Writer) error { return api.Run(ctx, g, apiLogs) },
	} {
		wg.Go(func() {
			if err := run(ctx, getenv, io.Discard); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		})
	}
	listening := regexp.MustCompile(`"msg":"listening",.*?"addr":"([^"]+)"`)
	var addr string
	retrytest.Eventually(t, 15*time.Second, func() bool {
		if m := listening.FindStringSubmatch(apiLogs.String()); m != nil {
			addr = m[1]
		}
		return addr != ""
	}, "the API never listened; log:\n%s", apiLogs)
	s := &endpointStack{base: "http://" + addr, token: token, topo: topo}
	retrytest.Eventually(t, 15*time.Second, func() bool {
		resp, err := http.Get(s.base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "/readyz never answered 200")
	return s
}

// call sends a request to the API and decodes a JSON answer into out
// (unless nil); it returns the status.
func (s *endpointStack) call(t *testing.T, method, path, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %d %q: %v", method, path, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode
}

type endpointAnswer struct {
	ID             string `json:"id"`
	Secret         string `json:"secret"`
	Enabled        bool   `json:"enabled"`
	DisabledReason string `json:"disabled_reason"`
	Circuit        struct {
		State     string `json:"state"`
		LastError string `json:"last_error"`
	} `json:"circuit"`
}

func (s *endpointStack) createEndpoint(t *testing.T, url string) endpointAnswer {
	t.Helper()
	var ep endpointAnswer
	if code := s.call(t, http.MethodPost, "/v1/endpoints", `{"url":"`+url+`"}`, &ep); code != http.StatusCreated {
		t.Fatalf("POST /v1/endpoints = %d", code)
	}
	return ep
}

// notify posts a notification to the endpoint and returns its id.
func (s *endpointStack) notify(t *testing.T, endpoint string, n int) string {
	t.Helper()
	var out struct {
		ID string `json:"id"`
	}
	if code := s.call(t, http.MethodPost, "/v1/notifications", fmt.Sprintf(`{"webhook":{"endpoint":%q,"payload":{"n":%d}}}`, endpoint, n), &out); code != http.StatusAccepted {
		t.Fatalf("POST /v1/notifications to %s = %d", endpoint, code)
	}
	return out.ID
}

// hookReceiver records the webhooks it takes; under /hang it answers only
// when the sender gives up, under /down 503.
type hookReceiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got map[string][]*http.Request // by path
	raw map[*http.Request][]byte
}

func newHookReceiver(t *testing.T) *hookReceiver {
	r := &hookReceiver{got: map[string][]*http.Request{}, raw: map[*http.Request][]byte{}}
	release := make(chan struct{})
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		kept := req.Clone(context.Background())
		r.mu.Lock()
		r.got[req.URL.Path] = append(r.got[req.URL.Path], kept)
		r.raw[kept] = body
		r.mu.Unlock()
		switch {
		case strings.HasPrefix(req.URL.Path, "/hang"):
			select {
			case <-req.Context().Done():
			case <-release:
			}
		case strings.HasPrefix(req.URL.Path, "/down"):
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(func() {
		close(release)
		r.srv.Close()
	})
	return r
}

// received returns the ids delivered to path, and the requests.
func (r *hookReceiver) received(path string) (map[string]bool, []*http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := map[string]bool{}
	for _, req := range r.got[path] {
		ids[req.Header.Get(webhooks.HeaderID)] = true
	}
	return ids, append([]*http.Request(nil), r.got[path]...)
}

func (r *hookReceiver) body(req *http.Request) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.raw[req]
}

func verifiesWith(secret string, h http.Header, body []byte) bool {
	s, err := webhooks.NewSigner(secret)
	return err == nil && s.Verify(h, body, time.Now()) == nil
}

// TestEndpointsEndToEnd runs the API, the retrier and the webhook worker:
// notifications naming a healthy endpoint are delivered at once, signed
// with its secret, while a hanging endpoint's circuit opens and its
// deliveries wait; the delivery log shows the attempts; a rotation signs
// with both secrets.
func TestEndpointsEndToEnd(t *testing.T) {
	// A timeout long enough that the healthy endpoint's answers never
	// meet it on a loaded machine: its deliveries must all go at once.
	s := startEndpointStack(t, map[string]string{
		"WEBHOOK_BREAKER_FAILURES": "2", "WEBHOOK_BREAKER_COOLDOWN": "1m", "WEBHOOK_ENDPOINT_CONCURRENCY": "2", "CONCURRENCY": "8",
		"WEBHOOK_TIMEOUT": "2s",
	})
	recv := newHookReceiver(t)
	good := s.createEndpoint(t, recv.srv.URL+"/good")
	sick := s.createEndpoint(t, recv.srv.URL+"/hang")

	for i := range 6 {
		s.notify(t, sick.ID, i)
	}
	want := map[string]bool{}
	for i := range 10 {
		want[s.notify(t, good.ID, i)] = true
	}
	retrytest.Eventually(t, 20*time.Second, func() bool {
		got, _ := recv.received("/good")
		for id := range want {
			if !got[id] {
				return false
			}
		}
		return true
	}, "the healthy endpoint did not get its 10 notifications")
	_, reqs := recv.received("/good")
	for _, req := range reqs {
		if !verifiesWith(good.Secret, req.Header, recv.body(req)) {
			t.Errorf("a delivery to the endpoint does not verify with its secret: %v", req.Header)
		}
		if verifiesWith(sick.Secret, req.Header, recv.body(req)) {
			t.Errorf("a delivery to the endpoint verifies with another endpoint's secret")
		}
	}

	var ep endpointAnswer
	retrytest.Eventually(t, 20*time.Second, func() bool {
		s.call(t, http.MethodGet, "/v1/endpoints/"+sick.ID, "", &ep)
		return ep.Circuit.State == "open"
	}, "the hanging endpoint's circuit is not open: %+v", ep)
	if !strings.Contains(ep.Circuit.LastError, "no answer") {
		t.Errorf("the open circuit's last error = %q, want a timeout", ep.Circuit.LastError)
	}
	if _, reqs := recv.received("/hang"); len(reqs) > 4 {
		t.Errorf("the hanging endpoint was dialled %d times; the breaker (2 failures) and the cap (2) allow 4", len(reqs))
	}

	// The healthy endpoint's delivery log: every one delivered, none
	// failed. An attempt over the endpoint's cap (2 in flight, of 8
	// handlers) is deferred, which spends no retry; any other failure is
	// a fault. A deferral's flag comes with the retrier's event: the log
	// is read until it has them all.
	type attempts struct {
		Attempts []struct {
			NotificationID string `json:"notification_id"`
			N              int    `json:"n"`
			Outcome        string `json:"outcome"`
			Error          string `json:"error"`
			Deferred       bool   `json:"deferred"`
		} `json:"attempts"`
	}
	var log attempts
	var faults []string
	retrytest.Eventually(t, 20*time.Second, func() bool {
		s.call(t, http.MethodGet, "/v1/endpoints/"+good.ID+"/attempts?limit=100", "", &log)
		delivered := map[string]bool{}
		faults = nil
		for _, a := range log.Attempts {
			switch {
			case !want[a.NotificationID]:
				faults = append(faults, fmt.Sprintf("%+v is not one of the healthy endpoint's notifications", a))
			case a.Outcome == "delivered":
				delivered[a.NotificationID] = true
			case a.Outcome != "failed" || !a.Deferred:
				faults = append(faults, fmt.Sprintf("%+v, want delivered or deferred", a))
			}
		}
		return len(delivered) == len(want) && len(faults) == 0
	}, "the healthy endpoint's delivery log %+v: want each of its 10 notifications delivered, and every other attempt deferred: %q", &log, &faults)
	var sickLog attempts
	retrytest.Eventually(t, 20*time.Second, func() bool {
		s.call(t, http.MethodGet, "/v1/endpoints/"+sick.ID+"/attempts?limit=100", "", &sickLog)
		return len(sickLog.Attempts) > 0
	}, "the hanging endpoint's log is empty")
	for _, a := range sickLog.Attempts {
		if a.Outcome == "delivered" {
			t.Errorf("the hanging endpoint's log has a delivery: %+v", a)
		}
	}

	// Rotation: within the workers' cache time, deliveries carry both
	// signatures.
	var rotated endpointAnswer
	if code := s.call(t, http.MethodPost, "/v1/endpoints/"+good.ID+"/rotate-secret", "", &rotated); code != http.StatusOK || rotated.Secret == "" {
		t.Fatalf("rotate = %d", code)
	}
	var lastSent time.Time
	sent := map[string]bool{}
	retrytest.Eventually(t, 30*time.Second, func() bool {
		if time.Since(lastSent) > 500*time.Millisecond {
			sent[s.notify(t, good.ID, 99)] = true
			lastSent = time.Now()
		}
		_, reqs := recv.received("/good")
		for _, req := range reqs {
			if !sent[req.Header.Get(webhooks.HeaderID)] {
				continue
			}
			body := recv.body(req)
			if verifiesWith(rotated.Secret, req.Header, body) && verifiesWith(good.Secret, req.Header, body) &&
				len(strings.Fields(req.Header.Get(webhooks.HeaderSignature))) == 2 {
				return true
			}
		}
		return false
	}, "no delivery after the rotation is signed with both secrets")
}

// TestEndpointDisabledEndToEnd keeps an endpoint failing past
// WEBHOOK_DISABLE_AFTER: the workers disable it and park its deliveries as
// endpoint-disabled, the API refuses new notifications to it, and once
// enabled again (and fixed) it takes deliveries.
func TestEndpointDisabledEndToEnd(t *testing.T) {
	s := startEndpointStack(t, map[string]string{
		"WEBHOOK_DISABLE_AFTER": "1s", "WEBHOOK_BREAKER_FAILURES": "1", "WEBHOOK_BREAKER_COOLDOWN": "300ms",
		"RETRY_DELAYS": "300ms,300ms,300ms,300ms,300ms,300ms,300ms,300ms,300ms,300ms",
	})
	recv := newHookReceiver(t)
	ep := s.createEndpoint(t, recv.srv.URL+"/down")
	id := s.notify(t, ep.ID, 1)

	type copyStatus struct {
		Copies []struct {
			Status    string `json:"status"`
			Reason    string `json:"reason"`
			LastError string `json:"last_error"`
		} `json:"copies"`
	}
	var n copyStatus
	retrytest.Eventually(t, 30*time.Second, func() bool {
		s.call(t, http.MethodGet, "/v1/notifications/"+id, "", &n)
		return len(n.Copies) == 1 && n.Copies[0].Status == "parked"
	}, "the notification was not parked: %+v", n)
	if !strings.HasPrefix(n.Copies[0].LastError, channel.ReasonEndpointDisabled+":") {
		t.Errorf("parked with %q, want an error starting %s", n.Copies[0].LastError, channel.ReasonEndpointDisabled)
	}
	var got endpointAnswer
	s.call(t, http.MethodGet, "/v1/endpoints/"+ep.ID, "", &got)
	if got.Enabled || !strings.Contains(got.DisabledReason, "WEBHOOK_DISABLE_AFTER") {
		t.Errorf("endpoint: %+v, want disabled for failing too long", got)
	}
	var problem struct {
		Errors []struct{ Field, Message string } `json:"errors"`
	}
	body := fmt.Sprintf(`{"webhook":{"endpoint":%q,"payload":1}}`, ep.ID)
	if code := s.call(t, http.MethodPost, "/v1/notifications", body, &problem); code != http.StatusUnprocessableEntity ||
		len(problem.Errors) != 1 || problem.Errors[0].Field != "webhook.endpoint" {
		t.Errorf("a notification to the disabled endpoint = %d %+v, want 422 naming webhook.endpoint", code, problem)
	}

	// Fixed and enabled again.
	fixed := fmt.Sprintf(`{"url":%q,"enabled":true}`, recv.srv.URL+"/fixed")
	if code := s.call(t, http.MethodPatch, "/v1/endpoints/"+ep.ID, fixed, &got); code != http.StatusOK || !got.Enabled {
		t.Fatalf("PATCH = %d %+v", code, got)
	}
	again := s.notify(t, ep.ID, 2)
	retrytest.Eventually(t, 20*time.Second, func() bool {
		ids, _ := recv.received("/fixed")
		return ids[again]
	}, "the endpoint enabled again did not get the next notification")
}

// TestEndpointIsolationOnFlaky is the demo: endpoints on the flaky
// receiver's per-endpoint paths. The one that hangs and the one that is
// down have their circuits opened and are dialled no more, while every
// notification to the healthy one is delivered at its first attempt.
func TestEndpointIsolationOnFlaky(t *testing.T) {
	s := startEndpointStack(t, map[string]string{
		"WEBHOOK_BREAKER_FAILURES": "3", "WEBHOOK_BREAKER_COOLDOWN": "1m", "WEBHOOK_ENDPOINT_CONCURRENCY": "2", "CONCURRENCY": "6",
	})
	cfg, err := flaky.LoadConfig(func(k string) string {
		return map[string]string{"FLAKY_HTTP_ADDR": "127.0.0.1:0", "FLAKY_SMTP_ADDR": "127.0.0.1:0", "FLAKY_WEBHOOK_SCENARIO": "flaky",
			"FLAKY_RATE": "0.5", "WEBHOOK_SECRET": webhooks.NewSecret()}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	down, err := flaky.Start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := down.Wait(); err != nil {
			t.Error(err)
		}
	})
	base := "http://" + down.HTTPAddr()
	ok := s.createEndpoint(t, base+flaky.PathOK)
	hang := s.createEndpoint(t, base+flaky.PathHang)
	broken := s.createEndpoint(t, base+flaky.PathDown+"/orders")

	for i := range 8 {
		s.notify(t, hang.ID, i)
		s.notify(t, broken.ID, i)
	}
	want := map[string]bool{}
	for i := range 20 {
		want[s.notify(t, ok.ID, i)] = true
	}
	retrytest.Eventually(t, 30*time.Second, func() bool {
		return down.Stats().Report().WebhookPaths[flaky.PathOK].ByCode[http.StatusOK] == len(want)
	}, "the healthy endpoint did not get its %d notifications", len(want))
	for _, ep := range []endpointAnswer{hang, broken} {
		var got endpointAnswer
		retrytest.Eventually(t, 20*time.Second, func() bool {
			s.call(t, http.MethodGet, "/v1/endpoints/"+ep.ID, "", &got)
			return got.Circuit.State == "open"
		}, "the circuit of %s is not open", ep.ID)
	}
	paths := down.Stats().Report().WebhookPaths
	if n := paths[flaky.PathHang].Answered; n > 3+2 {
		t.Errorf("the hanging endpoint was dialled %d times; the breaker (3) and the cap (2) allow 5", n)
	}
	if n := paths[flaky.PathDown+"/orders"].Answered; n > 3+2 {
		t.Errorf("the endpoint that is down was dialled %d times; the breaker (3) and the cap (2) allow 5", n)
	}
	if n := paths[flaky.PathOK].Answered; n != len(want) {
		t.Errorf("the healthy endpoint was dialled %d times for %d notifications: it waited behind the others", n, len(want))
	}
}
