package api

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relay-demo/relay/internal/store/storetest"
	"github.com/relay-demo/relay/webhooks"
)

// unknownEP is an endpoint id no test creates.
const unknownEP = "ep_zzzzzzzzzzzzzzzzzzzzzzzzzz"

// tenantEndpointServer is endpointServer with tenants acme and globex and
// an operator.
func tenantEndpointServer(t *testing.T, backend string) http.Handler {
	t.Helper()
	st := storetest.Open(t, backend)
	h, _, _ := testServer(t, func(d *Deps, _ *fakePublisher) {
		d.History, d.Endpoints = st, st
		d.EndpointRules = EndpointRules{Grace: 6 * time.Hour, Guard: webhooks.NewGuard([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}), Lookup: testResolver}
		d.TenantTokens = []TenantToken{{Tenant: "acme", Token: tokenAcme}, {Tenant: "globex", Token: tokenGlobex}}
		d.OperatorTokens = []string{tokenOperator}
	})
	return h
}

// as sends one request to h with token.
func as(h http.Handler, token, method, path, body string) *httptest.ResponseRecorder {
	return call(h, method, path, body, map[string]string{"Authorization": "Bearer " + token})
}

// createAs registers an endpoint with token and returns it.
func createAs(t *testing.T, h http.Handler, token, url string) endpointBody {
	t.Helper()
	rec := as(h, token, http.MethodPost, "/v1/endpoints", `{"url":"`+url+`","description":"orders"}`)
	if rec.Code != http.StatusCreated {
		t.Fatalf("POST /v1/endpoints = %d %s", rec.Code, rec.Body)
	}
	return decodeAs[endpointBody](t, rec)
}

// TestEndpointOfAnotherTenant: on every endpoint route, another tenant's
// endpoint is answered exactly as an unknown id is, and stays as it was;
// its own tenant and an operator reach it.
func TestEndpointOfAnotherTenant(t *testing.T) {
	for _, backend := range storetest.Backends() {
		t.Run(backend, func(t *testing.T) {
			h := tenantEndpointServer(t, backend)
			ep := createAs(t, h, tokenAcme, "https://hooks.example.com/acme")
			if rec := as(h, tokenAcme, http.MethodGet, "/v1/endpoints/"+ep.ID, ""); !strings.Contains(rec.Body.String(), `"tenant":"acme"`) {
				t.Errorf("acme's endpoint = %d %s, want it to say tenant acme", rec.Code, rec.Body)
			}

			routes := []struct{ method, path, body string }{
				{http.MethodGet, "/v1/endpoints/%s", ""},
				{http.MethodPatch, "/v1/endpoints/%s", `{"description":"taken over","enabled":false}`},
				{http.MethodPost, "/v1/endpoints/%s/rotate-secret", `{"grace_seconds":0}`},
				{http.MethodGet, "/v1/endpoints/%s/attempts", ""},
				{http.MethodDelete, "/v1/endpoints/%s", ""},
			}
			for _, rt := range routes {
				for _, token := range []string{tokenGlobex, tokenA} {
					name := rt.method + " " + rt.path
					theirs := as(h, token, rt.method, strings.Replace(rt.path, "%s", ep.ID, 1), rt.body)
					unknown := as(h, token, rt.method, strings.Replace(rt.path, "%s", unknownEP, 1), rt.body)
					if theirs.Code != http.StatusNotFound {
						t.Errorf("%s on another tenant's endpoint = %d %s, want 404", name, theirs.Code, theirs.Body)
					}
					if got, want := strings.ReplaceAll(theirs.Body.String(), ep.ID, unknownEP), unknown.Body.String(); theirs.Code != unknown.Code || got != want {
						t.Errorf("%s on another tenant's endpoint answers\n%d %s\nan unknown id\n%d %s", name, theirs.Code, got, unknown.Code, want)
					}
				}
			}

			// Nothing of the above changed it: its tenant reads it as it was.
			rec := as(h, tokenAcme, http.MethodGet, "/v1/endpoints/"+ep.ID, "")
			if got := decodeAs[endpointBody](t, rec); rec.Code != http.StatusOK || got.Description != "orders" || !got.Enabled || got.PreviousUntil != nil {
				t.Errorf("acme's endpoint after the others' requests = %d %s", rec.Code, rec.Body)
			}
			// An operator reaches every tenant's.
			if rec := as(h, tokenOperator, http.MethodGet, "/v1/endpoints/"+ep.ID, ""); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"tenant":"acme"`) {
				t.Errorf("operator's GET = %d %s", rec.Code, rec.Body)
			}
			if rec := as(h, tokenOperator, http.MethodPatch, "/v1/endpoints/"+ep.ID, `{"description":"by the operator"}`); rec.Code != http.StatusOK {
				t.Errorf("operator's PATCH = %d %s", rec.Code, rec.Body)
			}
			if rec := as(h, tokenAcme, http.MethodDelete, "/v1/endpoints/"+ep.ID, ""); rec.Code != http.StatusNoContent {
				t.Errorf("acme's DELETE of its own = %d %s", rec.Code, rec.Body)
			}
		})
	}
}

// TestEndpointListTenants: a tenant's list holds its own endpoints only;
// an operator's holds every tenant's, or with tenant= one tenant's.
func TestEndpointListTenants(t *testing.T) {
	h := tenantEndpointServer(t, storetest.SQLite)
	acme := createAs(t, h, tokenAcme, "https://hooks.example.com/acme")
	globex := createAs(t, h, tokenGlobex, "https://hooks.example.com/globex")
	def := createAs(t, h, tokenA, "https://hooks.example.com/default")
	// An operator's endpoint is the default tenant's.
	op := createAs(t, h, tokenOperator, "https://hooks.example.com/operator")

	type list struct {
		Endpoints []struct {
			ID     string  `json:"id"`
			Tenant *string `json:"tenant"`
		} `json:"endpoints"`
	}
	tests := []struct {
		name, token, query string
		want               []string
	}{
		{"acme", tokenAcme, "", []string{acme.ID}},
		{"acme naming itself", tokenAcme, "?tenant=acme", []string{acme.ID}},
		{"globex", tokenGlobex, "", []string{globex.ID}},
		{"default tenant", tokenA, "", []string{def.ID, op.ID}},
		{"operator", tokenOperator, "", []string{acme.ID, globex.ID, def.ID, op.ID}},
		{"operator, acme", tokenOperator, "?tenant=acme", []string{acme.ID}},
		{"operator, globex", tokenOperator, "?tenant=globex", []string{globex.ID}},
		{"operator, default", tokenOperator, "?tenant=default", []string{def.ID, op.ID}},
		{"operator, a tenant with none", tokenOperator, "?tenant=initech", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := as(h, tt.token, http.MethodGet, "/v1/endpoints"+tt.query, "")
			if rec.Code != http.StatusOK {
				t.Fatalf("GET = %d %s", rec.Code, rec.Body)
			}
			var got []string
			for _, e := range decodeAs[list](t, rec).Endpoints {
				got = append(got, e.ID)
				// The default tenant's endpoints carry no tenant at all.
				if (e.ID == def.ID || e.ID == op.ID) != (e.Tenant == nil) {
					t.Errorf("endpoint %s: tenant %v", e.ID, e.Tenant)
				}
			}
			slices.Sort(got)
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("ids %v, want %v", got, want)
			}
		})
	}

	refused := []struct {
		name, token, path, field string
	}{
		{"acme naming globex", tokenAcme, "/v1/endpoints?tenant=globex", "tenant"},
		{"acme naming the default tenant", tokenAcme, "/v1/endpoints?tenant=default", "tenant"},
		{"default tenant naming acme", tokenA, "/v1/endpoints?tenant=acme", "tenant"},
		{"a name no tenant may have", tokenOperator, "/v1/endpoints?tenant=Not%20A%20Name", "tenant"},
		{"tenant on the attempts", tokenOperator, "/v1/endpoints/" + acme.ID + "/attempts?tenant=acme", "tenant"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			rec := as(h, tt.token, http.MethodGet, tt.path, "")
			if rec.Code != http.StatusUnprocessableEntity {
				t.Fatalf("GET %s = %d %s, want 422", tt.path, rec.Code, rec.Body)
			}
			if p := decodeAs[problemBody](t, rec); len(p.Errors) != 1 || p.Errors[0].Field != tt.field {
				t.Errorf("errors = %+v, want one naming %s", p.Errors, tt.field)
			}
		})
	}
}

// TestNotificationNamesAnotherTenantsEndpoint: a notification may name
// only its own tenant's endpoints; another tenant's is refused exactly as
// an unknown id is, alone or in a batch.
func TestNotificationNamesAnotherTenantsEndpoint(t *testing.T) {
	h := tenantEndpointServer(t, storetest.SQLite)
	acme := createAs(t, h, tokenAcme, "https://hooks.example.com/acme")
	globex := createAs(t, h, tokenGlobex, "https://hooks.example.com/globex")
	part := func(id string) string { return `{"webhook":{"endpoint":"` + id + `","payload":{"n":1}}}` }
	batch := func(id string) string { return `{"notifications":[` + part(acme.ID) + `,` + part(id) + `]}` }

	for _, tc := range []struct {
		path string
		body func(id string) string
	}{{"/v1/notifications", part}, {"/v1/notifications/batch", batch}} {
		t.Run(tc.path, func(t *testing.T) {
			if rec := as(h, tokenAcme, http.MethodPost, tc.path, tc.body(acme.ID)); rec.Code != http.StatusAccepted {
				t.Fatalf("naming its own endpoint = %d %s, want 202", rec.Code, rec.Body)
			}
			theirs := as(h, tokenAcme, http.MethodPost, tc.path, tc.body(globex.ID))
			unknown := as(h, tokenAcme, http.MethodPost, tc.path, tc.body(unknownEP))
			if theirs.Code != http.StatusUnprocessableEntity {
				t.Errorf("naming another tenant's endpoint = %d %s, want 422", theirs.Code, theirs.Body)
			}
			if got, want := strings.ReplaceAll(theirs.Body.String(), globex.ID, unknownEP), unknown.Body.String(); theirs.Code != unknown.Code || got != want {
				t.Errorf("another tenant's endpoint answers\n%d %s\nan unknown id\n%d %s", theirs.Code, got, unknown.Code, want)
			}
			// The default tenant's tokens are a tenant like any other.
			if rec := as(h, tokenA, http.MethodPost, tc.path, tc.body(globex.ID)); rec.Code != http.StatusUnprocessableEntity {
				t.Errorf("the default tenant naming globex's endpoint = %d %s, want 422", rec.Code, rec.Body)
			}
		})
	}
}
