//go:build integration

package all_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// TestEmailPerRecipient sends one email to three recipients through relay
// all, with the fake SMTP server refusing one of them for good: the other
// two get it, each alone in To:, and the history and the dead-letter
// queue show the refused one parked on its own.
func TestEmailPerRecipient(t *testing.T) {
	prefix := retrytest.Prefix(t)
	const token = "e2e-token-0123456789abcdef"
	env := map[string]string{
		"AMQP_URL": retrytest.URL(t), "TOPOLOGY_PREFIX": prefix, "DELAY_BACKEND": "ttl",
		"RETRY_DELAYS": "100ms", "RETRY_MAX": "2", "FLAKY_EMAIL_SCENARIO": "permanent", "FLAKY_PERMANENT_MATCH": "reject",
		"API_TOKENS": token, "DATA_DIR": t.TempDir(), "HTTP_ADDR": anyPort, "FLAKY_HTTP_ADDR": anyPort, "FLAKY_SMTP_ADDR": anyPort,
	}
	r := startAll(t, env, retry.Policy{Delays: []time.Duration{100 * time.Millisecond}, MaxRetries: 2})
	api := r.api
	call := func(method, path, body string, into any) int {
		t.Helper()
		req, _ := http.NewRequest(method, api+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_ = json.NewDecoder(resp.Body).Decode(into)
		return resp.StatusCode
	}

	var res struct{ ID string }
	to := []string{"ok1@example.com", "reject@example.com", "ok2@example.com"}
	body := `{"email":{"to":["` + strings.Join(to, `","`) + `"],"subject":"per recipient","text":"hi"}}`
	if code := call(http.MethodPost, "/v1/notifications", body, &res); code != http.StatusAccepted || res.ID == "" {
		t.Fatalf("POST = %d %+v", code, res)
	}

	type copyView struct {
		Channel, Recipient, Status, Reason string
		LastError                          string `json:"last_error"`
	}
	var n struct{ Copies []copyView }
	status := map[string]copyView{}
	retrytest.Eventually(t, 20*time.Second, func() bool {
		n.Copies = nil
		if call(http.MethodGet, "/v1/notifications/"+res.ID, "", &n) != http.StatusOK {
			return false
		}
		clear(status)
		for _, c := range n.Copies {
			if c.Status == "delivered" || c.Status == "parked" {
				status[c.Recipient] = c
			}
		}
		return len(status) == len(to)
	}, "the history never showed every recipient's copy ended: %+v", n.Copies)
	for _, c := range n.Copies {
		if c.Channel != "email" {
			t.Errorf("copy %+v: want only email copies", c)
		}
	}
	if len(n.Copies) != len(to) {
		t.Errorf("%d copies, want one per recipient: %+v", len(n.Copies), n.Copies)
	}
	for _, ok := range []string{"ok1@example.com", "ok2@example.com"} {
		if status[ok].Status != "delivered" {
			t.Errorf("%s: %+v, want delivered though another recipient was refused", ok, status[ok])
		}
	}
	if r := status["reject@example.com"]; r.Status != "parked" || r.Reason != retry.ReasonPermanent || !strings.Contains(r.LastError, "550") {
		t.Errorf("reject@example.com: %+v, want parked as permanent with the server's 550", r)
	}

	// What the SMTP server received: one email per accepted recipient,
	// each addressed to that recipient alone, envelope and header both.
	var msgs struct {
		Email []struct {
			ID       string   `json:"id"`
			To       []string `json:"to"`
			HeaderTo string   `json:"header_to"`
		}
	}
	resp, err := http.Get(r.hooks + "/messages")
	if err != nil {
		t.Fatal(err)
	}
	_ = json.NewDecoder(resp.Body).Decode(&msgs)
	resp.Body.Close()
	var got []string
	for _, m := range msgs.Email {
		if m.ID != res.ID {
			continue
		}
		if len(m.To) != 1 || strings.Count(m.HeaderTo, "@") != 1 || !strings.Contains(m.HeaderTo, m.To[0]) {
			t.Errorf("email to %v with To: %q, want one recipient in both", m.To, m.HeaderTo)
		}
		got = append(got, m.To...)
	}
	slices.Sort(got)
	if want := []string{"ok1@example.com", "ok2@example.com"}; !slices.Equal(got, want) {
		t.Errorf("the SMTP server accepted emails to %v, want %v", got, want)
	}

	// The dead-letter queue holds the refused recipient's copy alone.
	topo := retry.Topology{Prefix: prefix, Routes: channel.Routes(), Backend: retry.TTL, CopyHeader: notification.HeaderRecipient}
	parked, err := (retry.DeadLetters{Conn: retrytest.Conn(t), Topology: topo}).List(context.Background(), retry.Filter{ID: res.ID}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(parked) != 1 || parked[0].Copy != "reject@example.com" {
		t.Errorf("parked = %+v, want the copy for reject@example.com only", parked)
	}
}
