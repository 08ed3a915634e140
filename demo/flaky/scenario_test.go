package flaky

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestDecide(t *testing.T) {
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	base := Scenario{
		Seed:              1,
		Rate:              0.3,
		Start:             start,
		Outage:            10 * time.Second,
		Latency:           15 * time.Second,
		RetryAfter:        1500 * time.Millisecond,
		RateLimitAttempts: 2,
		PermanentMatch:    "fail",
	}
	with := func(name string, ch Channel, change func(*Scenario)) Scenario {
		s := base
		s.Name, s.Channel = name, ch
		if change != nil {
			change(&s)
		}
		return s
	}
	rate := func(r float64) func(*Scenario) { return func(s *Scenario) { s.Rate = r } }

	tests := []struct {
		name     string
		scenario Scenario
		attempt  int
		target   string
		now      time.Time
		want     Outcome
	}{
		{"healthy webhook", with(Healthy, Webhook, nil), 1, "/webhooks/a", start, Outcome{Accept: true, Code: 200}},
		{"healthy email", with(Healthy, Email, nil), 1, "a@example.com", start, Outcome{Accept: true, Code: 250}},
		{"empty name is healthy", with("", Webhook, nil), 1, "/webhooks/fail", start, Outcome{Accept: true, Code: 200}},
		{"flaky rate 0 webhook", with(Flaky, Webhook, rate(0)), 1, "/webhooks/a", start, Outcome{Accept: true, Code: 200}},
		{"flaky rate 1 webhook", with(Flaky, Webhook, rate(1)), 3, "/webhooks/a", start,
			Outcome{Code: 503, Reason: "simulated transient failure (attempt 3)"}},
		{"flaky rate 1 email", with(Flaky, Email, rate(1)), 1, "a@example.com", start,
			Outcome{Code: 451, Reason: "simulated transient failure (attempt 1)"}},
		{"outage during window webhook", with(Outage, Webhook, nil), 1, "/webhooks/a", start.Add(9 * time.Second),
			Outcome{Code: 503, Reason: "simulated outage until 2025-03-01T12:00:10Z"}},
		{"outage during window email", with(Outage, Email, nil), 5, "a@example.com", start,
			Outcome{Code: 451, Reason: "simulated outage until 2025-03-01T12:00:10Z"}},
		{"outage over", with(Outage, Webhook, nil), 1, "/webhooks/a", start.Add(10 * time.Second), Outcome{Accept: true, Code: 200}},
		{"rate limited first attempt", with(RateLimited, Webhook, nil), 1, "/webhooks/a", start,
			Outcome{Code: 429, Reason: "rate limited, retry after 2 seconds", RetryAfter: 1500 * time.Millisecond}},
		{"rate limited last limited attempt", with(RateLimited, Webhook, nil), 2, "/webhooks/a", start,
			Outcome{Code: 429, Reason: "rate limited, retry after 2 seconds", RetryAfter: 1500 * time.Millisecond}},
		{"rate limited let through", with(RateLimited, Webhook, nil), 3, "/webhooks/a", start, Outcome{Accept: true, Code: 200}},
		{"rate limited email", with(RateLimited, Email, nil), 1, "a@example.com", start,
			Outcome{Code: 421, Reason: "rate limited, retry after 2 seconds", RetryAfter: 1500 * time.Millisecond}},
		{"slow webhook", with(Slow, Webhook, nil), 1, "/webhooks/a", start, Outcome{Accept: true, Code: 200, Delay: 15 * time.Second}},
		{"slow email", with(Slow, Email, nil), 1, "a@example.com", start, Outcome{Accept: true, Code: 250, Delay: 15 * time.Second}},
		{"permanent path", with(Permanent, Webhook, nil), 1, "/webhooks/will-fail", start,
			Outcome{Code: 410, Reason: "/webhooks/will-fail is refused for good"}},
		{"permanent recipient", with(Permanent, Email, nil), 1, "fail@example.com", start,
			Outcome{Code: 550, Reason: "fail@example.com is refused for good"}},
		{"permanent other path", with(Permanent, Webhook, nil), 1, "/webhooks/ok", start, Outcome{Accept: true, Code: 200}},
		{"permanent other recipient", with(Permanent, Email, nil), 1, "ok@example.com", start, Outcome{Accept: true, Code: 250}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.scenario.Decide("msg-1", tt.attempt, tt.target, tt.now)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecideFlakyIsSeeded(t *testing.T) {
	s := Scenario{Name: Flaky, Channel: Webhook, Seed: 7, Rate: 0.3}
	run := func(s Scenario) []bool {
		var failed []bool
		for i := range 1000 {
			id := fmt.Sprintf("msg-%d", i)
			for attempt := 1; attempt <= 3; attempt++ {
				failed = append(failed, !s.Decide(id, attempt, "/webhooks/a", time.Time{}).Accept)
			}
		}
		return failed
	}
	first := run(s)
	if diff := cmp.Diff(first, run(s)); diff != "" {
		t.Fatalf("rerun with the same seed differs (-first +second):\n%s", diff)
	}
	n := 0
	for _, f := range first {
		if f {
			n++
		}
	}
	if got := float64(n) / float64(len(first)); got < 0.25 || got > 0.35 {
		t.Errorf("failure share = %.3f, want about 0.3", got)
	}
	other := s
	other.Seed = 8
	if cmp.Equal(first, run(other)) {
		t.Errorf("seeds 7 and 8 fail the same attempts")
	}
}

// relay sends a notification's email once per recipient, each with the
// notification's id: only the same id to the same recipients again is a
// duplicate.
func TestEmailDuplicatesPerRecipient(t *testing.T) {
	s := NewStats("healthy", "healthy")
	for _, c := range []struct {
		to   []string
		want bool
	}{
		{[]string{"ok1@example.com"}, false},
		{[]string{"ok2@example.com"}, false},
		{[]string{"ok1@example.com"}, true},
		{[]string{"b@example.com", "a@example.com"}, false},
		{[]string{"a@example.com", "b@example.com"}, true},
	} {
		if got := s.AcceptEmail(EmailMessage{ID: "ntf_1", To: c.to}); got != c.want {
			t.Errorf("AcceptEmail(ntf_1 to %v) duplicate = %v, want %v", c.to, got, c.want)
		}
	}
	if got := s.Report().Email.Duplicates; got != 2 {
		t.Errorf("duplicates = %d, want 2", got)
	}
}

func TestThrottledScenario(t *testing.T) {
	for _, ch := range []Channel{Email, Webhook} {
		t.Run(string(ch), func(t *testing.T) {
			s := Scenario{Name: Throttled, Channel: ch, Limit: 3, Window: &Window{}}
			t0 := time.Date(2026, 1, 1, 12, 0, 0, 250_000_000, time.UTC)
			wantCode := 429
			if ch == Email {
				wantCode = 421
			}
			var got []bool
			for i := range 5 {
				got = append(got, s.Decide(fmt.Sprint("id-", i), 1, "ada@example.com", t0).Accept)
			}
			if want := []bool{true, true, true, false, false}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("within one second: accepted %v, want %v", got, want)
			}
			o := s.Decide("id-9", 1, "ada@example.com", t0)
			if o.Code != wantCode || o.RetryAfter != 750*time.Millisecond {
				t.Errorf("over the limit: %+v, want code %d and a wait to the next second", o, wantCode)
			}
			if !s.Decide("id-10", 1, "ada@example.com", t0.Add(time.Second)).Accept {
				t.Error("the next second: turned away, want accepted")
			}
		})
	}
}
