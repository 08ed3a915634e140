package flaky

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const testSecret = "whsec_c2VjcmV0LWtleS1mb3ItdGVzdHMtb2YtZmxha3ktMDE="

// testSMSSecret is the SMS gateway's own key in the tests.
const testSMSSecret = "whsec_c21zLWdhdGV3YXkta2V5LWZvci10ZXN0cy1vZi1mbGFreQ=="

// testConfig is the default configuration with both listeners on free
// loopback ports, changed by change.
func testConfig(t *testing.T, change func(*Config)) Config {
	t.Helper()
	cfg, err := LoadConfig(func(string) string { return "" })
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	cfg.HTTPAddr, cfg.SMTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	if change != nil {
		change(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	return cfg
}

// startServer runs a flaky server until the test ends, then checks that it
// shut down cleanly.
func startServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := Start(ctx, cfg, slog.New(slog.NewJSONHandler(t.Output(), nil)))
	if err != nil {
		cancel()
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := srv.Wait(); err != nil {
			t.Errorf("Wait: %v", err)
		}
	})
	return srv
}

// sign computes a Standard Webhooks signature header value.
func sign(t *testing.T, secret, id string, ts time.Time, body []byte) string {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatalf("decode secret: %v", err)
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%d.", id, ts.Unix())
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

type webhook struct {
	path string
	id   string
	body string
	// signWith, when set, is the secret the webhook is signed with.
	signWith string
}

type answer struct {
	Status     int
	RetryAfter string
}

func post(t *testing.T, client *http.Client, srv *Server, w webhook) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+srv.HTTPAddr()+w.path, strings.NewReader(w.body))
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if w.id != "" {
		req.Header.Set("webhook-id", w.id)
	}
	if w.signWith != "" {
		now := time.Now()
		req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
		req.Header.Set("webhook-signature", sign(t, w.signWith, w.id, now, []byte(w.body)))
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", w.path, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return answer{Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After")}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d", url, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: decode: %v", url, err)
	}
}

// ignoreAttemptTimes compares attempt lists by length only.
var ignoreAttemptTimes = cmp.Transformer("attemptCount", func(at []time.Time) int { return len(at) })

func TestWebhooks(t *testing.T) {
	tests := []struct {
		name     string
		cfg      func(*Config)
		webhooks []webhook
		want     []answer
		stats    ChannelStats
	}{
		{
			name: "signed webhooks with a duplicate",
			cfg:  func(c *Config) { c.WebhookSecret = testSecret },
			webhooks: []webhook{
				{path: "/webhooks/orders", id: "msg_1", body: `{"n":1}`, signWith: testSecret},
				{path: "/webhooks/orders", id: "msg_2", body: `{"n":2}`, signWith: testSecret},
				{path: "/webhooks/orders", id: "msg_1", body: `{"n":1}`, signWith: testSecret},
			},
			want: []answer{{Status: 200}, {Status: 200}, {Status: 200}},
			stats: ChannelStats{
				Scenario: Healthy, Received: 3, Accepted: 2, Duplicates: 1, FailedByCode: map[int]int{},
				Attempts: map[string][]time.Time{"msg_1": make([]time.Time, 2), "msg_2": make([]time.Time, 1)},
			},
		},
		{
			name: "unsigned and badly signed webhooks are refused when a secret is set",
			cfg:  func(c *Config) { c.WebhookSecret = testSecret },
			webhooks: []webhook{
				{path: "/webhooks/a", id: "msg_1", body: `{}`},
				{path: "/webhooks/a", id: "msg_2", body: `{}`, signWith: "whsec_b3RoZXIta2V5"},
			},
			want: []answer{{Status: 401}, {Status: 401}},
			stats: ChannelStats{
				Scenario: Healthy, Received: 2, FailedByCode: map[int]int{401: 2}, Attempts: map[string][]time.Time{},
			},
		},
		{
			name: "the SMS gateway takes only requests signed with its own key for an SMS",
			cfg:  func(c *Config) { c.WebhookSecret = testSecret; c.SMSSecret = testSMSSecret },
			webhooks: []webhook{
				// A bare webhook replayed: signed with WEBHOOK_SECRET.
				{path: "/webhooks/sms", id: "msg_1", body: `{"to":"+15551234567","text":"hi"}`, signWith: testSecret},
				{path: "/webhooks/sms", id: "msg_2", body: `{"type":"sms","to":"+15551234567","text":"hi"}`, signWith: testSecret},
				// Its own key, but a body signed for another purpose.
				{path: "/webhooks/sms", id: "msg_3", body: `{"to":"+15551234567","text":"hi"}`, signWith: testSMSSecret},
				{path: "/webhooks/sms-fail", id: "msg_4", body: `{"type":"webhook","to":"+15551234567","text":"hi"}`, signWith: testSMSSecret},
				{path: "/webhooks/sms", id: "msg_5", body: `{"type":"sms","to":"+15551234567","text":"hi"}`, signWith: testSMSSecret},
				// The other paths keep WEBHOOK_SECRET.
				{path: "/webhooks/orders", id: "msg_6", body: `{}`, signWith: testSMSSecret},
			},
			want: []answer{{Status: 401}, {Status: 401}, {Status: 401}, {Status: 401}, {Status: 200}, {Status: 401}},
			stats: ChannelStats{
				Scenario: Healthy, Received: 6, Accepted: 1, FailedByCode: map[int]int{401: 5},
				Attempts: map[string][]time.Time{"msg_5": make([]time.Time, 1)},
			},
		},
		{
			name: "unsigned webhooks pass without a secret",
			webhooks: []webhook{
				{path: "/webhooks/a", id: "msg_1", body: `{}`},
				{path: "/webhooks/a", body: `{}`},
			},
			want: []answer{{Status: 200}, {Status: 400}},
			stats: ChannelStats{
				Scenario: Healthy, Received: 2, Accepted: 1, FailedByCode: map[int]int{400: 1},
				Attempts: map[string][]time.Time{"msg_1": make([]time.Time, 1)},
			},
		},
		{
			name: "rate limited asks to wait",
			cfg:  func(c *Config) { c.WebhookScenario = RateLimited; c.RetryAfter = 3 * time.Second },
			webhooks: []webhook{
				{path: "/webhooks/a", id: "msg_1", body: `{}`},
				{path: "/webhooks/a", id: "msg_1", body: `{}`},
				{path: "/webhooks/a", id: "msg_1", body: `{}`},
				{path: "/webhooks/a", id: "msg_1", body: `{}`},
			},
			want: []answer{{Status: 429, RetryAfter: "3"}, {Status: 429, RetryAfter: "3"}, {Status: 200}, {Status: 200}},
			stats: ChannelStats{
				Scenario: RateLimited, Received: 4, Accepted: 1, Duplicates: 1, FailedByCode: map[int]int{429: 2},
				Attempts: map[string][]time.Time{"msg_1": make([]time.Time, 4)},
			},
		},
		{
			name: "flaky fails every attempt at rate 1",
			cfg:  func(c *Config) { c.WebhookScenario = Flaky; c.Rate = 1 },
			webhooks: []webhook{
				{path: "/webhooks/a", id: "msg_1", body: `{}`},
				{path: "/webhooks/a", id: "msg_1", body: `{}`},
			},
			want: []answer{{Status: 503}, {Status: 503}},
			stats: ChannelStats{
				Scenario: Flaky, Received: 2, FailedByCode: map[int]int{503: 2},
				Attempts: map[string][]time.Time{"msg_1": make([]time.Time, 2)},
			},
		},
		{
			name: "outage fails from start",
			cfg:  func(c *Config) { c.WebhookScenario = Outage; c.Outage = time.Hour },
			webhooks: []webhook{
				{path: "/webhooks/a", id: "msg_1", body: `{}`},
			},
			want: []answer{{Status: 503}},
			stats: ChannelStats{
				Scenario: Outage, Received: 1, FailedByCode: map[int]int{503: 1},
				Attempts: map[string][]time.Time{"msg_1": make([]time.Time, 1)},
			},
		},
		{
			name: "permanent path is gone",
			cfg:  func(c *Config) { c.WebhookScenario = Permanent; c.PermanentMatch = "gone" },
			webhooks: []webhook{
				{path: "/webhooks/gone/1", id: "msg_1", body: `{}`},
				{path: "/webhooks/here", id: "msg_2", body: `{}`},
			},
			want: []answer{{Status: 410}, {Status: 200}},
			stats: ChannelStats{
				Scenario: Permanent, Received: 2, Accepted: 1, FailedByCode: map[int]int{410: 1},
				Attempts: map[string][]time.Time{"msg_1": make([]time.Time, 1), "msg_2": make([]time.Time, 1)},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startServer(t, testConfig(t, tt.cfg))
			var got []answer
			for _, w := range tt.webhooks {
				got = append(got, post(t, http.DefaultClient, srv, w))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("answers (-want +got):\n%s", diff)
			}
			var report StatsReport
			getJSON(t, "http://"+srv.HTTPAddr()+"/stats", &report)
			if diff := cmp.Diff(tt.stats, report.Webhook, ignoreAttemptTimes); diff != "" {
				t.Errorf("webhook stats (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStatsAndMessages(t *testing.T) {
	srv := startServer(t, testConfig(t, func(c *Config) { c.EmailScenario = Flaky }))
	before := time.Now().UTC()
	post(t, http.DefaultClient, srv, webhook{path: "/webhooks/a", id: "msg_1", body: `{"order":1}`})
	post(t, http.DefaultClient, srv, webhook{path: "/webhooks/b/c", id: "msg_2", body: `not json`})
	post(t, http.DefaultClient, srv, webhook{path: "/webhooks/a", id: "msg_1", body: `{"order":1}`})
	after := time.Now().UTC()

	var raw map[string]map[string]json.RawMessage
	getJSON(t, "http://"+srv.HTTPAddr()+"/stats", &raw)
	var attempts map[string][]string
	if err := json.Unmarshal(raw["webhook"]["attempts"], &attempts); err != nil {
		t.Fatalf("decode attempts: %v", err)
	}
	if len(attempts["msg_1"]) != 2 {
		t.Fatalf("attempts of msg_1 = %q, want 2", attempts["msg_1"])
	}
	for _, s := range append(attempts["msg_1"], attempts["msg_2"]...) {
		at, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatalf("attempt time %q: %v", s, err)
		}
		if at.Before(before) || at.After(after) {
			t.Errorf("attempt time %s outside [%s, %s]", at, before, after)
		}
	}
	var report StatsReport
	getJSON(t, "http://"+srv.HTTPAddr()+"/stats", &report)
	wantEmail := ChannelStats{Scenario: Flaky, FailedByCode: map[int]int{}, Attempts: map[string][]time.Time{}}
	if diff := cmp.Diff(wantEmail, report.Email); diff != "" {
		t.Errorf("email stats (-want +got):\n%s", diff)
	}

	tests := []struct {
		query string
		want  []WebhookMessage
	}{
		{"", []WebhookMessage{
			{ID: "msg_2", Path: "/webhooks/b/c", Body: json.RawMessage(`"not json"`)},
			{ID: "msg_1", Path: "/webhooks/a", Body: json.RawMessage(`{"order":1}`)},
		}},
		{"?limit=1", []WebhookMessage{{ID: "msg_2", Path: "/webhooks/b/c", Body: json.RawMessage(`"not json"`)}}},
		{"?limit=9999", []WebhookMessage{
			{ID: "msg_2", Path: "/webhooks/b/c", Body: json.RawMessage(`"not json"`)},
			{ID: "msg_1", Path: "/webhooks/a", Body: json.RawMessage(`{"order":1}`)},
		}},
	}
	for _, tt := range tests {
		t.Run("messages"+tt.query, func(t *testing.T) {
			var got MessagesReport
			getJSON(t, "http://"+srv.HTTPAddr()+"/messages"+tt.query, &got)
			if diff := cmp.Diff(tt.want, got.Webhook, cmpopts.IgnoreFields(WebhookMessage{}, "ReceivedAt")); diff != "" {
				t.Errorf("webhooks (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]EmailMessage{}, got.Email); diff != "" {
				t.Errorf("emails (-want +got):\n%s", diff)
			}
		})
	}

	for _, q := range []string{"?limit=0", "?limit=x"} {
		resp, err := http.Get("http://" + srv.HTTPAddr() + "/messages" + q)
		if err != nil {
			t.Fatalf("GET /messages%s: %v", q, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET /messages%s: status %d, want 400", q, resp.StatusCode)
		}
	}
}

func TestHealthz(t *testing.T) {
	srv := startServer(t, testConfig(t, nil))
	var got map[string]string
	getJSON(t, "http://"+srv.HTTPAddr()+"/healthz", &got)
	if diff := cmp.Diff(map[string]string{"status": "ok"}, got); diff != "" {
		t.Errorf("healthz (-want +got):\n%s", diff)
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

func TestSlowWebhookOutlastsSenderTimeout(t *testing.T) {
	srv := startServer(t, testConfig(t, func(c *Config) { c.WebhookScenario = Slow; c.Latency = time.Minute }))
	client := &http.Client{Timeout: 100 * time.Millisecond}
	req, err := http.NewRequest(http.MethodPost, "http://"+srv.HTTPAddr()+"/webhooks/a", strings.NewReader(`{}`))
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	req.Header.Set("webhook-id", "msg_1")
	_, err = client.Do(req)
	var ne interface{ Timeout() bool }
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("POST: err = %v, want a timeout", err)
	}
	waitFor(t, "the slow webhook to be counted as abandoned", func() bool {
		return srv.Stats().Report().Webhook.FailedByCode[statusClientGone] == 1
	})
	if got := srv.Stats().Report().Webhook.Accepted; got != 0 {
		t.Errorf("accepted = %d, want 0", got)
	}
}

func TestSlowWebhookEndsOnShutdown(t *testing.T) {
	cfg := testConfig(t, func(c *Config) { c.WebhookScenario = Slow; c.Latency = time.Hour })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := Start(ctx, cfg, slog.New(slog.NewJSONHandler(t.Output(), nil)))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	status := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, "http://"+srv.HTTPAddr()+"/webhooks/a", strings.NewReader(`{}`))
		req.Header.Set("webhook-id", "msg_1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			status <- 0
			return
		}
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	waitFor(t, "the webhook to arrive", func() bool { return srv.Stats().Report().Webhook.Received == 1 })
	cancel()
	if err := srv.Wait(); err != nil {
		t.Errorf("Wait: %v", err)
	}
	if got := <-status; got != http.StatusServiceUnavailable {
		t.Errorf("status = %d, want 503", got)
	}
}

// TestStopsWhenCancelledAtOnce cancels the server the moment it starts,
// as relay all does when another service refuses its configuration: the
// SMTP server's shutdown may run before it has begun to serve, and Wait
// must still return.
func TestStopsWhenCancelledAtOnce(t *testing.T) {
	cfg := testConfig(t, nil)
	logger := slog.New(slog.DiscardHandler)
	for i := range 200 {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		srv, err := Start(ctx, cfg, logger)
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		done := make(chan error, 1)
		go func() { done <- srv.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("start %d: Wait: %v", i, err)
			}
		case <-time.After(2 * shutdownTimeout):
			t.Fatalf("start %d: Wait has not returned %s after the server was cancelled", i, 2*shutdownTimeout)
		}
	}
}

func TestRun(t *testing.T) {
	env := map[string]string{
		"FLAKY_HTTP_ADDR":        "127.0.0.1:0",
		"FLAKY_SMTP_ADDR":        "127.0.0.1:0",
		"FLAKY_WEBHOOK_SCENARIO": "flaky",
		"WEBHOOK_SECRET":         testSecret,
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, func(k string) string { return env[k] }, pw)
		pw.Close()
	}()

	lines := make(chan map[string]any)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				m = map[string]any{"unparsed": sc.Text()}
			}
			lines <- m
		}
	}()

	var httpAddr string
	var logged bytes.Buffer
	for m := range lines {
		fmt.Fprintln(&logged, m)
		if m["WEBHOOK_SECRET"] != nil && m["WEBHOOK_SECRET"] != "***" {
			t.Errorf("secret logged unmasked: %v", m["WEBHOOK_SECRET"])
		}
		if m["msg"] == "listening" {
			httpAddr, _ = m["http_addr"].(string)
			break
		}
	}
	if httpAddr == "" {
		t.Fatalf("no listening line with http_addr in the log:\n%s", logged.String())
	}
	go func() {
		for range lines {
		}
	}()

	var got map[string]string
	getJSON(t, "http://"+httpAddr+"/healthz", &got)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	env := map[string]string{"FLAKY_WEBHOOK_SCENARIO": "chaos"}
	err := Run(context.Background(), func(k string) string { return env[k] }, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "FLAKY_WEBHOOK_SCENARIO") {
		t.Errorf("Run: err = %v, want one naming FLAKY_WEBHOOK_SCENARIO", err)
	}
}

// TestStopsWhenStoppedAtOnce stops servers the moment they start, before
// their serving goroutines may have begun: each must still stop within
// seconds. relay all does this when one of its services refuses its
// configuration.
func TestStopsWhenStoppedAtOnce(t *testing.T) {
	cfg := testConfig(t, nil)
	for i := range 50 {
		ctx, cancel := context.WithCancel(context.Background())
		srv, err := Start(ctx, cfg, slog.New(slog.DiscardHandler))
		cancel()
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		done := make(chan error, 1)
		go func() { done <- srv.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("server %d: Wait: %v", i, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("server %d still serves 5s after it was stopped", i)
		}
	}
}
