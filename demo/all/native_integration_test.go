//go:build integration

package all_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relay-demo/relay/cmd/relay/dead"
	"github.com/relay-demo/relay/cmd/relay/status"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// TestNativeHistory sends a webhook that always fails through relay all on
// RabbitMQ 4.3 with quorum queues and the default DELAY_BACKEND (auto,
// which picks the broker's own delayed retry there). Every surface must
// tell what the other backends tell: attempts 1 to 3 failed, attempt 4
// parked with the last error, the copy parked, 3 retries in the
// dead-letter queue.
func TestNativeHistory(t *testing.T) {
	url := retrytest.NativeURL(t)
	prefix := retrytest.Prefix(t)
	const token = "native-token-0123456789abcdef"
	env := map[string]string{
		"AMQP_URL": url, "MANAGEMENT_URL": "off", "TOPOLOGY_PREFIX": prefix, "QUEUE_TYPE": "quorum",
		"RETRY_DELAYS": "200ms,400ms,600ms", "FLAKY_WEBHOOK_SCENARIO": "flaky", "FLAKY_RATE": "1",
		"API_TOKENS": token, "DATA_DIR": t.TempDir(), "HTTP_ADDR": anyPort, "FLAKY_HTTP_ADDR": anyPort, "FLAKY_SMTP_ADDR": anyPort,
	}
	r := startAll(t, env, retry.Policy{Delays: []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 600 * time.Millisecond}})
	logs := r.logs
	if !strings.Contains(logs.String(), `"delay_backend":"native"`) {
		t.Fatalf("auto did not choose native on RabbitMQ 4.3 with quorum queues; log:\n%s", logs.String())
	}
	api := r.api
	hook := r.hooks + "/webhooks/native"
	req, _ := http.NewRequest(http.MethodPost, api+"/v1/notifications",
		strings.NewReader(`{"webhook":{"url":"`+hook+`","payload":{"n":1}}}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var res struct{ ID string }
	_ = json.NewDecoder(resp.Body).Decode(&res)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || res.ID == "" {
		t.Fatalf("POST = %d %+v", resp.StatusCode, res)
	}

	type attempt struct {
		N       int
		Outcome string
		Error   string
	}
	var n struct {
		Copies []struct {
			Channel, Status, Reason string
			LastError               string `json:"last_error"`
			Attempts                []attempt
		}
	}
	retrytest.Eventually(t, 30*time.Second, func() bool {
		req, _ := http.NewRequest(http.MethodGet, api+"/v1/notifications/"+res.ID, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		n.Copies = nil
		return json.NewDecoder(resp.Body).Decode(&n) == nil && len(n.Copies) == 1 && n.Copies[0].Status == "parked"
	}, "the webhook copy was never parked: %+v; log:\n%s", n.Copies, logs)
	c := n.Copies[0]
	if c.Reason != retry.ReasonMaxRetries || c.LastError == "" {
		t.Errorf("parked copy: reason %q last error %q, want %q and the last error", c.Reason, c.LastError, retry.ReasonMaxRetries)
	}
	var got []string
	for _, a := range c.Attempts {
		got = append(got, a.Outcome)
		if a.Error == "" {
			t.Errorf("attempt %d (%s) has no error", a.N, a.Outcome)
		}
	}
	if want := "failed,failed,failed,parked"; strings.Join(got, ",") != want {
		t.Errorf("attempts %v, want %s: %+v", got, want, c.Attempts)
	}
	for i, a := range c.Attempts {
		if a.N != i+1 {
			t.Errorf("attempt %d is numbered %d", i+1, a.N)
		}
	}

	// The dashboard reads the same history.
	req, _ = http.NewRequest(http.MethodGet, api+"/v1/notifications/"+res.ID, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Error(err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"parked"`) || strings.Contains(string(body), `"retrying"`) {
			t.Errorf("dashboard detail: %d %s, want the copy parked", resp.StatusCode, body)
		}
	}

	getenv := func(k string) string {
		if k == "RELAY_API" {
			return api
		}
		return env[k]
	}
	var out bytes.Buffer
	if err := status.Run(context.Background(), []string{"--full", res.ID}, getenv, &out); err != nil {
		t.Fatalf("relay status: %v", err)
	}
	text := out.String()
	if !strings.Contains(text, "parked") || strings.Contains(text, "retrying") || strings.Count(text, "failed") < 3 {
		t.Errorf("relay status, want three failed attempts and the copy parked, not retrying:\n%s", text)
	}

	out.Reset()
	if err := dead.Run(context.Background(), []string{"list", "--id", res.ID, "--json"}, getenv, strings.NewReader(""), &out); err != nil {
		t.Fatalf("relay dead list: %v", err)
	}
	type deadLetter struct {
		Retries   int    `json:"retries"`
		LastError string `json:"last_error"`
	}
	var parked []deadLetter
	for dec := json.NewDecoder(&out); dec.More(); {
		var p deadLetter
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("relay dead list --json: %v", err)
		}
		parked = append(parked, p)
	}
	if len(parked) != 1 || parked[0].Retries != 3 || parked[0].LastError == "" {
		t.Errorf("relay dead list: %+v, want one copy with 3 retries and its last error", parked)
	}
}
