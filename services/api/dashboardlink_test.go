package api

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/relay-demo/relay/internal/dashboard"
)

// TestDashboardLink: relay dashboard's one-time link, from the API that
// issues it to the page that redeems it. The code logs in once, within
// its TTL, as the token that asked for it; the token is in no URL and the
// code in no log line.
func TestDashboardLink(t *testing.T) {
	at := now
	links := dashboard.NewLinks(2*time.Minute, func() time.Time { return at })
	h, _, logs := testServer(t, func(d *Deps, _ *fakePublisher) {
		d.Dashboard = dashboard.New(dashboard.Deps{Links: links, Authenticate: dashboardAccess(d.credentials(), false)})
		d.DashboardLinks = links
	})
	issue := func(body string) (dashboardLink, string) {
		t.Helper()
		rec := call(h, http.MethodPost, "/v1/dashboard/links", body, nil)
		if rec.Code != http.StatusCreated {
			t.Fatalf("POST /v1/dashboard/links = %d %s", rec.Code, rec.Body)
		}
		var l dashboardLink
		if err := json.Unmarshal(rec.Body.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(l.Path)
		if err != nil {
			t.Fatal(err)
		}
		_, query, _ := strings.Cut(u.Fragment, "?")
		q, _ := url.ParseQuery(query)
		return l, q.Get("code")
	}
	redeem := func(code string) (int, string) {
		t.Helper()
		rec := call(h, http.MethodPost, "/dashboard/link", `{"code":"`+code+`"}`, map[string]string{"Authorization": ""})
		var body struct{ Token string }
		json.Unmarshal(rec.Body.Bytes(), &body)
		return rec.Code, body.Token
	}

	l, code := issue(`{"id":"ntf_abc"}`)
	if !strings.HasPrefix(l.Path, "/#/n/ntf_abc?code=") || code == "" {
		t.Errorf("path %q, want the detail of ntf_abc and a code in the fragment", l.Path)
	}
	if strings.Contains(l.Path, tokenA) {
		t.Errorf("the link %q holds the token", l.Path)
	}
	if l.ExpiresAt == nil || !l.ExpiresAt.Equal(now.Add(2*time.Minute)) {
		t.Errorf("expires_at %v, want %s", l.ExpiresAt, now.Add(2*time.Minute))
	}
	if status, token := redeem(code); status != http.StatusOK || token != tokenA {
		t.Fatalf("redeem = %d %q, want 200 and the token that asked for the link", status, token)
	}
	if status, token := redeem(code); status != http.StatusUnauthorized || token != "" {
		t.Errorf("redeem again = %d %q, want 401: a code is good once", status, token)
	}
	if status, _ := redeem("not-a-code"); status != http.StatusUnauthorized {
		t.Errorf("redeem a wrong code = %d, want 401", status)
	}
	_, late := issue("")
	at = now.Add(2 * time.Minute)
	if status, token := redeem(late); status != http.StatusUnauthorized || token != "" {
		t.Errorf("redeem at expiry = %d %q, want 401", status, token)
	}
	if strings.Contains(logs.String(), code) || strings.Contains(logs.String(), late) || strings.Contains(logs.String(), tokenA) {
		t.Errorf("the log holds a code or the token:\n%s", logs)
	}

	if rec := call(h, http.MethodPost, "/v1/dashboard/links", "", map[string]string{"Authorization": ""}); rec.Code != http.StatusUnauthorized {
		t.Errorf("a link without a token = %d, want 401", rec.Code)
	}
	if rec := call(h, http.MethodPost, "/v1/dashboard/links", `{"id":"`+strings.Repeat("x", maxLinkID+1)+`"}`, nil); rec.Code != http.StatusBadRequest {
		t.Errorf("a link to a too long id = %d, want 400", rec.Code)
	}
	if rec := call(h, http.MethodPost, "/v1/dashboard/links", `{"notification":"ntf_abc"}`, nil); rec.Code != http.StatusBadRequest {
		t.Errorf("a link with an unknown field = %d, want 400", rec.Code)
	}
}

// TestDashboardLinkAuthOff: without authentication the page needs no
// token, and the link carries no code.
func TestDashboardLinkAuthOff(t *testing.T) {
	h, _, _ := testServer(t, func(d *Deps, _ *fakePublisher) {
		d.AuthOff, d.Tokens = true, nil
		d.DashboardLinks = dashboard.NewLinks(0, nil)
	})
	rec := call(h, http.MethodPost, "/v1/dashboard/links", `{"id":"ntf_abc"}`, map[string]string{"Authorization": ""})
	if rec.Code != http.StatusCreated || strings.TrimSpace(rec.Body.String()) != `{"path":"/#/n/ntf_abc"}` {
		t.Errorf("POST /v1/dashboard/links = %d %s, want the detail's path with no code", rec.Code, rec.Body)
	}
}
