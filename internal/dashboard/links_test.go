package dashboard

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestLinks(t *testing.T) {
	now := time.Date(2026, 5, 3, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	const token = "dashboard-token-0123456789"

	t.Run("a code is redeemed once", func(t *testing.T) {
		l := NewLinks(time.Minute, clock)
		code, expires, err := l.Issue(token)
		if err != nil {
			t.Fatal(err)
		}
		if !expires.Equal(now.Add(time.Minute)) {
			t.Errorf("expires %s, want %s", expires, now.Add(time.Minute))
		}
		if len(code) < 40 || strings.Contains(code, token) {
			t.Errorf("code %q: want 256 random bits, nothing of the token", code)
		}
		if got, ok := l.Redeem(code); !ok || got != token {
			t.Fatalf("Redeem = %q, %v; want the token", got, ok)
		}
		if got, ok := l.Redeem(code); ok || got != "" {
			t.Errorf("second Redeem = %q, %v; want nothing: a code is good once", got, ok)
		}
	})
	t.Run("an expired code is refused, and gone", func(t *testing.T) {
		at := now
		l := NewLinks(time.Minute, func() time.Time { return at })
		code, _, _ := l.Issue(token)
		at = now.Add(time.Minute)
		if got, ok := l.Redeem(code); ok || got != "" {
			t.Errorf("Redeem at its expiry = %q, %v; want nothing", got, ok)
		}
		at = now
		if _, ok := l.Redeem(code); ok {
			t.Errorf("an expired code was redeemed after it was refused")
		}
	})
	t.Run("a wrong code is refused and spends no other", func(t *testing.T) {
		l := NewLinks(time.Minute, clock)
		code, _, _ := l.Issue(token)
		for _, wrong := range []string{"", "x", code[:len(code)-1], code + "x", strings.ToUpper(code)} {
			if _, ok := l.Redeem(wrong); ok {
				t.Errorf("Redeem(%q) took a wrong code", wrong)
			}
		}
		if _, ok := l.Redeem(code); !ok {
			t.Errorf("the right code was refused after wrong ones")
		}
	})
	t.Run("codes waiting are bounded; expired ones make room", func(t *testing.T) {
		at := now
		l := NewLinks(time.Minute, func() time.Time { return at })
		for range maxLinks {
			if _, _, err := l.Issue(token); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := l.Issue(token); err != ErrTooManyLinks {
			t.Fatalf("Issue past the bound: %v, want ErrTooManyLinks", err)
		}
		at = now.Add(time.Minute)
		if _, _, err := l.Issue(token); err != nil {
			t.Errorf("Issue once the others expired: %v", err)
		}
	})
}

func TestLinkPath(t *testing.T) {
	tests := []struct{ id, code, want string }{
		{"", "", "/"},
		{"ntf_abc", "", "/#/n/ntf_abc"},
		{"", "c0de-_x", "/#?code=c0de-_x"},
		{"ntf_abc", "c0de", "/#/n/ntf_abc?code=c0de"},
		{"a/b?c#d", "", "/#/n/a%2Fb%3Fc%23d"},
	}
	for _, tt := range tests {
		if got := LinkPath(tt.id, tt.code); got != tt.want {
			t.Errorf("LinkPath(%q, %q) = %q, want %q", tt.id, tt.code, got, tt.want)
		}
	}
}

// TestRedeemRoute: POST /dashboard/link answers a code's token once, in
// the body, never to be cached; anything else is a problem.
func TestRedeemRoute(t *testing.T) {
	links := NewLinks(time.Minute, nil)
	d := New(Deps{Links: links})
	code, _, _ := links.Issue("tok-0123456789")
	post := func(body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		d.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/dashboard/link", strings.NewReader(body)))
		return rec
	}
	rec := post(`{"code":"` + code + `"}`)
	if rec.Code != http.StatusOK || strings.TrimSpace(rec.Body.String()) != `{"token":"tok-0123456789"}` || rec.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("redeem = %d %q (Cache-Control %q)", rec.Code, rec.Body, rec.Header().Get("Cache-Control"))
	}
	for _, tt := range []struct {
		body string
		want int
	}{
		{`{"code":"` + code + `"}`, http.StatusUnauthorized}, // used
		{`{"code":"nope"}`, http.StatusUnauthorized},
		{`{}`, http.StatusBadRequest},
		{`not json`, http.StatusBadRequest},
	} {
		if rec := post(tt.body); rec.Code != tt.want || strings.Contains(rec.Body.String(), "tok-") {
			t.Errorf("POST %s = %d %s, want %d and no token", tt.body, rec.Code, rec.Body, tt.want)
		}
	}
	rec = httptest.NewRecorder()
	New(Deps{}).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/dashboard/link", strings.NewReader(`{"code":"x"}`)))
	if rec.Code != http.StatusNotFound {
		t.Errorf("without Links: %d, want 404", rec.Code)
	}
}
