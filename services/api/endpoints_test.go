package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/internal/store/storetest"
	"github.com/relay-demo/relay/webhooks"
)

// testResolver resolves the tests' host names without DNS.
func testResolver(_ context.Context, host string) ([]netip.Addr, error) {
	switch host {
	case "hooks.example.com":
		return []netip.Addr{netip.MustParseAddr("93.184.215.14")}, nil
	case "localhost":
		return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")}, nil
	case "sneaky.example.com":
		// A public name that resolves into the private network.
		return []netip.Addr{netip.MustParseAddr("93.184.215.14"), netip.MustParseAddr("10.0.0.7")}, nil
	}
	// As the system resolver fails: naming the DNS server it asked.
	return nil, &net.DNSError{Err: "no such host", Name: host, Server: "10.0.0.53:53", IsNotFound: true}
}

// TestEndpointLookupFailure: a host that does not resolve is a 422 that
// says so without the address of the DNS server relay asked.
func TestEndpointLookupFailure(t *testing.T) {
	h, _, _, _ := endpointServer(t, storetest.SQLite)
	rec := call(h, http.MethodPost, "/v1/endpoints", `{"url":"https://nowhere.invalid/in"}`, nil)
	if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(rec.Body.String(), `does not resolve (no such host)`) ||
		strings.Contains(rec.Body.String(), "10.0.0.53") {
		t.Errorf("POST = %d %s, want a 422 saying the host does not resolve, without the resolver's address", rec.Code, rec.Body)
	}
}

// endpointServer is the API on a real history store, with settings that
// allow loopback, like the demo's.
func endpointServer(t *testing.T, backend string) (http.Handler, *store.Store, *bytes.Buffer, *fakePublisher) {
	t.Helper()
	st := storetest.Open(t, backend)
	h, fake, logs := testServer(t, func(d *Deps, _ *fakePublisher) {
		d.History, d.Endpoints = st, st
		d.EndpointRules = EndpointRules{Grace: 6 * time.Hour, Guard: webhooks.NewGuard([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}), Lookup: testResolver}
	})
	return h, st, logs, fake
}

// endpointBody is an endpoint as a client reads it.
type endpointBody struct {
	ID             string     `json:"id"`
	URL            string     `json:"url"`
	Description    string     `json:"description"`
	Enabled        bool       `json:"enabled"`
	DisabledReason string     `json:"disabled_reason"`
	PreviousUntil  *time.Time `json:"previous_secret_expires_at"`
	Secret         *string    `json:"secret"`
	Circuit        struct {
		State        string     `json:"state"`
		Since        *time.Time `json:"since"`
		LastError    string     `json:"last_error"`
		FailingSince *time.Time `json:"failing_since"`
	} `json:"circuit"`
}

func decodeAs[T any](t *testing.T, rec *httptest.ResponseRecorder) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatalf("answer %d %q: %v", rec.Code, rec.Body, err)
	}
	return v
}

func createEP(t *testing.T, h http.Handler, url string) endpointBody {
	t.Helper()
	rec := call(h, http.MethodPost, "/v1/endpoints", `{"url":"`+url+`","description":"orders"}`, nil)
	if rec.Code != http.StatusCreated {
		t.Fatalf("POST /v1/endpoints = %d %s", rec.Code, rec.Body)
	}
	return decodeAs[endpointBody](t, rec)
}

func TestEndpointLifecycle(t *testing.T) {
	for _, backend := range storetest.Backends() {
		t.Run(backend, func(t *testing.T) {
			h, _, logs, _ := endpointServer(t, backend)
			var secrets []string

			rec := call(h, http.MethodPost, "/v1/endpoints", `{"url":"https://hooks.example.com/in?token=abc","description":"orders"}`, nil)
			if rec.Code != http.StatusCreated {
				t.Fatalf("create = %d %s", rec.Code, rec.Body)
			}
			ep := decodeAs[endpointBody](t, rec)
			if !strings.HasPrefix(ep.ID, "ep_") || len(ep.ID) != 29 || ep.URL != "https://hooks.example.com/in?token=abc" || ep.Description != "orders" ||
				!ep.Enabled || ep.Circuit.State != "closed" {
				t.Errorf("created: %s", rec.Body)
			}
			if loc := rec.Header().Get("Location"); loc != "/v1/endpoints/"+ep.ID {
				t.Errorf("Location = %q", loc)
			}
			if ep.Secret == nil || webhooks.CheckSecret(*ep.Secret) != nil {
				t.Fatalf("the creation's answer has no usable secret: %s", rec.Body)
			}
			secrets = append(secrets, *ep.Secret)

			// Read back: never a secret again.
			for _, path := range []string{"/v1/endpoints/" + ep.ID, "/v1/endpoints"} {
				rec := get(h, path)
				if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), ep.ID) {
					t.Fatalf("GET %s = %d %s", path, rec.Code, rec.Body)
				}
				if strings.Contains(rec.Body.String(), "secret\"") || strings.Contains(rec.Body.String(), "whsec_") {
					t.Errorf("GET %s shows a secret: %s", path, rec.Body)
				}
			}

			// Change, disable, enable.
			rec = call(h, http.MethodPatch, "/v1/endpoints/"+ep.ID, `{"description":"orders, v2","url":"http://127.0.0.1:9/hook"}`, nil)
			if got := decodeAs[endpointBody](t, rec); rec.Code != http.StatusOK || got.Description != "orders, v2" || got.URL != "http://127.0.0.1:9/hook" {
				t.Errorf("PATCH = %d %s", rec.Code, rec.Body)
			}
			rec = call(h, http.MethodPatch, "/v1/endpoints/"+ep.ID, `{"enabled":false}`, nil)
			if got := decodeAs[endpointBody](t, rec); got.Enabled || got.DisabledReason != ReasonDisabledByRequest || got.Description != "orders, v2" {
				t.Errorf("disable = %d %s", rec.Code, rec.Body)
			}
			rec = call(h, http.MethodPatch, "/v1/endpoints/"+ep.ID, `{"enabled":true}`, nil)
			if got := decodeAs[endpointBody](t, rec); !got.Enabled || got.DisabledReason != "" {
				t.Errorf("enable = %d %s", rec.Code, rec.Body)
			}

			// Rotate: the configured grace, then one of the request's own.
			rec = call(h, http.MethodPost, "/v1/endpoints/"+ep.ID+"/rotate-secret", "", map[string]string{"Content-Type": ""})
			rotated := decodeAs[endpointBody](t, rec)
			if rec.Code != http.StatusOK || rotated.Secret == nil || *rotated.Secret == secrets[0] || webhooks.CheckSecret(*rotated.Secret) != nil {
				t.Fatalf("rotate = %d %s", rec.Code, rec.Body)
			}
			if rotated.PreviousUntil == nil || !rotated.PreviousUntil.Equal(now.Add(6*time.Hour)) {
				t.Errorf("rotated with the configured grace: the old secret expires at %v, want %s", rotated.PreviousUntil, now.Add(6*time.Hour))
			}
			secrets = append(secrets, *rotated.Secret)
			rec = call(h, http.MethodPost, "/v1/endpoints/"+ep.ID+"/rotate-secret", `{"grace_seconds":0}`, nil)
			rotated = decodeAs[endpointBody](t, rec)
			if rec.Code != http.StatusOK || rotated.Secret == nil || rotated.PreviousUntil != nil {
				t.Errorf("rotate without grace = %d %s", rec.Code, rec.Body)
			}
			secrets = append(secrets, *rotated.Secret)
			rec = call(h, http.MethodPost, "/v1/endpoints/"+ep.ID+"/rotate-secret", `{"grace_seconds":-1}`, nil)
			if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(rec.Body.String(), "grace_seconds") {
				t.Errorf("rotate with a negative grace = %d %s", rec.Code, rec.Body)
			}

			// Delete.
			if rec := call(h, http.MethodDelete, "/v1/endpoints/"+ep.ID, "", nil); rec.Code != http.StatusNoContent {
				t.Errorf("DELETE = %d %s", rec.Code, rec.Body)
			}
			for _, r := range []struct{ method, path, body string }{
				{http.MethodGet, "/v1/endpoints/" + ep.ID, ""},
				{http.MethodDelete, "/v1/endpoints/" + ep.ID, ""},
				{http.MethodPatch, "/v1/endpoints/" + ep.ID, `{"enabled":true}`},
				{http.MethodPost, "/v1/endpoints/" + ep.ID + "/rotate-secret", `{}`},
				{http.MethodGet, "/v1/endpoints/" + ep.ID + "/attempts", ""},
			} {
				rec := call(h, r.method, r.path, r.body, nil)
				if p := decodeAs[problemBody](t, rec); rec.Code != http.StatusNotFound || p.Type != ProblemNotFound {
					t.Errorf("%s %s after delete = %d %s", r.method, r.path, rec.Code, rec.Body)
				}
			}

			for _, s := range secrets {
				if strings.Contains(logs.String(), strings.TrimPrefix(s, "whsec_")) {
					t.Errorf("the log shows a secret:\n%s", logs)
				}
			}
			if !strings.Contains(logs.String(), "endpoint created") || strings.Contains(logs.String(), "token=abc") {
				t.Errorf("the log does not say endpoint created, or shows the URL's query:\n%s", logs)
			}
		})
	}
}

func TestEndpointRefused(t *testing.T) {
	h, _, _, _ := endpointServer(t, storetest.SQLite)
	tests := []struct {
		name    string
		body    string
		headers map[string]string
		status  int
		want    string // in the problem
	}{
		{"ftp", `{"url":"ftp://hooks.example.com/in"}`, nil, 422, "not an absolute http or https URL"},
		{"credentials", `{"url":"https://u:p@hooks.example.com/in"}`, nil, 422, "credentials"},
		{"private address", `{"url":"http://10.1.2.3/in"}`, nil, 422, "forbidden address (private)"},
		{"loopback by name, not allowed", `{"url":"http://localhost:9090/in"}`, nil, 422, "forbidden address (loopback)"},
		{"a name leading inside", `{"url":"https://sneaky.example.com/in"}`, nil, 422, "forbidden address (private)"},
		{"metadata", `{"url":"http://169.254.169.254/latest"}`, nil, 422, "link-local"},
		{"does not resolve", `{"url":"https://nowhere.invalid/in"}`, nil, 422, "does not resolve"},
		{"port 0", `{"url":"https://hooks.example.com:0/in"}`, nil, 422, "a port is a number from 1 to 65535"},
		{"port 99999", `{"url":"https://hooks.example.com:99999/in"}`, nil, 422, "a port is a number from 1 to 65535"},
		{"numeric host", `{"url":"http://2130706433/in"}`, nil, 422, "non-standard form"},
		{"no url", `{"description":"x"}`, nil, 422, "a URL is required"},
		{"long description", `{"url":"https://hooks.example.com/in","description":"` + strings.Repeat("x", MaxDescription+1) + `"}`, nil, 422, "description"},
		{"unknown field", `{"url":"https://hooks.example.com/in","secret":"whsec_mine"}`, nil, 400, "unknown field"},
		{"not JSON", `{"url":`, nil, 400, "malformed"},
		{"not JSON content", `{"url":"https://hooks.example.com/in"}`, map[string]string{"Content-Type": "text/plain"}, 415, "unsupported-media-type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := call(h, http.MethodPost, "/v1/endpoints", tt.body, tt.headers)
			if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.want) {
				t.Errorf("POST = %d %s, want %d saying %q", rec.Code, rec.Body, tt.status, tt.want)
			}
		})
	}
	// A refusal says why, never what a name resolves to inside the network.
	for _, host := range []string{"sneaky.example.com", "localhost:9090"} {
		rec := call(h, http.MethodPost, "/v1/endpoints", `{"url":"http://`+host+`/in"}`, nil)
		for _, addr := range []string{"10.0.0.7", "127.0.0.1", "::1"} {
			if strings.Contains(rec.Body.String(), addr) {
				t.Errorf("POST %s = %s, which names %s", host, rec.Body, addr)
			}
		}
	}
	// The allow-list lets loopback in, as WEBHOOK_ALLOW_CIDRS does.
	ep := createEP(t, h, "http://127.0.0.1:9090/webhooks/ok")
	rec := call(h, http.MethodPatch, "/v1/endpoints/"+ep.ID, `{"url":"http://10.1.2.3/"}`, nil)
	if rec.Code != http.StatusUnprocessableEntity {
		t.Errorf("PATCH to a private address = %d %s, want 422", rec.Code, rec.Body)
	}
}

// TestEndpointsWithoutHistory checks the routes answer 503 when the API
// runs without a store.
func TestEndpointsWithoutHistory(t *testing.T) {
	h, _, _ := testServer(t, nil)
	for _, r := range []struct{ method, path, body string }{
		{http.MethodPost, "/v1/endpoints", `{"url":"https://hooks.example.com/in"}`},
		{http.MethodGet, "/v1/endpoints", ""},
		{http.MethodGet, "/v1/endpoints/ep_aaaaaaaaaaaaaaaaaaaaaaaaaa", ""},
		{http.MethodPost, "/v1/notifications", `{"webhook":{"endpoint":"ep_aaaaaaaaaaaaaaaaaaaaaaaaaa","payload":{}}}`},
	} {
		rec := call(h, r.method, r.path, r.body, nil)
		if p := decodeAs[problemBody](t, rec); rec.Code != http.StatusServiceUnavailable || p.Type != ProblemHistoryUnavailable {
			t.Errorf("%s %s = %d %s, want 503 history-unavailable", r.method, r.path, rec.Code, rec.Body)
		}
	}
	// A bare URL needs no store.
	if rec := call(h, http.MethodPost, "/v1/notifications", `{`+webhookPart+`}`, nil); rec.Code != http.StatusAccepted {
		t.Errorf("bare URL without a store = %d %s", rec.Code, rec.Body)
	}
}

func TestNotificationNamesEndpoint(t *testing.T) {
	h, st, _, fake := endpointServer(t, storetest.SQLite)
	on := createEP(t, h, "https://hooks.example.com/on")
	off := createEP(t, h, "https://hooks.example.com/off")
	if rec := call(h, http.MethodPatch, "/v1/endpoints/"+off.ID, `{"enabled":false}`, nil); rec.Code != http.StatusOK {
		t.Fatal(rec.Body)
	}
	gone := "ep_zzzzzzzzzzzzzzzzzzzzzzzzzz"
	part := func(id string) string { return `{"webhook":{"endpoint":"` + id + `","payload":{"n":1}}}` }

	tests := []struct {
		name, path, body string
		status           int
		field, message   string
	}{
		{"enabled", "/v1/notifications", part(on.ID), 202, "", ""},
		{"unknown", "/v1/notifications", part(gone), 422, "webhook.endpoint", "no endpoint has the id"},
		{"disabled", "/v1/notifications", part(off.ID), 422, "webhook.endpoint", "is disabled (" + ReasonDisabledByRequest + ")"},
		{"malformed id", "/v1/notifications", part("ep_x"), 422, "webhook.endpoint", "not an endpoint id"},
		{"url and endpoint", "/v1/notifications", `{"webhook":{"url":"https://x.example/","endpoint":"` + on.ID + `","payload":1}}`, 422, "webhook.endpoint", "not both"},
		{"batch, all enabled", "/v1/notifications/batch", `{"notifications":[` + part(on.ID) + `,` + part(on.ID) + `]}`, 202, "", ""},
		{"batch, one disabled", "/v1/notifications/batch", `{"notifications":[` + part(on.ID) + `,` + part(off.ID) + `]}`, 422, "notifications[1].webhook.endpoint", "disabled"},
		// The decoder matches keys ignoring case and reads escapes: so does the check.
		{"unknown, key in capitals", "/v1/notifications", `{"webhook":{"ENDPOINT":"` + gone + `","payload":{"n":1}}}`, 422, "webhook.endpoint", "no endpoint has the id"},
		{"disabled, key escaped", "/v1/notifications", `{"webhook":{"endp\u006fint":"` + off.ID + `","payload":{"n":1}}}`, 422, "webhook.endpoint", "is disabled"},
		{"batch, one unknown, key mixed case", "/v1/notifications/batch", `{"notifications":[` + part(on.ID) + `,{"webhook":{"EndPoint":"` + gone + `","payload":1}}]}`, 422, "notifications[1].webhook.endpoint", "no endpoint has the id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(fake.messages())
			rec := call(h, http.MethodPost, tt.path, tt.body, nil)
			if rec.Code != tt.status {
				t.Fatalf("POST %s = %d %s, want %d", tt.path, rec.Code, rec.Body, tt.status)
			}
			if tt.status != 202 {
				p := decodeAs[problemBody](t, rec)
				if len(p.Errors) != 1 || p.Errors[0].Field != tt.field || !strings.Contains(p.Errors[0].Message, tt.message) {
					t.Errorf("errors = %+v, want %s: %q", p.Errors, tt.field, tt.message)
				}
				if n := len(fake.messages()); n != before {
					t.Errorf("a refused request published %d messages", n-before)
				}
				return
			}
			if len(fake.messages()) == before {
				t.Error("nothing published")
			}
		})
	}
	// The copy carries the endpoint; its recipient is the endpoint id.
	msgs := fake.messages()
	if !strings.Contains(string(msgs[0].Msg.Body), `"endpoint":"`+on.ID+`"`) {
		t.Errorf("published %s", msgs[0].Msg.Body)
	}
	for _, r := range fake.records() {
		if len(r.Recipients) != 1 || r.Recipients[0] != on.ID {
			t.Errorf("recorded recipients %q, want the endpoint id", r.Recipients)
		}
	}
	_ = st
}

func TestEndpointAttemptsAndCircuit(t *testing.T) {
	h, st, _, _ := endpointServer(t, storetest.SQLite)
	ctx := context.Background()
	ep := createEP(t, h, "https://hooks.example.com/in")
	other := createEP(t, h, "https://hooks.example.com/other")
	at := now.Add(-time.Hour)
	for i, target := range []string{ep.ID, other.ID, ep.ID} {
		id := fmt.Sprintf("ntf_%d", i)
		created := at.Add(time.Duration(i) * time.Minute)
		if err := st.Accept(ctx, []notification.Accepted{{ID: id, CreatedAt: created, Channels: []string{"webhook"}, Recipients: []string{target}, Payload: json.RawMessage(`{}`)}}); err != nil {
			t.Fatal(err)
		}
		if err := st.Record(ctx, []notification.Event{
			{ID: id, Channel: "webhook", Attempt: 1, Outcome: "failed", At: created.Add(time.Second), Error: "endpoint " + target + ": circuit open", Service: "worker-webhook"},
			{ID: id, Channel: "webhook", Attempt: 2, Outcome: "delivered", At: created.Add(2 * time.Second), Service: "worker-webhook"},
		}); err != nil {
			t.Fatal(err)
		}
	}
	type attempt struct {
		NotificationID string `json:"notification_id"`
		N              int    `json:"n"`
		Outcome        string `json:"outcome"`
		Error          string `json:"error"`
	}
	type page struct {
		Attempts   []attempt `json:"attempts"`
		NextCursor string    `json:"next_cursor"`
	}
	var got []attempt
	path := "/v1/endpoints/" + ep.ID + "/attempts?limit=3"
	for range 5 {
		rec := get(h, path)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s = %d %s", path, rec.Code, rec.Body)
		}
		p := decodeAs[page](t, rec)
		got = append(got, p.Attempts...)
		if p.NextCursor == "" {
			break
		}
		path = "/v1/endpoints/" + ep.ID + "/attempts?limit=3&cursor=" + p.NextCursor
	}
	want := []attempt{
		{"ntf_2", 2, "delivered", ""}, {"ntf_2", 1, "failed", "endpoint " + ep.ID + ": circuit open"},
		{"ntf_0", 2, "delivered", ""}, {"ntf_0", 1, "failed", "endpoint " + ep.ID + ": circuit open"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("attempts:\n got %v\nwant %v", got, want)
	}
	for _, q := range []string{"limit=0", "limit=x", "cursor=%21%21", "status=failed", "limit=3;x"} {
		if rec := get(h, "/v1/endpoints/"+ep.ID+"/attempts?"+q); rec.Code != http.StatusUnprocessableEntity {
			t.Errorf("?%s = %d %s, want 422", q, rec.Code, rec.Body)
		}
	}

	// The circuit as a worker recorded it.
	since := now.Add(-time.Minute)
	failing := now.Add(-2 * time.Hour)
	if _, err := st.RecordCircuit(ctx, ep.ID, store.CircuitChange{State: store.CircuitOpen, Since: since, LastError: "webhook https://hooks.example.com/in: 503 Service Unavailable",
		FailingSince: &failing, At: since}); err != nil {
		t.Fatal(err)
	}
	got2 := decodeAs[endpointBody](t, get(h, "/v1/endpoints/"+ep.ID))
	if got2.Circuit.State != "open" || got2.Circuit.Since == nil || !got2.Circuit.Since.Equal(since) || !strings.Contains(got2.Circuit.LastError, "503") ||
		got2.Circuit.FailingSince == nil || !got2.Circuit.FailingSince.Equal(failing) {
		t.Errorf("circuit = %+v", got2.Circuit)
	}
}

// TestLoadEndpointsConfig checks the variables the endpoint routes read.
func TestLoadEndpointsConfig(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{"defaults", nil, ""},
		{"grace", map[string]string{"WEBHOOK_ROTATION_GRACE": "1h"}, ""},
		{"negative grace", map[string]string{"WEBHOOK_ROTATION_GRACE": "-1h"}, "WEBHOOK_ROTATION_GRACE"},
		{"grace too long", map[string]string{"WEBHOOK_ROTATION_GRACE": "1000h"}, "WEBHOOK_ROTATION_GRACE"},
		{"allow-list", map[string]string{"WEBHOOK_ALLOW_CIDRS": "127.0.0.0/8"}, ""},
		{"allow-list of everything", map[string]string{"WEBHOOK_ALLOW_CIDRS": "0.0.0.0/0"}, "WEBHOOK_ALLOW_CIDRS"},
		{"the retired variable", map[string]string{"WEBHOOK_ALLOW_PRIVATE": "true"}, "WEBHOOK_ALLOW_PRIVATE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := LoadEndpointsConfig(func(k string) string { return tt.env[k] })
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if tt.env == nil && cfg.RotationGrace != DefaultRotationGrace {
					t.Errorf("default grace %s", cfg.RotationGrace)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want it to name %s", err, tt.wantErr)
			}
		})
	}
}

// TestEndpointEnabledIsAnOperationalEvent: enabling a disabled endpoint is
// endpoint.enabled; enabling an enabled one, or disabling, is none.
func TestEndpointEnabledIsAnOperationalEvent(t *testing.T) {
	var ops []notification.Operational
	st := storetest.Open(t, storetest.SQLite)
	h, _, _ := testServer(t, func(d *Deps, _ *fakePublisher) {
		d.History, d.Endpoints = st, st
		d.EndpointRules = EndpointRules{Guard: webhooks.NewGuard([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}), Lookup: testResolver}
		d.Operate = func(op notification.Operational) { ops = append(ops, op) }
		d.TenantTokens = []TenantToken{{Tenant: "acme", Token: tokenAcme}}
	})
	rec := call(h, http.MethodPost, "/v1/endpoints", `{"url":"https://hooks.example.com/in"}`, nil)
	if rec.Code != http.StatusCreated {
		t.Fatalf("create = %d %s", rec.Code, rec.Body)
	}
	ep := decodeAs[endpointBody](t, rec)
	for _, body := range []string{`{"enabled":true}`, `{"enabled":false}`, `{"enabled":true}`, `{"enabled":true}`} {
		if rec := call(h, http.MethodPatch, "/v1/endpoints/"+ep.ID, body, nil); rec.Code != http.StatusOK {
			t.Fatalf("PATCH %s = %d %s", body, rec.Code, rec.Body)
		}
	}
	if len(ops) != 1 {
		t.Fatalf("%d operational events, want 1 (the enabling of the disabled endpoint): %+v", len(ops), ops)
	}
	if op := ops[0]; op.Type != notification.OpEndpointEnabled || op.Data.EndpointID != ep.ID || op.Data.URL != "https://hooks.example.com/in" || op.Data.Tenant != "" {
		t.Errorf("event %+v, want endpoint.enabled of %s with its URL and no tenant", op, ep.ID)
	}

	// A named tenant's endpoint's event names its tenant.
	ops = nil
	acme := decodeAs[endpointBody](t, as(h, tokenAcme, http.MethodPost, "/v1/endpoints", `{"url":"https://hooks.example.com/acme"}`))
	for _, body := range []string{`{"enabled":false}`, `{"enabled":true}`} {
		if rec := as(h, tokenAcme, http.MethodPatch, "/v1/endpoints/"+acme.ID, body); rec.Code != http.StatusOK {
			t.Fatalf("PATCH %s = %d %s", body, rec.Code, rec.Body)
		}
	}
	if len(ops) != 1 || ops[0].Data.EndpointID != acme.ID || ops[0].Data.Tenant != "acme" {
		t.Errorf("events %+v, want one endpoint.enabled of %s naming tenant acme", ops, acme.ID)
	}
}
