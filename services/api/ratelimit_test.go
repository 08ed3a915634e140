package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/dashboard"
	"github.com/relay-demo/relay/internal/events"
)

// clock is a settable clock for the limiters; tests move it by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

// limited is a test server with API_RATE_LIMIT=rate, API_RATE_BURST=burst,
// the same limit on failed tokens (API_AUTH_FAILURE_RATE and _BURST) and
// a clock of its own.
func limited(t *testing.T, rate float64, burst int, change func(*Deps)) (http.Handler, *clock) {
	t.Helper()
	c := &clock{t: now}
	h, _, _ := testServer(t, func(d *Deps, _ *fakePublisher) {
		d.RateLimit, d.RateBurst, d.Now = rate, burst, c.now
		d.AuthFailureRate, d.AuthFailureBurst = rate, burst
		if change != nil {
			change(d)
		}
	})
	return h, c
}

// postFrom posts a notification of one copy from addr with the
// Authorization header auth ("" for none) and returns the status and the
// Retry-After header.
func postFrom(h http.Handler, addr, auth string) (int, string) {
	req := httptest.NewRequest(http.MethodPost, "/v1/notifications", strings.NewReader(webhookOnly))
	req.RemoteAddr = addr
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code == http.StatusTooManyRequests {
		var p problemBody
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Type != ProblemRateLimited || p.Status != 429 ||
			rec.Header().Get("Content-Type") != ProblemContentType {
			return -1, fmt.Sprintf("not a rate-limited problem: %v %s", err, rec.Body)
		}
	}
	return rec.Code, rec.Header().Get("Retry-After")
}

const (
	addrA = "192.0.2.1:1234"
	addrB = "198.51.100.7:4321"
	bearA = "Bearer " + tokenA
	bearB = "Bearer " + tokenB
	wrong = "Bearer token-c-0123456789abcdef"
)

// answers sends n requests and lists their statuses, Retry-After
// appended where there is one: "202", "429 1".
func answers(h http.Handler, n int, addr, auth string) []string {
	var out []string
	for range n {
		code, after := postFrom(h, addr, auth)
		s := fmt.Sprint(code)
		if after != "" {
			s += " " + after
		}
		out = append(out, s)
	}
	return out
}

func TestRateLimitBurst(t *testing.T) {
	tests := []struct {
		name  string
		rate  float64
		burst int
		want  []string
		// after waiting this long, the next request passes
		wait time.Duration
	}{
		{name: "burst then 429", rate: 1, burst: 3, want: []string{"202", "202", "202", "429 1", "429 1"}, wait: time.Second},
		{name: "default burst is twice the rate", rate: 2, want: []string{"202", "202", "202", "202", "429 1"}, wait: 500 * time.Millisecond},
		{name: "slow rate waits whole seconds", rate: 0.25, burst: 1, want: []string{"202", "429 4"}, wait: 4 * time.Second},
		{name: "fast rate waits at least a second", rate: 1000, burst: 2, want: []string{"202", "202", "429 1"}, wait: time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, c := limited(t, tt.rate, tt.burst, nil)
			if diff := cmp.Diff(tt.want, answers(h, len(tt.want), addrA, bearA)); diff != "" {
				t.Errorf("statuses (-want +got):\n%s", diff)
			}
			c.advance(tt.wait - tt.wait/100)
			if code, _ := postFrom(h, addrA, bearA); code != http.StatusTooManyRequests {
				t.Errorf("just before the wait is over: status %d, want 429", code)
			}
			c.advance(tt.wait / 100)
			if code, _ := postFrom(h, addrA, bearA); code != http.StatusAccepted {
				t.Errorf("after the wait: status %d, want 202", code)
			}
		})
	}
}

// emailTo is an email notification to n recipients: n copies.
func emailTo(n int) string {
	to := make([]string, n)
	for i := range to {
		to[i] = fmt.Sprintf("%q", fmt.Sprintf("user%d@example.com", i))
	}
	return `{"email":{"to":[` + strings.Join(to, ",") + `],"subject":"Hi","text":"hello"}}`
}

// TestRateLimitCountsCopies: API_RATE_LIMIT counts the copies a token's
// requests make, not the requests. One batch of 500 emails to 50
// recipients each, 25,000 copies, is refused whole, 413, as is anything
// over the burst, which waiting never makes room for; a batch within the
// burst spends it, and one the bucket cannot pay for yet is a 429 with
// Retry-After that spends nothing but the request. Nothing refused is
// published.
func TestRateLimitCountsCopies(t *testing.T) {
	var fake *fakePublisher
	c := &clock{t: now}
	h, _, _ := testServer(t, func(d *Deps, f *fakePublisher) {
		d.RateLimit, d.RateBurst, d.Now, d.MaxBody, fake = 10, 20, c.now, 4<<20, f
	})
	steps := []struct {
		name       string
		advance    time.Duration
		path, body string
		wantStatus int
		wantType   string
		wantAfter  string
		wantCopies int // published by this step
	}{
		{name: "25,000 copies in one batch", path: "/v1/notifications/batch", body: batchOf(repeat(emailTo(50), 500)...),
			wantStatus: 413, wantType: ProblemTooManyCopies},
		{name: "one email to 21 recipients, over the burst", path: "/v1/notifications", body: emailTo(21),
			wantStatus: 413, wantType: ProblemTooManyCopies},
		{name: "the burst, less what the refusals cost", advance: 200 * time.Millisecond, path: "/v1/notifications/batch",
			body: batchOf(repeat(emailTo(5), 4)...), wantStatus: 202, wantCopies: 20},
		{name: "then not one copy more", path: "/v1/notifications", body: webhookOnly, wantStatus: 429, wantType: ProblemRateLimited, wantAfter: "1"},
		{name: "two seconds earn 20", advance: 2 * time.Second, path: "/v1/notifications/batch",
			body: batchOf(emailTo(5), emailTo(5)), wantStatus: 202, wantCopies: 10},
		{name: "a batch the bucket cannot pay for yet", path: "/v1/notifications/batch",
			body: batchOf(emailTo(10), bothParts, emailTo(3)), wantStatus: 429, wantType: ProblemRateLimited, wantAfter: "1"},
		{name: "what it held, less the refused request", path: "/v1/notifications", body: emailTo(9), wantStatus: 202, wantCopies: 9},
	}
	for _, st := range steps {
		c.advance(st.advance)
		before := len(fake.sent)
		rec := call(h, http.MethodPost, st.path, st.body, nil)
		copies := 0
		for _, p := range fake.sent[before:] {
			if p.Key != events.AcceptedRoutingKey {
				copies++
			}
		}
		var p problemBody
		_ = json.Unmarshal(rec.Body.Bytes(), &p)
		if rec.Code != st.wantStatus || (st.wantType != "" && p.Type != st.wantType) || rec.Header().Get("Retry-After") != st.wantAfter || copies != st.wantCopies {
			t.Errorf("%s: %d %s, Retry-After %q, %d copies published; want %d %s, Retry-After %q, %d copies",
				st.name, rec.Code, p.Type, rec.Header().Get("Retry-After"), copies, st.wantStatus, st.wantType, st.wantAfter, st.wantCopies)
		}
		if rec.Code == 413 && !strings.Contains(p.Detail, "API_RATE_BURST") {
			t.Errorf("%s: detail %q does not say what to do", st.name, p.Detail)
		}
	}
}

func TestRateLimitPerToken(t *testing.T) {
	h, _ := limited(t, 1, 2, nil)
	if diff := cmp.Diff([]string{"202", "202", "429 1"}, answers(h, 3, addrA, bearA)); diff != "" {
		t.Errorf("token A (-want +got):\n%s", diff)
	}
	// Token B, from the same address, has a bucket of its own.
	if diff := cmp.Diff([]string{"202", "202", "429 1"}, answers(h, 3, addrA, bearB)); diff != "" {
		t.Errorf("token B (-want +got):\n%s", diff)
	}
	// Token A from another address is still token A.
	if code, _ := postFrom(h, addrB, bearA); code != http.StatusTooManyRequests {
		t.Errorf("token A from another address: status %d, want 429", code)
	}
	// Every /v1/ route counts, not only POST.
	rec := call(h, http.MethodGet, "/v1/dead-letters", "", map[string]string{"Authorization": bearB})
	if rec.Code != http.StatusTooManyRequests {
		t.Errorf("GET /v1/dead-letters over the limit: status %d, want 429", rec.Code)
	}
	// Operations routes are not limited.
	if rec := call(h, http.MethodGet, "/healthz", "", nil); rec.Code != http.StatusOK {
		t.Errorf("/healthz: status %d", rec.Code)
	}
}

func TestRateLimitAuthOff(t *testing.T) {
	h, _ := limited(t, 1, 2, func(d *Deps) { d.AuthOff, d.Tokens = true, nil })
	if diff := cmp.Diff([]string{"202", "202", "429 1"}, answers(h, 3, addrA, "")); diff != "" {
		t.Errorf("address A (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"202", "202"}, answers(h, 2, addrB, "")); diff != "" {
		t.Errorf("address B (-want +got):\n%s", diff)
	}
}

// TestRateLimitOffByDefault: without API_RATE_LIMIT, a right token's
// requests are not limited; wrong ones are, whatever the configuration
// (TestWrongTokensLimitedByDefault).
func TestRateLimitOffByDefault(t *testing.T) {
	h, _, _ := testServer(t, nil)
	for i := range 1000 {
		if code, _ := postFrom(h, addrA, bearA); code != http.StatusAccepted {
			t.Fatalf("request %d: status %d, want 202", i+1, code)
		}
	}
	cfg, err := LoadConfig(func(k string) string { return map[string]string{"API_TOKENS": tokenA}[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RateLimit != 0 || cfg.RateBurst != 0 {
		t.Errorf("API_RATE_LIMIT = %v, API_RATE_BURST = %d by default, want 0 and 0 (off)", cfg.RateLimit, cfg.RateBurst)
	}
	if cfg.AuthFailureRate != DefaultAuthFailureRate || cfg.AuthFailureBurst != DefaultAuthFailureBurst {
		t.Errorf("API_AUTH_FAILURE_RATE = %v, API_AUTH_FAILURE_BURST = %d by default, want %v and %d",
			cfg.AuthFailureRate, cfg.AuthFailureBurst, DefaultAuthFailureRate, DefaultAuthFailureBurst)
	}
}

// TestRateLimitWrongToken sends 20,000 requests with a wrong token from
// one address: the burst is answered 401, the rest 429 before the token
// is looked at, so that guessing goes no faster than the rate.
func TestRateLimitWrongToken(t *testing.T) {
	h, c := limited(t, 1, 5, nil)
	count := map[string]int{}
	for i := range 20_000 {
		auth := wrong
		if i%2 == 1 {
			auth = "" // a missing token counts as a wrong one
		}
		code, after := postFrom(h, addrA, auth)
		count[fmt.Sprint(code, " ", after)]++
	}
	if diff := cmp.Diff(map[string]int{"401 ": 5, "429 1": 19_995}, count); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	// Over the limit, not even the right token is looked at from there...
	if code, _ := postFrom(h, addrA, bearA); code != http.StatusTooManyRequests {
		t.Errorf("right token from the limited address: status %d, want 429", code)
	}
	// ...but other addresses are not concerned.
	if code, _ := postFrom(h, addrB, bearA); code != http.StatusAccepted {
		t.Errorf("right token from another address: status %d, want 202", code)
	}
	if code, _ := postFrom(h, addrB, wrong); code != http.StatusUnauthorized {
		t.Errorf("wrong token from another address: status %d, want 401", code)
	}
	// One failure a second earns one more try a second.
	c.advance(time.Second)
	if diff := cmp.Diff([]string{"401", "429 1"}, answers(h, 2, addrA, wrong)); diff != "" {
		t.Errorf("a second later (-want +got):\n%s", diff)
	}
	// Right tokens spend nothing of the address's failures.
	h2, _ := limited(t, 1, 2, nil)
	for range 2 {
		postFrom(h2, addrA, bearA)
		postFrom(h2, addrA, bearB)
	}
	if diff := cmp.Diff([]string{"401", "401", "429 1"}, answers(h2, 3, addrA, wrong)); diff != "" {
		t.Errorf("failures after successes (-want +got):\n%s", diff)
	}
}

func TestLimiter(t *testing.T) {
	t.Run("debt", func(t *testing.T) {
		l := newLimiter(1, 2, 10)
		// Failures checked together and charged after all count.
		for range 5 {
			if ok, _ := l.check("a", now); !ok {
				t.Fatal("check refused before any charge")
			}
		}
		for range 5 {
			l.charge("a", now)
		}
		ok, wait := l.check("a", now)
		if ok || wait != 4*time.Second {
			t.Errorf("check after 5 charges on a burst of 2 = %t, %s; want false, 4s", ok, wait)
		}
	})
	t.Run("check follows no new key", func(t *testing.T) {
		l := newLimiter(1, 2, 10)
		for i := range 100 {
			l.check(fmt.Sprint(i), now)
		}
		if n := l.size(); n != 0 {
			t.Errorf("%d keys followed after checks alone", n)
		}
	})
	t.Run("bounded", func(t *testing.T) {
		l := newLimiter(1, 2, 3)
		for i := range 1000 {
			if ok, _ := l.take(fmt.Sprint(i), now); !ok {
				t.Fatalf("a new key was refused")
			}
			if n := l.size(); n > 3 {
				t.Fatalf("%d keys followed, want 3 at most", n)
			}
		}
	})
	t.Run("idle keys go first", func(t *testing.T) {
		l := newLimiter(1, 2, 3)
		l.take("idle", now)
		l.take("busy", now.Add(5*time.Second))
		l.take("busy", now.Add(5*time.Second))
		l.take("busy2", now.Add(5*time.Second))
		// Full: the next key makes room, and "idle" refilled long ago.
		l.take("new", now.Add(6*time.Second))
		l.mu.Lock()
		_, idle := l.buckets["idle"]
		_, busy := l.buckets["busy"]
		l.mu.Unlock()
		if idle || !busy {
			t.Errorf("after making room: idle kept %t, busy kept %t; want false, true", idle, busy)
		}
	})
	t.Run("swept now and then", func(t *testing.T) {
		l := newLimiter(1, 2, 100)
		for i := range 50 {
			l.take(fmt.Sprint(i), now)
		}
		l.take("later", now.Add(sweepEvery))
		if n := l.size(); n != 1 {
			t.Errorf("%d keys after a sweep, want 1", n)
		}
	})
}

// dashboardFrom GETs path from addr with the Authorization header auth
// ("" for none) and returns the status.
func dashboardFrom(h http.Handler, path, addr, auth string) int {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.RemoteAddr = addr
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

// TestRateLimitDashboard: the dashboard's data routes are under the limits
// of /v1/. GET /dashboard/session tells a right token from a wrong one, so
// 2,000 wrong tokens from one address get the burst's 401s and then 429;
// a right token's requests spend the bucket it spends on /v1/; visitors
// without a token spend their address's; the page itself is not limited.
func TestRateLimitDashboard(t *testing.T) {
	h, c := limited(t, 1, 5, func(d *Deps) {
		d.Dashboard = dashboard.New(dashboard.Deps{Authenticate: dashboardAccess(d.credentials(), false), Public: true})
		d.DashboardPublic = true
	})
	count := map[int]int{}
	for range 2000 {
		count[dashboardFrom(h, "/dashboard/session", addrA, wrong)]++
	}
	if diff := cmp.Diff(map[int]int{401: 5, 429: 1995}, count); diff != "" {
		t.Errorf("wrong tokens on /dashboard/session (-want +got):\n%s", diff)
	}
	// The address's failures are spent on /v1/ too.
	if code, _ := postFrom(h, addrA, wrong); code != http.StatusTooManyRequests {
		t.Errorf("wrong token on /v1/ after the dashboard's: %d, want 429", code)
	}

	// A right token: its burst, shared between the dashboard and /v1/.
	var got []int
	for _, path := range []string{"/dashboard/session", "/v1/notifications", "/dashboard/queues", "/v1/notifications/ntf_x"} {
		got = append(got, dashboardFrom(h, path, addrB, bearB))
	}
	code, _ := postFrom(h, addrB, bearB)
	got = append(got, code, dashboardFrom(h, "/dashboard/session", addrB, bearB))
	if code, _ := postFrom(h, addrB, bearB); code != http.StatusTooManyRequests {
		t.Errorf("the token's burst spent on the dashboard, then /v1/: %d, want 429", code)
	}
	if diff := cmp.Diff([]int{200, 503, 200, 503, 202, 429}, got); diff != "" {
		t.Errorf("a right token's requests (-want +got):\n%s", diff)
	}

	// A visitor without a token on the public dashboard: its address's burst.
	got = nil
	for range 7 {
		got = append(got, dashboardFrom(h, "/v1/notifications", "203.0.113.9:1", ""))
	}
	if diff := cmp.Diff([]int{503, 503, 503, 503, 503, 429, 429}, got); diff != "" {
		t.Errorf("anonymous data requests (-want +got):\n%s", diff)
	}
	// The page and its files need no token and are not limited.
	for i := range 20 {
		if code := dashboardFrom(h, "/", "203.0.113.9:1", ""); code != http.StatusOK {
			t.Fatalf("page request %d: %d, want 200", i, code)
		}
	}
	// A second later, one more wrong token is looked at.
	c.advance(time.Second)
	if code := dashboardFrom(h, "/dashboard/session", addrA, wrong); code != http.StatusUnauthorized {
		t.Errorf("a wrong token a second later: %d, want 401", code)
	}
}

// TestWrongTokensLimitedByDefault guesses tokens against a server with no
// rate limit configured (API_RATE_LIMIT=0, the default, as on the compose
// demo's public dashboard): GET /dashboard/session and /v1/ answer the
// burst of failures 401, then 429 before a token is looked at, so that
// guessing goes no faster than the failure rate.
func TestWrongTokensLimitedByDefault(t *testing.T) {
	c := &clock{t: now}
	h, _, _ := testServer(t, func(d *Deps, _ *fakePublisher) {
		d.Now = c.now
		d.Dashboard = dashboard.New(dashboard.Deps{Authenticate: dashboardAccess(d.credentials(), false), Public: true})
	})
	count := map[int]int{}
	for i := range 2000 {
		guess := fmt.Sprintf("Bearer guess-%016d", i)
		count[dashboardFrom(h, "/dashboard/session", addrA, guess)]++
	}
	if diff := cmp.Diff(map[int]int{401: 10, 429: 1990}, count); diff != "" {
		t.Errorf("guesses on /dashboard/session (-want +got):\n%s", diff)
	}
	if code, _ := postFrom(h, addrA, wrong); code != http.StatusTooManyRequests {
		t.Errorf("a guess on /v1/ after the dashboard's: %d, want 429", code)
	}
	count = map[int]int{}
	for i := range 2000 {
		code, _ := postFrom(h, addrB, fmt.Sprintf("Bearer guess-%016d", i))
		count[code]++
	}
	if diff := cmp.Diff(map[int]int{401: 10, 429: 1990}, count); diff != "" {
		t.Errorf("guesses on /v1/ (-want +got):\n%s", diff)
	}
	// Another address with the right token is not concerned, nor is a
	// visitor without a token on the public dashboard, and a right token
	// is not limited at all without API_RATE_LIMIT.
	for i := range 100 {
		if code, _ := postFrom(h, "203.0.113.9:1", bearA); code != http.StatusAccepted {
			t.Fatalf("right token %d from another address: %d, want 202", i+1, code)
		}
		if code := dashboardFrom(h, "/dashboard/session", "203.0.113.9:1", ""); code != http.StatusOK {
			t.Fatalf("anonymous session %d: %d, want 200", i+1, code)
		}
	}
	// One failure a second earns one more guess a second.
	c.advance(time.Second)
	if got := []int{dashboardFrom(h, "/dashboard/session", addrA, wrong), dashboardFrom(h, "/dashboard/session", addrA, wrong)}; !cmp.Equal(got, []int{401, 429}) {
		t.Errorf("guesses a second later: %v, want [401 429]", got)
	}
}
