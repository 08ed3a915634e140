//go:build integration

package all_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// readmeBlock returns the first fenced code block after the marker
// <!-- readme-test: name --> in README.md, and the block after it.
func readmeBlock(t *testing.T, name string) (code, next string) {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	marker := "<!-- readme-test: " + name + " -->"
	_, rest, ok := strings.Cut(string(b), marker)
	if !ok {
		t.Fatalf("README.md has no %s", marker)
	}
	fence := regexp.MustCompile("(?s)```[a-z]*\n(.*?)```")
	blocks := fence.FindAllStringSubmatch(rest, 2)
	if len(blocks) < 2 {
		t.Fatalf("README.md: want two code blocks after %s", marker)
	}
	return blocks[0][1], blocks[1][1]
}

// TestReadmeSendExample runs the README's curl example against relay all
// and checks the answer it shows, then follows the notification to the
// end: the example cannot drift from the API.
func TestReadmeSendExample(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("the README's example needs curl: install it (apt-get install curl)")
	}
	code, shown := readmeBlock(t, "send")
	// The token the example sets: the one make demo uses.
	const token = "demo-token-change-me-0001"
	env := map[string]string{
		"AMQP_URL": retrytest.URL(t), "TOPOLOGY_PREFIX": retrytest.Prefix(t), "DELAY_BACKEND": "ttl",
		"RETRY_DELAYS": "100ms,200ms", "FLAKY_EMAIL_SCENARIO": "healthy", "FLAKY_WEBHOOK_SCENARIO": "healthy",
		"API_TOKENS": token, "DATA_DIR": t.TempDir(), "HTTP_ADDR": anyPort, "FLAKY_HTTP_ADDR": anyPort, "FLAKY_SMTP_ADDR": anyPort,
	}
	r := startAll(t, env, retry.Policy{Delays: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}})
	logs, api := r.logs, r.api

	// The example talks to the demo's addresses; here they are others.
	for demo, here := range map[string]string{"http://localhost:8080": api, "http://127.0.0.1:9090": r.hooks} {
		if !strings.Contains(code, demo) {
			t.Fatalf("the README's example no longer uses %s; update this test with it:\n%s", demo, code)
		}
		code = strings.ReplaceAll(code, demo, here)
	}
	run := func() (id string, answer map[string]any) {
		t.Helper()
		cmd := exec.Command("bash", "-c", "set -euo pipefail\n"+code)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("the README's example failed: %v\n%s\nlog:\n%s", err, out, logs.String())
		}
		if err := json.Unmarshal(out, &answer); err != nil {
			t.Fatalf("the README's example printed %q: %v", out, err)
		}
		id, _ = answer["id"].(string)
		return id, answer
	}
	id, got := run()

	// The answer is the one the README shows, but for the id.
	var want map[string]any
	if err := json.Unmarshal([]byte(shown), &want); err != nil {
		t.Fatalf("the README's answer is not JSON: %v\n%s", err, shown)
	}
	if !regexp.MustCompile(`^ntf_[a-z2-7]{26}$`).MatchString(id) {
		t.Errorf("id %q is not a notification id", id)
	}
	if _, ok := want["id"]; !ok {
		t.Errorf("the README's answer has no id: %s", shown)
	}
	want["id"] = id
	if w, g := fmt.Sprint(want), fmt.Sprint(got); w != g {
		t.Errorf("the README shows (id aside) %s\nthe API answered %s", w, g)
	}
	// The Idempotency-Key in the example: the same request, the same id.
	if again, _ := run(); again != id {
		t.Errorf("the example run twice gave ids %s and %s, want one: its Idempotency-Key", id, again)
	}

	retrytest.Eventually(t, 20*time.Second, func() bool {
		req, _ := http.NewRequest(http.MethodGet, api+"/v1/notifications/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var view struct {
			Copies []struct{ Status string } `json:"copies"`
		}
		if json.NewDecoder(resp.Body).Decode(&view) != nil || len(view.Copies) != 2 {
			return false
		}
		return view.Copies[0].Status == "delivered" && view.Copies[1].Status == "delivered"
	}, "the README's notification was not delivered on both channels; log:\n%s", logs.String())
}
