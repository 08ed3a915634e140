//go:build cluster

package cluster_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// tee is the test's *testing.T that also keeps the first line of each
// failure, so that the test's last lines say why it failed: the failure's
// own line is far above them, under the logs of three nodes the cleanup
// prints.
type tee struct {
	*testing.T
	mu       sync.Mutex
	failures []string
}

func (t *tee) keep(msg string) {
	line, _, _ := strings.Cut(msg, "\n")
	if len(line) > 400 {
		line = line[:400] + "…"
	}
	t.mu.Lock()
	t.failures = append(t.failures, line)
	t.mu.Unlock()
}

func (t *tee) Fatal(args ...any) {
	t.Helper()
	t.keep(fmt.Sprint(args...))
	t.T.Fatal(args...)
}

func (t *tee) Fatalf(format string, args ...any) {
	t.Helper()
	t.keep(fmt.Sprintf(format, args...))
	t.T.Fatalf(format, args...)
}

func (t *tee) Error(args ...any) {
	t.Helper()
	t.keep(fmt.Sprint(args...))
	t.T.Error(args...)
}

func (t *tee) Errorf(format string, args ...any) {
	t.Helper()
	t.keep(fmt.Sprintf(format, args...))
	t.T.Errorf(format, args...)
}

// summary logs, when the test failed, each failure kept, in order.
func (t *tee) summary() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.Failed() {
		return
	}
	if len(t.failures) == 0 {
		t.Log("failed (see above)")
		return
	}
	for i, f := range t.failures {
		t.Logf("failure %d of %d: %s", i+1, len(t.failures), f)
	}
}
