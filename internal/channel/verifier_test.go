package channel

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/internal/testenv"
	"github.com/relay-demo/relay/webhooks"
)

// verifyScript checks each case it reads on stdin with the reference
// Standard Webhooks library and prints whether it verified.
const verifyScript = `
const { Webhook } = require("standardwebhooks");
let input = "";
process.stdin.on("data", (d) => (input += d));
process.stdin.on("end", () => {
  const out = JSON.parse(input).map((c) => {
    try {
      new Webhook(c.secret).verify(c.body, c.headers);
      return { name: c.name, ok: true };
    } catch (e) {
      return { name: c.name, ok: false, error: String(e.message) };
    }
  });
  process.stdout.write(JSON.stringify(out));
});
`

// referenceVerifier installs the npm package standardwebhooks into a
// temporary directory and returns the directory, with verify.js in it. It
// skips the test when npm or node is missing or the install fails, unless
// CI=true, where that is a failure (testenv.Unavailable).
func referenceVerifier(t *testing.T) string {
	t.Helper()
	npm, err := exec.LookPath("npm")
	if err != nil {
		testenv.Unavailable(t, "npm is not installed (the reference verifier needs npm and node): %v", err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		testenv.Unavailable(t, "node is not installed (the reference verifier needs npm and node): %v", err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--loglevel=error", "standardwebhooks@1")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		testenv.Unavailable(t, "npm install standardwebhooks: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "verify.js"), []byte(verifyScript), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// verifyCase is one delivery for the reference verifier to check with
// one secret.
type verifyCase struct {
	Name    string            `json:"name"`
	Secret  string            `json:"secret"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
}

type verifyResult struct {
	Name  string `json:"name"`
	OK    bool   `json:"ok"`
	Error string `json:"error"`
}

func runVerifier(t *testing.T, dir string, cases []verifyCase) map[string]verifyResult {
	t.Helper()
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "verify.js")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node verify.js: %v\n%s", err, stderr.String())
	}
	var results []verifyResult
	if err := json.Unmarshal(out, &results); err != nil {
		t.Fatalf("node verify.js printed %q: %v", out, err)
	}
	byName := map[string]verifyResult{}
	for _, r := range results {
		byName[r.Name] = r
	}
	return byName
}

// TestReferenceVerifier has the Standard Webhooks reference library check
// what endpoints receive: a receiver verifying with its own endpoint's
// secret accepts its webhooks and refuses another endpoint's, and during a
// rotation's grace period a receiver holding either secret accepts.
func TestReferenceVerifier(t *testing.T) {
	dir := referenceVerifier(t)
	f := newFixture(t, testEndpointConfig)
	ep1, secret1 := f.createEndpoint(t, "/one")
	ep2, secret2 := f.createEndpoint(t, "/two")
	ep3, oldSecret := f.createEndpoint(t, "/three")
	newSecret := webhooks.NewSecret()
	if _, err := f.store.RotateEndpointSecret(context.Background(), ep3, store.Secret(newSecret), 24*time.Hour, f.clock.now()); err != nil {
		t.Fatal(err)
	}
	for _, ep := range []string{ep1, ep2, ep3} {
		if err := f.deliver("ntf_ref", WebhookPart{Endpoint: ep, Payload: json.RawMessage(`{"order":42,"note":"ünïcode"}`)}); err != nil {
			t.Fatalf("deliver to %s: %v", ep, err)
		}
	}
	got := func(path string) delivery {
		d := f.recv.deliveries(path)
		if len(d) != 1 {
			t.Fatalf("%s got %d deliveries, want 1", path, len(d))
		}
		return d[0]
	}
	tests := []struct {
		name   string
		path   string
		secret string
		want   bool
	}{
		{"endpoint 1 with its secret", "/one", secret1, true},
		{"endpoint 1 with endpoint 2's secret", "/one", secret2, false},
		{"endpoint 2 with its secret", "/two", secret2, true},
		{"endpoint 2 with endpoint 1's secret", "/two", secret1, false},
		{"endpoint 1 with WEBHOOK_SECRET", "/one", globalSecret, false},
		{"rotating endpoint with the old secret", "/three", oldSecret, true},
		{"rotating endpoint with the new secret", "/three", newSecret, true},
		{"rotating endpoint with another endpoint's secret", "/three", secret1, false},
	}
	var cases []verifyCase
	for _, tt := range tests {
		d := got(tt.path)
		h := map[string]string{}
		for _, k := range []string{webhooks.HeaderID, webhooks.HeaderTimestamp, webhooks.HeaderSignature} {
			h[k] = d.Header.Get(k)
		}
		cases = append(cases, verifyCase{Name: tt.name, Secret: tt.secret, Headers: h, Body: string(d.Body)})
	}
	results := runVerifier(t, dir, cases)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, ok := results[tt.name]
			if !ok {
				t.Fatal("the verifier gave no result")
			}
			if r.OK != tt.want {
				t.Errorf("reference verifier accepts: %t (%s), want %t", r.OK, r.Error, tt.want)
			}
		})
	}
}
