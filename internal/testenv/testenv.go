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
// A broker that lacks a delay backend (the delayed-message plugin, RabbitMQ
// 4.3's native delayed retry) is another matter: most brokers do, and a
// missing backend is no broken build, unless the broker was started to run
// that backend's tests. RELAY_EXPECT_BACKENDS says which (Lacks).
//
// The rules themselves are retry/retrytest's (Unavailable, Expects, Lacks),
// so that retry and retrytest stand alone, copied without the rest of
// relay; this package names them for relay's other tests. It is test-only
// code, imported by tests and by the packages that serve them
// (internal/store/storetest).
package testenv

import (
	"testing"

	"github.com/relay-demo/relay/retry/retrytest"
)

// ExpectBackends is the environment variable that names, separated by
// spaces, the delay backends whose tests must run on the broker under test
// ("ttl levels plugin"). make test-compat sets it for each node it starts,
// from deploy/broker.sh backends VERSION: plugin on RabbitMQ 4.0 with the
// delayed-message plugin, native on 4.3.
const ExpectBackends = retrytest.ExpectBackends

// Unavailable ends the test for want of what format and args describe:
// it fails the test when the environment variable CI is exactly "true",
// as .ci/run sets it, and skips it otherwise (retrytest.Unavailable).
func Unavailable(tb testing.TB, format string, args ...any) {
	tb.Helper()
	retrytest.Unavailable(tb, format, args...)
}

// Expects reports whether ExpectBackends names backend: the broker under
// test was started to run that backend's tests.
func Expects(backend string) bool { return retrytest.Expects(backend) }

// Lacks ends the test because the broker under test lacks the delay
// backend it needs: a failure when ExpectBackends names backend, a skip
// otherwise (retrytest.Lacks); make test-compat runs each backend on a
// broker that has it.
func Lacks(tb testing.TB, backend, format string, args ...any) {
	tb.Helper()
	retrytest.Lacks(tb, backend, format, args...)
}

// RefusedAddr is a loopback address that refuses every connection until
// the test ends (retrytest.RefusedAddr).
func RefusedAddr(tb testing.TB) string {
	tb.Helper()
	return retrytest.RefusedAddr(tb)
}
