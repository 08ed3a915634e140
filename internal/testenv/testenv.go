// Package testenv holds the one rule the project's tests follow when a
// machine lacks something they need (a RabbitMQ broker, PostgreSQL,
// Chromium, a shell, root, a tool): the test is skipped, except under
// CI=true, where it fails. .ci/run sets CI=true and provides all of it, so
// there a missing piece is a broken build, never a quiet pass.
//
// It also holds the one address a test may name before anything listens
// on it: RefusedAddr, where nothing ever will. Every other port a test
// needs is one a listener already holds (127.0.0.1:0, handed to what
// serves, or read back from the process that bound it): a port found free
// and closed again may be taken by another test before it is bound.
//
// It is test-only code, imported by tests and by the packages that
// serve them (retry/retrytest, internal/history/historytest).
package testenv

import (
	"os"
	"testing"
)

// Unavailable ends the test for want of what format and args describe:
// it fails the test when the environment variable CI is exactly "true",
// as .ci/run sets it, and skips it otherwise. The message should say what
// is missing and, for a skip, how to provide it.
func Unavailable(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatalf(format+" (CI=true: in CI this is a failure, not a skip)", args...)
	}
	tb.Skipf(format, args...)
}
