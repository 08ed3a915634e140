//go:build integration

package all_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// TestTenantStreams sends one email as the default tenant and one as
// tenant acme through relay all: each tenant's dashboard stream carries
// its own notification's events, naming its tenant, and not the other's;
// an operator's carries both.
func TestTenantStreams(t *testing.T) {
	prefix := retrytest.Prefix(t)
	const (
		defaultToken  = "e2e-default-token-0123456789"
		acmeToken     = "e2e-acme-token-0123456789"
		operatorToken = "e2e-operator-token-0123456789"
	)
	env := map[string]string{
		"AMQP_URL": retrytest.URL(t), "TOPOLOGY_PREFIX": prefix, "DELAY_BACKEND": "ttl", "RETRY_DELAYS": "100ms", "RETRY_MAX": "2",
		"API_TOKENS": defaultToken, "API_TENANT_TOKENS": "acme:" + acmeToken, "API_OPERATOR_TOKENS": operatorToken,
		"DATA_DIR": t.TempDir(), "HTTP_ADDR": anyPort, "FLAKY_HTTP_ADDR": anyPort, "FLAKY_SMTP_ADDR": anyPort,
		// Every email is taken at once: a copy the fake server failed
		// out of its retries would never be delivered.
		"FLAKY_EMAIL_SCENARIO": "healthy",
	}
	r := startAll(t, env, retry.Policy{Delays: []time.Duration{100 * time.Millisecond}, MaxRetries: 2})

	type streamed struct {
		ID, Outcome, Tenant string
	}
	// follow opens token's event stream and returns what it has sent so
	// far, whenever asked.
	follow := func(token string) func() []streamed {
		ctx, cancel := context.WithCancel(r.ctx)
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.api+"/dashboard/events", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /dashboard/events = %s, want 200", resp.Status)
		}
		var mu sync.Mutex
		var seen []streamed
		go func() {
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
					var e streamed
					if json.Unmarshal([]byte(data), &e) == nil {
						mu.Lock()
						seen = append(seen, e)
						mu.Unlock()
					}
				}
			}
		}()
		return func() []streamed {
			mu.Lock()
			defer mu.Unlock()
			return append([]streamed(nil), seen...)
		}
	}
	streams := map[string]func() []streamed{
		"default": follow(defaultToken), "acme": follow(acmeToken), "operator": follow(operatorToken),
	}

	send := func(token string) string {
		t.Helper()
		return r.post(t, token, `{"email":{"to":["ada@example.com"],"subject":"tenants","text":"hi"}}`)
	}
	// delivered is the notifications whose delivery a stream has sent.
	delivered := func(seen []streamed) map[string]bool {
		out := map[string]bool{}
		for _, e := range seen {
			if e.Outcome == "delivered" {
				out[e.ID] = true
			}
		}
		return out
	}
	// The API's dashboard follows the events from a queue of its own,
	// bound once it runs: operator's notifications (the default
	// tenant's), one a second, tell when the streams see the pipeline.
	warm := map[string]bool{send(operatorToken): true}
	sent := time.Now()
	retrytest.Eventually(t, 30*time.Second, func() bool {
		for id := range delivered(streams["operator"]()) {
			if warm[id] {
				return true
			}
		}
		if time.Since(sent) > time.Second {
			warm[send(operatorToken)], sent = true, time.Now()
		}
		return false
	}, "the operator's stream never sent a delivery; logs:\n%s", r.logs)

	ids := map[string]string{send(defaultToken): "", send(acmeToken): "acme"}
	retrytest.Eventually(t, 30*time.Second, func() bool {
		got := delivered(streams["operator"]())
		for id := range ids {
			if !got[id] {
				return false
			}
		}
		return true
	}, "the operator's stream never sent both deliveries of %q; logs:\n%s", ids, r.logs)
	for id := range warm {
		ids[id] = ""
	}
	// Both were delivered, so every stream has had their events.
	for name, seen := range streams {
		tenant := map[string]string{"default": "", "acme": "acme"}[name]
		retrytest.Eventually(t, 5*time.Second, func() bool {
			got := delivered(seen())
			for id, of := range ids {
				if !warm[id] && (name == "operator" || of == tenant) && !got[id] {
					return false
				}
			}
			return true
		}, "%s's stream: %+v", name, seen())
		for _, e := range seen() {
			if of, ok := ids[e.ID]; !ok || (name != "operator" && of != tenant) {
				t.Errorf("%s's stream sent %+v, another tenant's", name, e)
			}
			if e.Tenant != ids[e.ID] {
				t.Errorf("%s's stream sent %+v naming tenant %q, want %q", name, e, e.Tenant, ids[e.ID])
			}
		}
	}
}
