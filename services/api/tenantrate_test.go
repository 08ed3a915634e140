package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relay-demo/relay/internal/events"
)

// Tokens of named tenants and an operator's, for the tenants' rate.
const (
	tokenAcme1 = "token-acme-1-0123456789"
	tokenAcme2 = "token-acme-2-0123456789"
	tokenAcme3 = "token-acme-3-0123456789"
	tokenBeta  = "token-beta-1-0123456789"
)

// TestTenantRateLimit: API_TENANT_RATE_LIMIT counts the copies of all a
// tenant's tokens together, as API_RATE_LIMIT counts a token's: over the
// tenant's burst a request is refused whole (413), beyond what its bucket
// holds now it gets 429 with Retry-After, another tenant's bucket is its
// own, and an operator's copies are the default tenant's. A request
// spends from its token's bucket and its tenant's, or from neither: a
// refusal costs the token only the request itself, as any refused request
// does, and the tenant nothing. The tokens' rate is slow enough that the
// test's few seconds earn them nothing worth a copy, so what a token
// holds at each step is what the steps before it spent.
func TestTenantRateLimit(t *testing.T) {
	var fake *fakePublisher
	c := &clock{t: now}
	h, _, _ := testServer(t, func(d *Deps, f *fakePublisher) {
		d.TenantTokens = []TenantToken{{"acme", tokenAcme1}, {"acme", tokenAcme2}, {"acme", tokenAcme3}, {"beta", tokenBeta}}
		d.OperatorTokens = []string{tokenOperator}
		d.RateLimit, d.RateBurst = 0.01, 20
		d.TenantRateLimit, d.TenantRateBurst = 10, 10
		d.Now, fake = c.now, f
	})
	steps := []struct {
		name       string
		advance    time.Duration
		token      string
		body       string
		wantStatus int
		wantType   string
		wantAfter  string // "any" for a Retry-After of any length
		wantIn     string // in the problem's detail
		wantCopies int    // published by this step
	}{
		{name: "over the tenant's burst, within the token's", token: tokenAcme1, body: emailTo(11),
			wantStatus: 413, wantType: ProblemTooManyCopies, wantIn: `at most 10 may be sent at once by tenant "acme" (API_TENANT_RATE_BURST)`},
		{name: "the tenant's burst", token: tokenAcme1, body: emailTo(10), wantStatus: 202, wantCopies: 10},
		{name: "the tenant's bucket is empty", token: tokenAcme1, body: emailTo(5),
			wantStatus: 429, wantType: ProblemRateLimited, wantAfter: "1", wantIn: `tenant "acme" allows now to all its tokens together (API_TENANT_RATE_LIMIT`},
		{name: "for every token of the tenant", token: tokenAcme2, body: webhookOnly,
			wantStatus: 429, wantType: ProblemRateLimited, wantAfter: "1", wantIn: "API_TENANT_RATE_LIMIT"},
		{name: "another tenant has a bucket of its own", token: tokenBeta, body: emailTo(10), wantStatus: 202, wantCopies: 10},
		// The token spent 20: 1 and 10 for the two it sent, 1 for each
		// request refused. Had a refusal spent its copies, it would not
		// hold these 8.
		{name: "refused copies cost the token nothing", advance: time.Second, token: tokenAcme1, body: emailTo(8), wantStatus: 202, wantCopies: 8},
		{name: "the tenant earns its rate again", advance: time.Second, token: tokenAcme2, body: emailTo(10), wantStatus: 202, wantCopies: 10},
		// Token acme2 holds about 9; the tenant, full again, 10.
		{name: "over the token's bucket, within the tenant's", advance: time.Second, token: tokenAcme2, body: emailTo(10),
			wantStatus: 429, wantType: ProblemRateLimited, wantAfter: "any", wantIn: "with this token"},
		{name: "a refusal by the token costs the tenant nothing", token: tokenAcme3, body: emailTo(10), wantStatus: 202, wantCopies: 10},
		{name: "the default tenant's tokens", token: tokenA, body: emailTo(10), wantStatus: 202, wantCopies: 10},
		{name: "an operator's copies are the default tenant's", token: tokenOperator, body: webhookOnly,
			wantStatus: 429, wantType: ProblemRateLimited, wantAfter: "1", wantIn: "the default tenant"},
		{name: "the named tenants are not the default's", token: tokenBeta, body: emailTo(10), wantStatus: 202, wantCopies: 10},
	}
	tokens := []string{tokenA, tokenB, tokenAcme1, tokenAcme2, tokenAcme3, tokenBeta, tokenOperator}
	for _, st := range steps {
		c.advance(st.advance)
		before := len(fake.sent)
		rec := call(h, http.MethodPost, "/v1/notifications", st.body, map[string]string{"Authorization": "Bearer " + st.token})
		copies := 0
		for _, p := range fake.sent[before:] {
			if p.Key != events.AcceptedRoutingKey {
				copies++
			}
		}
		var p problemBody
		_ = json.Unmarshal(rec.Body.Bytes(), &p)
		after := rec.Header().Get("Retry-After")
		if st.wantAfter == "any" && after != "" {
			after = "any"
		}
		if rec.Code != st.wantStatus || (st.wantType != "" && p.Type != st.wantType) || after != st.wantAfter || copies != st.wantCopies {
			t.Errorf("%s: %d %s, Retry-After %q, %d copies published; want %d %s, Retry-After %q, %d copies",
				st.name, rec.Code, p.Type, rec.Header().Get("Retry-After"), copies, st.wantStatus, st.wantType, st.wantAfter, st.wantCopies)
		}
		if !strings.Contains(p.Detail, st.wantIn) {
			t.Errorf("%s: detail %q, want it to say %q", st.name, p.Detail, st.wantIn)
		}
		for _, tok := range tokens {
			if strings.Contains(rec.Body.String(), tok) {
				t.Errorf("%s: the answer quotes a token: %s", st.name, rec.Body)
			}
		}
	}
}

// TestTenantRateLimitBatch: a batch is charged whole, to the tenant as to
// the token: one over the tenant's burst is refused, 413, and one the
// tenant's bucket cannot pay for yet 429, spending nothing; the token
// still holds every copy it would have held without them.
func TestTenantRateLimitBatch(t *testing.T) {
	var fake *fakePublisher
	c := &clock{t: now}
	h, _, _ := testServer(t, func(d *Deps, f *fakePublisher) {
		d.TenantTokens = []TenantToken{{"acme", tokenAcme1}, {"acme", tokenAcme2}}
		d.RateLimit, d.RateBurst = 0.01, 40
		d.TenantRateLimit, d.TenantRateBurst = 10, 30
		d.Now, d.MaxBody, fake = c.now, 4<<20, f
	})
	post := func(token, body string) (int, int) {
		before := len(fake.sent)
		rec := call(h, http.MethodPost, "/v1/notifications/batch", body, map[string]string{"Authorization": "Bearer " + token})
		copies := 0
		for _, p := range fake.sent[before:] {
			if p.Key != events.AcceptedRoutingKey {
				copies++
			}
		}
		return rec.Code, copies
	}
	if code, copies := post(tokenAcme1, batchOf(repeat(emailTo(8), 4)...)); code != 413 || copies != 0 {
		t.Errorf("32 copies over the tenant's burst of 30: %d, %d copies published; want 413 and none", code, copies)
	}
	if code, copies := post(tokenAcme2, batchOf(repeat(emailTo(10), 2)...)); code != 202 || copies != 20 {
		t.Errorf("20 copies from the other token: %d, %d copies published; want 202 and 20", code, copies)
	}
	if code, copies := post(tokenAcme1, batchOf(repeat(emailTo(6), 2)...)); code != 429 || copies != 0 {
		t.Errorf("12 copies with 10 left to the tenant: %d, %d copies published; want 429 and none", code, copies)
	}
	// Token acme1 spent 1 for each refused request: 38 left, and the
	// tenant is full again after 3 seconds.
	c.advance(3 * time.Second)
	if code, copies := post(tokenAcme1, batchOf(repeat(emailTo(10), 3)...)); code != 202 || copies != 30 {
		t.Errorf("the tenant's burst from a token refused twice: %d, %d copies published; want 202 and 30", code, copies)
	}
}
