package api

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store/storetest"
)

const (
	tokenAcme     = "acme-token-0123456789"
	tokenGlobex   = "globex-token-0123456789"
	tokenOperator = "operator-token-0123456789"
)

// tenantServer is the API with a history holding one notification of
// each tenant: ntf_default (API_TOKENS'), ntf_acme and ntf_globex.
func tenantServer(t *testing.T) (http.Handler, *fakePublisher) {
	t.Helper()
	st := storetest.Open(t, storetest.SQLite)
	at := now.Add(-time.Minute)
	var accepted []notification.Accepted
	for _, tenant := range []string{"", "acme", "globex"} {
		id := "ntf_" + tenant
		if tenant == "" {
			id = "ntf_default"
		}
		accepted = append(accepted, notification.Accepted{ID: id, Tenant: tenant, CreatedAt: at, DueAt: now.Add(time.Hour),
			Channels: []string{"webhook"}, Recipients: []string{"https://hooks.example/" + id}})
	}
	if err := st.Accept(context.Background(), accepted); err != nil {
		t.Fatal(err)
	}
	h, fake, _ := testServer(t, func(d *Deps, _ *fakePublisher) {
		d.History = st
		d.TenantTokens = []TenantToken{{Tenant: "acme", Token: tokenAcme}, {Tenant: "globex", Token: tokenGlobex}}
		d.OperatorTokens = []string{tokenOperator}
	})
	return h, fake
}

// listed are the ids GET path answers with token.
func listed(t *testing.T, h http.Handler, token, path string) []string {
	t.Helper()
	rec := call(h, http.MethodGet, path, "", map[string]string{"Authorization": "Bearer " + token})
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s = %d %s", path, rec.Code, rec.Body)
	}
	var page struct {
		Notifications []struct {
			ID     string `json:"id"`
			Tenant string `json:"tenant"`
		} `json:"notifications"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, n := range page.Notifications {
		if want := strings.TrimPrefix(n.ID, "ntf_"); n.Tenant != want && !(want == "default" && n.Tenant == "") {
			t.Errorf("GET %s: %s has tenant %q", path, n.ID, n.Tenant)
		}
		ids = append(ids, n.ID)
	}
	slices.Sort(ids)
	return ids
}

func TestTenantsSeeTheirOwnNotifications(t *testing.T) {
	h, _ := tenantServer(t)
	for _, tt := range []struct {
		token, path string
		want        []string
	}{
		{tokenA, "/v1/notifications", []string{"ntf_default"}},
		{tokenAcme, "/v1/notifications", []string{"ntf_acme"}},
		{tokenGlobex, "/v1/notifications", []string{"ntf_globex"}},
		{tokenAcme, "/v1/notifications?tenant=acme", []string{"ntf_acme"}},
		{tokenA, "/v1/notifications?tenant=default", []string{"ntf_default"}},
		{tokenOperator, "/v1/notifications", []string{"ntf_acme", "ntf_default", "ntf_globex"}},
		{tokenOperator, "/v1/notifications?tenant=globex", []string{"ntf_globex"}},
		{tokenOperator, "/v1/notifications?tenant=default", []string{"ntf_default"}},
		{tokenOperator, "/v1/notifications?tenant=nobody", nil},
	} {
		if got := listed(t, h, tt.token, tt.path); !slices.Equal(got, tt.want) {
			t.Errorf("%s GET %s = %q, want %q", tt.token[:4], tt.path, got, tt.want)
		}
	}

	// Naming another tenant is refused, and says nothing about it.
	for _, path := range []string{"/v1/notifications?tenant=globex", "/v1/notifications?tenant=default", "/v1/notifications?tenant=nobody"} {
		rec := call(h, http.MethodGet, path, "", map[string]string{"Authorization": "Bearer " + tokenAcme})
		if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(rec.Body.String(), `"field":"tenant"`) {
			t.Errorf("acme GET %s = %d %s, want 422 naming tenant", path, rec.Code, rec.Body)
		}
	}
	rec := call(h, http.MethodGet, "/v1/notifications?tenant=Not%20A%20Name", "", map[string]string{"Authorization": "Bearer " + tokenOperator})
	if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(rec.Body.String(), `"field":"tenant"`) {
		t.Errorf("operator GET with a bad tenant = %d %s, want 422 naming tenant", rec.Code, rec.Body)
	}

	// Another tenant's notification is answered as one that does not exist.
	unknown := call(h, http.MethodGet, "/v1/notifications/ntf_nope", "", map[string]string{"Authorization": "Bearer " + tokenAcme})
	for _, tt := range []struct {
		token, id string
		visible   bool
	}{
		{tokenAcme, "ntf_acme", true}, {tokenAcme, "ntf_globex", false}, {tokenAcme, "ntf_default", false},
		{tokenA, "ntf_default", true}, {tokenA, "ntf_acme", false},
		{tokenOperator, "ntf_acme", true}, {tokenOperator, "ntf_globex", true}, {tokenOperator, "ntf_default", true},
	} {
		auth := map[string]string{"Authorization": "Bearer " + tt.token}
		got := call(h, http.MethodGet, "/v1/notifications/"+tt.id, "", auth)
		if tt.visible {
			if got.Code != http.StatusOK || !strings.Contains(got.Body.String(), `"id":"`+tt.id+`"`) {
				t.Errorf("%s GET %s = %d %s, want 200", tt.token[:4], tt.id, got.Code, got.Body)
			}
			continue
		}
		if got.Code != http.StatusNotFound || strings.ReplaceAll(got.Body.String(), tt.id, "ntf_nope") != unknown.Body.String() {
			t.Errorf("%s GET %s = %d %s, want the answer of an unknown id: %s", tt.token[:4], tt.id, got.Code, got.Body, unknown.Body)
		}
		cancel := call(h, http.MethodDelete, "/v1/notifications/"+tt.id, "", auth)
		if cancel.Code != http.StatusNotFound {
			t.Errorf("%s DELETE %s = %d %s, want 404", tt.token[:4], tt.id, cancel.Code, cancel.Body)
		}
	}
	// Nothing was cancelled by the refused cancels; the owner's goes.
	for _, id := range []string{"ntf_acme", "ntf_globex", "ntf_default"} {
		rec := call(h, http.MethodGet, "/v1/notifications/"+id, "", map[string]string{"Authorization": "Bearer " + tokenOperator})
		if strings.Contains(rec.Body.String(), `"cancelled"`) {
			t.Errorf("%s was cancelled by another tenant: %s", id, rec.Body)
		}
	}
	if rec := call(h, http.MethodDelete, "/v1/notifications/ntf_acme", "", map[string]string{"Authorization": "Bearer " + tokenAcme}); rec.Code != http.StatusOK {
		t.Errorf("acme DELETE its own = %d %s, want 200", rec.Code, rec.Body)
	}
}

func TestTenantOfWhatIsPosted(t *testing.T) {
	h, fake := tenantServer(t)
	body := `{"email":{"to":["ada@example.com","bob@example.com"],"subject":"Hi","text":"hello"},` + webhookPart + `}`
	for _, tt := range []struct {
		token, tenant string
	}{{tokenAcme, "acme"}, {tokenA, ""}, {tokenOperator, ""}} {
		fake.mu.Lock()
		fake.sent = nil
		fake.mu.Unlock()
		rec := call(h, http.MethodPost, "/v1/notifications", body, map[string]string{"Authorization": "Bearer " + tt.token})
		if rec.Code != http.StatusAccepted {
			t.Fatalf("POST = %d %s", rec.Code, rec.Body)
		}
		msgs := fake.messages()
		if len(msgs) != 3 {
			t.Fatalf("%d copies published, want 3", len(msgs))
		}
		for _, m := range msgs {
			got, has := m.Msg.Headers[notification.HeaderTenant]
			if tt.tenant == "" && has || tt.tenant != "" && got != tt.tenant {
				t.Errorf("%s copy of a notification of tenant %q has %s %v (set %t)", m.Key, tt.tenant, notification.HeaderTenant, got, has)
			}
		}
		if recs := fake.records(); len(recs) != 1 || recs[0].Tenant != tt.tenant {
			t.Errorf("accepted records %+v, want one of tenant %q", recs, tt.tenant)
		}

		fake.mu.Lock()
		fake.sent = nil
		fake.mu.Unlock()
		batch := `{"notifications":[{` + webhookPart + `},{` + emailPart + `}]}`
		rec = call(h, http.MethodPost, "/v1/notifications/batch", batch, map[string]string{"Authorization": "Bearer " + tt.token})
		if rec.Code != http.StatusAccepted && rec.Code != http.StatusMultiStatus {
			t.Fatalf("POST batch = %d %s", rec.Code, rec.Body)
		}
		recs := fake.records()
		if len(recs) != 2 {
			t.Fatalf("batch: %d accepted records, want 2", len(recs))
		}
		for _, r := range recs {
			if r.Tenant != tt.tenant {
				t.Errorf("batch record of tenant %q, want %q", r.Tenant, tt.tenant)
			}
		}
	}
}

func TestTenantTokensConfig(t *testing.T) {
	base := map[string]string{"API_TOKENS": tokenA}
	for _, tt := range []struct {
		name string
		env  map[string]string
		want string // "" for valid
	}{
		{"tenants", map[string]string{"API_TENANT_TOKENS": "acme:" + tokenAcme + ", globex:" + tokenGlobex, "API_OPERATOR_TOKENS": tokenOperator}, ""},
		{"only tenants", map[string]string{"API_TOKENS": "", "API_TENANT_TOKENS": "acme:" + tokenAcme}, ""},
		{"a token holding a colon", map[string]string{"API_TENANT_TOKENS": "acme:abc:defghijklmnopqrstu"}, ""},
		{"no colon", map[string]string{"API_TENANT_TOKENS": tokenAcme}, "pair 1 of 1 is not TENANT:TOKEN"},
		{"no token", map[string]string{"API_TENANT_TOKENS": "acme:"}, "pair 1 of 1 is not TENANT:TOKEN"},
		{"bad name", map[string]string{"API_TENANT_TOKENS": "Acme Corp:" + tokenAcme}, `names tenant "Acme Corp", want 1 to 63`},
		{"default", map[string]string{"API_TENANT_TOKENS": "default:" + tokenAcme}, `"default", which is API_TOKENS' tenant`},
		{"short", map[string]string{"API_TENANT_TOKENS": "acme:short"}, "API_TENANT_TOKENS is not valid: token 1 of 1 has 5 characters"},
		{"short operator", map[string]string{"API_OPERATOR_TOKENS": "short"}, "API_OPERATOR_TOKENS is not valid: token 1 of 1 has 5 characters"},
		{"one token twice", map[string]string{"API_TENANT_TOKENS": "acme:" + tokenA}, "token 1 of API_TENANT_TOKENS is token 1 of API_TOKENS again"},
		{"two tenants, one token", map[string]string{"API_TENANT_TOKENS": "acme:" + tokenAcme + ",globex:" + tokenAcme}, "token 2 of API_TENANT_TOKENS is token 1 of API_TENANT_TOKENS again"},
		{"tenants without auth", map[string]string{"API_AUTH": "off", "API_TENANT_TOKENS": "acme:" + tokenAcme}, "while API_AUTH is off"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tt.env {
				env[k] = v
			}
			cfg, err := LoadConfig(func(k string) string { return env[k] })
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("LoadConfig: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("LoadConfig error = %v, want one saying %q", err, tt.want)
			case err != nil:
				for _, tok := range []string{tokenA, tokenAcme, "short"} {
					if strings.Contains(err.Error(), tok) {
						t.Errorf("the error quotes a token: %v", err)
					}
				}
			}
			if tt.name == "tenants" && !slices.Equal(cfg.TenantTokens, []TenantToken{{"acme", tokenAcme}, {"globex", tokenGlobex}}) {
				t.Errorf("TenantTokens = %+v", cfg.TenantTokens)
			}
		})
	}
}

func TestMatcher(t *testing.T) {
	match := matcher(Deps{Tokens: []string{tokenA}, TenantTokens: []TenantToken{{"acme", tokenAcme}}, OperatorTokens: []string{tokenOperator}}.credentials())
	for _, tt := range []struct {
		token    string
		ok       bool
		tenant   string
		operator bool
	}{
		{tokenA, true, "", false}, {tokenAcme, true, "acme", false}, {tokenOperator, true, "", true},
		{"nobody-token-0123456789", false, "", false}, {"", false, "", false},
	} {
		p, ok := match(tt.token)
		if ok != tt.ok || p.tenant != tt.tenant || p.operator != tt.operator || ok && len(p.id) != 64 {
			t.Errorf("match(%q) = %+v, %t", tt.token, p, ok)
		}
	}
	a, _ := match(tokenA)
	b, _ := match(tokenAcme)
	if a.id == b.id {
		t.Error("two tokens share an identity")
	}
}
