package flaky

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestEndpointOutcome(t *testing.T) {
	tests := []struct {
		path   string
		want   Outcome
		scoped bool
	}{
		{"/webhooks/ok", Outcome{Accept: true, Code: 200}, true},
		{"/webhooks/ok/orders", Outcome{Accept: true, Code: 200}, true},
		{"/webhooks/down", Outcome{Code: 503, Reason: "simulated endpoint down (/webhooks/down)"}, true},
		{"/webhooks/down/2", Outcome{Code: 503, Reason: "simulated endpoint down (/webhooks/down)"}, true},
		{"/webhooks/hang", Outcome{Code: 504, Reason: "simulated endpoint hanging (/webhooks/hang)", Delay: HangFor}, true},
		{"/webhooks/okay", Outcome{}, false},
		{"/webhooks/demo", Outcome{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got, ok := endpointOutcome(tt.path)
			if ok != tt.scoped || got != tt.want {
				t.Errorf("endpointOutcome = %+v, %t; want %+v, %t", got, ok, tt.want, tt.scoped)
			}
			// Whatever the scenario, for webhooks; never for email.
			for _, name := range ScenarioNames {
				s := Scenario{Name: name, Channel: Webhook, Rate: 1, Outage: time.Hour, PermanentMatch: "o", RateLimitAttempts: 5}
				if d := s.Decide("msg_1", 1, tt.path, time.Time{}); tt.scoped && d != tt.want {
					t.Errorf("%s: Decide = %+v, want %+v", name, d, tt.want)
				}
			}
			if d := (Scenario{Name: Healthy, Channel: Email}).Decide("msg_1", 1, tt.path, time.Time{}); !d.Accept || d.Code != 250 {
				t.Errorf("email to %q: %+v", tt.path, d)
			}
		})
	}
}

// TestEndpointPaths posts to each per-endpoint path of a receiver that
// verifies signatures and fails half of the rest: each path answers as
// its name says, unsigned, and /stats counts them apart.
func TestEndpointPaths(t *testing.T) {
	srv := startServer(t, testConfig(t, func(c *Config) {
		c.WebhookScenario, c.Rate, c.WebhookSecret = Flaky, 1, testSecret
	}))
	for i := range 3 {
		id := "msg_ok_" + string(rune('a'+i))
		if got := post(t, http.DefaultClient, srv, webhook{path: "/webhooks/ok/orders", id: id, body: `{}`}); got.Status != http.StatusOK {
			t.Errorf("ok: %d, want 200", got.Status)
		}
		if got := post(t, http.DefaultClient, srv, webhook{path: "/webhooks/down", id: id, body: `{}`}); got.Status != http.StatusServiceUnavailable {
			t.Errorf("down: %d, want 503", got.Status)
		}
	}
	// Signed paths other than these are verified still.
	if got := post(t, http.DefaultClient, srv, webhook{path: "/webhooks/demo", id: "msg_1", body: `{}`}); got.Status != http.StatusUnauthorized {
		t.Errorf("unsigned demo webhook: %d, want 401", got.Status)
	}

	client := &http.Client{Timeout: 200 * time.Millisecond}
	req, err := http.NewRequest(http.MethodPost, "http://"+srv.HTTPAddr()+"/webhooks/hang", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("webhook-id", "msg_hang")
	_, err = client.Do(req)
	var ne interface{ Timeout() bool }
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("hang: err = %v, want a timeout", err)
	}
	waitFor(t, "the hanging webhook to be counted as abandoned", func() bool {
		return srv.Stats().Report().WebhookPaths["/webhooks/hang"].ByCode[statusClientGone] == 1
	})

	paths := srv.Stats().Report().WebhookPaths
	for path, want := range map[string]PathStats{
		"/webhooks/ok/orders": {Answered: 3, ByCode: map[int]int{200: 3}},
		"/webhooks/down":      {Answered: 3, ByCode: map[int]int{503: 3}},
		"/webhooks/demo":      {Answered: 1, ByCode: map[int]int{401: 1}},
	} {
		got := paths[path]
		if got.Answered != want.Answered || len(got.ByCode) != len(want.ByCode) {
			t.Errorf("%s: %+v, want %+v", path, got, want)
		}
		for code, n := range want.ByCode {
			if got.ByCode[code] != n {
				t.Errorf("%s: %d answered %d, want %d", path, got.ByCode[code], code, n)
			}
		}
	}
	if got := srv.Stats().Report().Webhook.Accepted; got != 3 {
		t.Errorf("accepted = %d, want the 3 to /webhooks/ok", got)
	}
}

func TestAnsweredPathsBounded(t *testing.T) {
	s := NewStats(Healthy, Healthy)
	for i := range maxPaths + 10 {
		s.Answered("/webhooks/p"+strings.Repeat("x", i), 200)
	}
	paths := s.Report().WebhookPaths
	if len(paths) != maxPaths+1 || paths[otherPaths].Answered != 10 {
		t.Errorf("%d paths, %d under %s; want %d and 10", len(paths), paths[otherPaths].Answered, otherPaths, maxPaths+1)
	}
}
