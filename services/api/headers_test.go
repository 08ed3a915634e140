package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/relay-demo/relay/internal/dashboard"
	"github.com/relay-demo/relay/internal/store/storetest"
)

// wantHeaders are the security headers every answer carries.
var wantHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
	"X-Content-Type-Options": "nosniff",
	"Referrer-Policy":        "no-referrer",
}

// TestSecurityHeadersOnEveryRoute asks every route of the API, every
// route of the dashboard, the page's files and a few errors, with and
// without a token, and wants the security headers on each answer.
func TestSecurityHeadersOnEveryRoute(t *testing.T) {
	store := storetest.Open(t, storetest.SQLite)
	hub := dashboard.NewHub()
	hub.Close() // event streams end as soon as they begin
	dash := dashboard.New(dashboard.Deps{Hub: hub, Authenticate: dashboardAccess(Deps{Tokens: []string{tokenA}}.credentials(), false)})
	h, _, _ := testServer(t, func(d *Deps, _ *fakePublisher) {
		d.Dashboard = dash
		d.History = store
		d.DeadLetters = func() DeadLetterStore { return &fakeStore{} }
	})

	type request struct{ method, path string }
	var reqs []request
	err := chi.Walk(h.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		reqs = append(reqs, request{method, strings.ReplaceAll(route, "{id}", "ntf_x")})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) < 10 {
		t.Fatalf("walked %d routes, want every route of routes.go: %v", len(reqs), reqs)
	}
	for _, path := range []string{"/", "/static/app.js", "/static/style.css", "/static/missing.js", "/dashboard/session",
		"/dashboard/events", "/dashboard/queues",
		"/nowhere", "/v1/nowhere"} {
		reqs = append(reqs, request{http.MethodGet, path})
	}
	reqs = append(reqs, request{http.MethodDelete, "/healthz"}, request{http.MethodPut, "/v1/notifications"})

	for _, r := range reqs {
		for _, auth := range []string{"", "Bearer " + tokenA, "Bearer wrong-token-0123456789"} {
			t.Run(r.method+" "+r.path+" "+auth, func(t *testing.T) {
				req := httptest.NewRequest(r.method, r.path, strings.NewReader("{}"))
				req.Header.Set("Content-Type", "application/json")
				if auth != "" {
					req.Header.Set("Authorization", auth)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				for k, want := range wantHeaders {
					if got := rec.Header().Get(k); got != want {
						t.Errorf("%s %s (%d): %s = %q, want %q", r.method, r.path, rec.Code, k, got, want)
					}
				}
			})
		}
	}

	t.Run("a panic", func(t *testing.T) {
		h, _, _ := testServer(t, func(d *Deps, _ *fakePublisher) {
			d.Dashboard = routesFunc(func(r chi.Router) {
				r.Get("/", func(http.ResponseWriter, *http.Request) { panic("dashboard exploded") })
			})
		})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		if rec.Code != http.StatusInternalServerError {
			t.Fatalf("status %d, want 500", rec.Code)
		}
		for k, want := range wantHeaders {
			if got := rec.Header().Get(k); got != want {
				t.Errorf("%s = %q, want %q", k, got, want)
			}
		}
	})
}

// The tokens of a named tenant and of an operator that TestDashboardAccess
// gives the API.
const (
	acmeDashToken     = "acme-dashboard-token-0123456789"
	operatorDashToken = "operator-dashboard-token-0123456789"
)

func TestDashboardAccess(t *testing.T) {
	tests := []struct {
		name          string
		authOff       bool
		authorization string
		want          dashboard.Viewer
	}{
		{"no header", false, "", dashboard.Viewer{Access: dashboard.Anonymous}},
		{"a token of the API", false, "Bearer " + tokenB, dashboard.Viewer{Access: dashboard.Authenticated}},
		{"lower-case scheme", false, "bearer " + tokenA, dashboard.Viewer{Access: dashboard.Authenticated}},
		{"a named tenant's token", false, "Bearer " + acmeDashToken, dashboard.Viewer{Access: dashboard.Authenticated, Tenant: "acme"}},
		{"an operator's token", false, "Bearer " + operatorDashToken, dashboard.Viewer{Access: dashboard.Authenticated, Operator: true}},
		{"another token", false, "Bearer " + tokenA + "x", dashboard.Viewer{Access: dashboard.Refused}},
		{"not a bearer token", false, "Basic " + tokenA, dashboard.Viewer{Access: dashboard.Refused}},
		{"an empty bearer token", false, "Bearer ", dashboard.Viewer{Access: dashboard.Refused}},
		{"authentication off, no header", true, "", dashboard.Viewer{Access: dashboard.Authenticated, Operator: true}},
		{"authentication off, any token", true, "Bearer nope", dashboard.Viewer{Access: dashboard.Authenticated, Operator: true}},
	}
	deps := Deps{Tokens: []string{tokenA, tokenB}, TenantTokens: []TenantToken{{Tenant: "acme", Token: acmeDashToken}},
		OperatorTokens: []string{operatorDashToken}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/dashboard/session", nil)
			if tt.authorization != "" {
				req.Header.Set("Authorization", tt.authorization)
			}
			if got := dashboardAccess(deps.credentials(), tt.authOff)(req); got != tt.want {
				t.Errorf("viewer = %+v, want %+v", got, tt.want)
			}
		})
	}
}
