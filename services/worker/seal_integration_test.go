//go:build integration

package worker_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/relay-demo/relay/retry/retrytest"
)

// TestSealedEndpointsEndToEnd runs the API, the retrier and the webhook
// worker with HISTORY_SEAL_KEY: an endpoint's secret, created and rotated
// through the API, is nowhere in the history's files, which only their
// owner may read, and the worker signs with it all the same.
func TestSealedEndpointsEndToEnd(t *testing.T) {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	dir := filepath.Join(t.TempDir(), "data")
	s := startEndpointStack(t, map[string]string{"DATA_DIR": dir, "HISTORY_SEAL_KEY": base64.StdEncoding.EncodeToString(key)})
	recv := newHookReceiver(t)
	ep := s.createEndpoint(t, recv.srv.URL+"/good")
	var rotated endpointAnswer
	if code := s.call(t, "POST", "/v1/endpoints/"+ep.ID+"/rotate-secret", `{}`, &rotated); code != 200 || rotated.Secret == "" || rotated.Secret == ep.Secret {
		t.Fatalf("rotate = %d %+v", code, rotated)
	}
	id := s.notify(t, ep.ID, 1)
	retrytest.Eventually(t, 20*time.Second, func() bool {
		got, _ := recv.received("/good")
		return got[id]
	}, "the endpoint never got %s", id)
	_, reqs := recv.received("/good")
	if !verifiesWith(rotated.Secret, reqs[0].Header, recv.body(reqs[0])) {
		t.Errorf("the delivery does not verify with the endpoint's secret: %v", reqs[0].Header)
	}

	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("DATA_DIR: %v, %v; want mode 0700", fi.Mode(), err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "history.db*"))
	if len(files) < 2 {
		t.Fatalf("history files: %v, want the database and its log", files)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{ep.Secret, rotated.Secret} {
			if bytes.Contains(raw, []byte(secret)) {
				t.Errorf("%s holds an endpoint's secret in plaintext", filepath.Base(f))
			}
		}
		if fi, _ := os.Stat(f); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", filepath.Base(f), fi.Mode())
		}
	}
}
