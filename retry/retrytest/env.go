package retrytest

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
)

// ExpectBackends is the environment variable that names, separated by
// spaces, the delay backends whose tests must run on the broker under test
// ("ttl levels plugin"): a broker started to run a backend's tests that
// turns out to lack it fails them (Lacks) instead of skipping them.
const ExpectBackends = "RELAY_EXPECT_BACKENDS"

// Unavailable ends the test for want of what format and args describe (a
// broker, its management API, a database): it fails the test when the
// environment variable CI is exactly "true", and skips it otherwise. In CI
// a missing piece is a broken build, never a quiet pass. The message
// should say what is missing and, for a skip, how to provide it.
func Unavailable(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatalf(format+" (CI=true: in CI this is a failure, not a skip)", args...)
	}
	tb.Skipf(format, args...)
}

// Expects reports whether ExpectBackends names backend: the broker under
// test was started to run that backend's tests.
func Expects(backend string) bool {
	return slices.Contains(strings.Fields(os.Getenv(ExpectBackends)), backend)
}

// Lacks ends the test because the broker under test lacks the delay
// backend it needs, as format and args describe: it fails the test when
// ExpectBackends names backend, since the broker was started to run it and
// a node of the wrong version or without its plugin must not pass as a
// skip; otherwise it skips it, under CI=true too, saying that this broker
// runs no such cell.
func Lacks(tb testing.TB, backend, format string, args ...any) {
	tb.Helper()
	expect := os.Getenv(ExpectBackends)
	if Expects(backend) {
		tb.Fatalf(format+" (%s=%q: this broker must run the %s backend's tests, so this is a failure, not a skip)",
			append(args, ExpectBackends, expect, backend)...)
	}
	tb.Skipf(format+" (%s=%q does not name %s: this broker runs no %s cell)",
		append(args, ExpectBackends, expect, backend, backend)...)
}

// Buffer is a bytes.Buffer safe for concurrent writers: a pipeline's log
// or a process's output that a test reads while it runs.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
