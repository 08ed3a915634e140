package api

import (
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

// tenantDeadLetterServer is the API over a fakeStore holding a parked
// copy of each tenant: d (the default tenant's, no x-tenant), a (acme's)
// and g (globex's), and both of acme's email copies of s.
func tenantDeadLetterServer(store *fakeStore) *httptest.Server {
	tenant := func(name string) amqp.Table { return amqp.Table{notification.HeaderTenant: name} }
	store.parked = []retry.DeadLetter{
		{ID: "d", Source: "p.email-queue", Reason: retry.ReasonMaxRetries},
		{ID: "a", Source: "p.webhook-queue", Reason: retry.ReasonPermanent, Headers: tenant("acme")},
		{ID: "g", Source: "p.email-queue", Reason: retry.ReasonPermanent, Headers: amqp.Table{notification.HeaderTenant: []byte("globex")}},
		{ID: "s", Copy: "ada@example.com", Source: "p.email-queue", Reason: retry.ReasonPermanent, Headers: tenant("acme")},
		{ID: "s", Copy: "bob@example.com", Source: "p.email-queue", Reason: retry.ReasonPermanent, Headers: tenant("acme")},
	}
	srv := httptest.NewServer(NewServer(Deps{Tokens: []string{deadLetterToken}, Topology: deadLetterTopology,
		TenantTokens:   []TenantToken{{Tenant: "acme", Token: tokenAcme}, {Tenant: "globex", Token: tokenGlobex}},
		OperatorTokens: []string{tokenOperator},
		DeadLetters:    func() DeadLetterStore { return store }}))
	return srv
}

// TestDeadLettersAreTheirTenants runs each dead-letter route with each
// kind of token: a tenant's sees, replays and purges its own parked
// copies only, and another tenant's id is as unknown.
func TestDeadLettersAreTheirTenants(t *testing.T) {
	tests := []struct {
		name       string
		token      string
		method     string
		path       string
		body       string
		wantStatus int
		wantBody   string   // in the answer
		wantIDs    []string // of a listing, in order
		wantTenant []string // of a listing, in order
	}{
		{name: "the default tenant lists its own", token: deadLetterToken, method: "GET", path: "/v1/dead-letters",
			wantStatus: 200, wantIDs: []string{"d"}, wantTenant: []string{""}},
		{name: "a tenant lists its own", token: tokenAcme, method: "GET", path: "/v1/dead-letters",
			wantStatus: 200, wantIDs: []string{"a", "s", "s"}, wantTenant: []string{"acme", "acme", "acme"}},
		{name: "a tenant's header as bytes", token: tokenGlobex, method: "GET", path: "/v1/dead-letters",
			wantStatus: 200, wantIDs: []string{"g"}, wantTenant: []string{"globex"}},
		{name: "a tenant may name itself", token: tokenAcme, method: "GET", path: "/v1/dead-letters?tenant=acme",
			wantStatus: 200, wantIDs: []string{"a", "s", "s"}, wantTenant: []string{"acme", "acme", "acme"}},
		{name: "a tenant may not name another", token: tokenAcme, method: "GET", path: "/v1/dead-letters?tenant=globex",
			wantStatus: 422, wantBody: `{"field":"tenant","message":"only an operator's token may choose a tenant"}`},
		{name: "nor the default tenant", token: tokenAcme, method: "GET", path: "/v1/dead-letters?tenant=default",
			wantStatus: 422, wantBody: `only an operator's token may choose a tenant`},
		{name: "a tenant's filter stays in its tenant", token: tokenAcme, method: "GET", path: "/v1/dead-letters?source=email-queue",
			wantStatus: 200, wantIDs: []string{"s", "s"}, wantTenant: []string{"acme", "acme"}},
		{name: "an operator lists every tenant", token: tokenOperator, method: "GET", path: "/v1/dead-letters",
			wantStatus: 200, wantIDs: []string{"d", "a", "g", "s", "s"}, wantTenant: []string{"", "acme", "globex", "acme", "acme"}},
		{name: "an operator selects a tenant", token: tokenOperator, method: "GET", path: "/v1/dead-letters?tenant=globex",
			wantStatus: 200, wantIDs: []string{"g"}, wantTenant: []string{"globex"}},
		{name: "an operator selects the default tenant", token: tokenOperator, method: "GET", path: "/v1/dead-letters?tenant=default",
			wantStatus: 200, wantIDs: []string{"d"}, wantTenant: []string{""}},
		{name: "a tenant's name it cannot have", token: tokenOperator, method: "GET", path: "/v1/dead-letters?tenant=Acme!",
			wantStatus: 422, wantBody: `{"field":"tenant","message":"a tenant's name: 1 to 63 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit, or default"}`},

		{name: "a tenant reads its own", token: tokenAcme, method: "GET", path: "/v1/dead-letters/a", wantStatus: 200, wantBody: `"tenant":"acme"`},
		{name: "another tenant's id is unknown", token: tokenGlobex, method: "GET", path: "/v1/dead-letters/a",
			wantStatus: 404, wantBody: `"detail":"message \"a\": not in the dead-letter queue"`},
		{name: "the default tenant's id is unknown to a tenant", token: tokenAcme, method: "GET", path: "/v1/dead-letters/d",
			wantStatus: 404, wantBody: `"detail":"message \"d\": not in the dead-letter queue"`},
		{name: "a tenant's id is unknown to the default tenant", token: deadLetterToken, method: "GET", path: "/v1/dead-letters/a",
			wantStatus: 404, wantBody: `"detail":"message \"a\": not in the dead-letter queue"`},
		{name: "an operator reads any", token: tokenOperator, method: "GET", path: "/v1/dead-letters/g", wantStatus: 200, wantBody: `"tenant":"globex"`},
		{name: "another tenant's id: no replay", token: tokenGlobex, method: "POST", path: "/v1/dead-letters/a/replay",
			wantStatus: 404, wantBody: `"detail":"message \"a\": not in the dead-letter queue"`},
		{name: "another tenant's id: no delete", token: tokenGlobex, method: "DELETE", path: "/v1/dead-letters/s?recipient=ada@example.com",
			wantStatus: 404, wantBody: `"detail":"message \"s\" for \"ada@example.com\": not in the dead-letter queue"`},
		{name: "a tenant deletes its own", token: tokenAcme, method: "DELETE", path: "/v1/dead-letters/s", wantStatus: 200, wantBody: `{"purged":2}`},

		{name: "a tenant's purge of all is its own", token: tokenAcme, method: "POST", path: "/v1/dead-letters/purge", body: `{"all":true,"confirm":true}`,
			wantStatus: 200, wantBody: `{"purged":3}`},
		{name: "the default tenant's purge of all is its own", token: deadLetterToken, method: "POST", path: "/v1/dead-letters/purge", body: `{"all":true,"confirm":true}`,
			wantStatus: 200, wantBody: `{"purged":1}`},
		{name: "a tenant's replay of all is its own", token: tokenGlobex, method: "POST", path: "/v1/dead-letters/replay", body: `{"all":true}`,
			wantStatus: 200, wantBody: `{"replayed":1}`},
		{name: "a tenant's replay by id of another's", token: tokenGlobex, method: "POST", path: "/v1/dead-letters/replay", body: `{"id":"a"}`,
			wantStatus: 404, wantBody: `"detail":"message \"a\": not in the dead-letter queue"`},
		{name: "a tenant's dry run counts its own", token: tokenAcme, method: "POST", path: "/v1/dead-letters/purge", body: `{"reason":"permanent","dry_run":true}`,
			wantStatus: 200, wantBody: `{"dry_run":true,"matched":3}`},
		{name: "a tenant's purge may not name another", token: tokenAcme, method: "POST", path: "/v1/dead-letters/purge", body: `{"tenant":"globex","confirm":true}`,
			wantStatus: 422, wantBody: `{"field":"tenant","message":"only an operator's token may choose a tenant"}`},
		{name: "an operator's purge of all is every tenant's", token: tokenOperator, method: "POST", path: "/v1/dead-letters/purge", body: `{"all":true,"dry_run":true}`,
			wantStatus: 200, wantBody: `{"dry_run":true,"matched":5}`},
		{name: "an operator purges one tenant's", token: tokenOperator, method: "POST", path: "/v1/dead-letters/purge", body: `{"tenant":"acme","confirm":true}`,
			wantStatus: 200, wantBody: `{"purged":3}`},
		{name: "an operator replays the default tenant's", token: tokenOperator, method: "POST", path: "/v1/dead-letters/replay", body: `{"tenant":"default","reason":"max-retries"}`,
			wantStatus: 200, wantBody: `{"replayed":1}`},
		{name: "all and a tenant", token: tokenOperator, method: "POST", path: "/v1/dead-letters/purge", body: `{"all":true,"tenant":"acme","confirm":true}`,
			wantStatus: 422, wantBody: `"field":"all"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := &fakeStore{}
			srv := tenantDeadLetterServer(store)
			defer srv.Close()
			req := httptest.NewRequest(tt.method, tt.path, strings.NewReader(tt.body))
			req.Header.Set("Authorization", "Bearer "+tt.token)
			rec := httptest.NewRecorder()
			srv.Config.Handler.ServeHTTP(rec, req)
			if rec.Code != tt.wantStatus || !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Fatalf("%s %s = %d %s, want %d containing %q", tt.method, tt.path, rec.Code, rec.Body, tt.wantStatus, tt.wantBody)
			}
			if tt.wantIDs == nil {
				return
			}
			var answer struct {
				DeadLetters []map[string]any `json:"dead_letters"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil {
				t.Fatal(err)
			}
			var ids, tenants []string
			for _, d := range answer.DeadLetters {
				ids = append(ids, d["id"].(string))
				tenant, shown := d["tenant"].(string)
				if shown && tenant == "" {
					t.Errorf("%s shows an empty tenant: the default tenant's is left out", d["id"])
				}
				tenants = append(tenants, tenant)
			}
			if diff := cmp.Diff(tt.wantIDs, ids); diff != "" {
				t.Errorf("listed ids (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantTenant, tenants); diff != "" {
				t.Errorf("listed tenants (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTenantPurgeSelects checks the filter a purge of all hands the
// store: a tenant's (the default tenant's too) names the tenant, so it
// selects rather than empties the queue; only an operator's names none.
func TestTenantPurgeSelects(t *testing.T) {
	tests := []struct {
		name       string
		token      string
		wantHeader map[string]string
	}{
		{"a tenant", tokenAcme, map[string]string{notification.HeaderTenant: "acme"}},
		{"the default tenant", deadLetterToken, map[string]string{notification.HeaderTenant: ""}},
		{"an operator", tokenOperator, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := &fakeStore{}
			srv := tenantDeadLetterServer(store)
			defer srv.Close()
			req := httptest.NewRequest("POST", "/v1/dead-letters/purge", strings.NewReader(`{"all":true,"confirm":true}`))
			req.Header.Set("Authorization", "Bearer "+tt.token)
			rec := httptest.NewRecorder()
			srv.Config.Handler.ServeHTTP(rec, req)
			if rec.Code != 200 || len(store.filters) != 1 {
				t.Fatalf("purge = %d %s, %d store calls", rec.Code, rec.Body, len(store.filters))
			}
			if diff := cmp.Diff(tt.wantHeader, store.filters[0].Headers); diff != "" {
				t.Errorf("the purge's header selection (-want +got):\n%s", diff)
			}
			left := slices.DeleteFunc(slices.Clone(store.parked), func(p retry.DeadLetter) bool { return store.filters[0].Match(deadLetterTopology, p) })
			if tt.wantHeader != nil && len(left) == 0 {
				t.Errorf("a tenant's purge of all would empty the queue")
			}
		})
	}
}
