package testenv_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/relay-demo/relay/internal/testenv"
)

// recorder is a testing.TB that records how the test ended. Like a real
// one, its Fatalf and Skipf stop the goroutine that calls them; any other
// method, which Unavailable must not need, panics on the nil TB inside.
type recorder struct {
	testing.TB
	fatal, skip []string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = append(r.fatal, fmt.Sprintf(format, args...))
	runtime.Goexit()
}

func (r *recorder) Skipf(format string, args ...any) {
	r.skip = append(r.skip, fmt.Sprintf(format, args...))
	runtime.Goexit()
}

// unavailable calls testenv.Unavailable on a recorder (see end).
func unavailable(format string, args ...any) (r *recorder, returned bool) {
	return end(func(tb testing.TB) { testenv.Unavailable(tb, format, args...) })
}

// end calls f on a recorder, in a goroutine of its own as a test runs,
// and reports whether it returned.
func end(f func(testing.TB)) (r *recorder, returned bool) {
	r = &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
		returned = true
	}()
	<-done
	return r, returned
}

// setCI sets CI for the test, or unsets it when unset is true; either way
// it is restored when the test ends.
func setCI(t *testing.T, value string, unset bool) {
	t.Setenv("CI", value)
	if unset {
		os.Unsetenv("CI")
	}
}

func TestUnavailable(t *testing.T) {
	tests := []struct {
		name      string
		ci        string
		unset     bool
		wantFatal bool
	}{
		{name: "CI unset", unset: true},
		{name: "CI empty", ci: ""},
		{name: "CI=false", ci: "false"},
		{name: "CI=1", ci: "1"},
		{name: "CI=TRUE", ci: "TRUE"},
		{name: "CI=true", ci: "true", wantFatal: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setCI(t, tt.ci, tt.unset)
			r, returned := unavailable("no %s on PATH", "zsh")
			if returned {
				t.Fatal("Unavailable returned: the test it ends would have gone on")
			}
			ended, other := r.skip, r.fatal
			if tt.wantFatal {
				ended, other = r.fatal, r.skip
			}
			if len(ended) != 1 || len(other) != 0 {
				t.Fatalf("Fatalf %q, Skipf %q; want one call to Fatalf: %v", r.fatal, r.skip, tt.wantFatal)
			}
			if !strings.HasPrefix(ended[0], "no zsh on PATH") {
				t.Errorf("message %q, want it to start with the one given", ended[0])
			}
			if got := strings.Contains(ended[0], "CI=true"); got != tt.wantFatal {
				t.Errorf("message %q names CI=true: %v, want %v", ended[0], got, tt.wantFatal)
			}
		})
	}
}

// TestRefusedAddr checks that the address refuses connections and that
// no listener can take its port while the test runs.
func TestRefusedAddr(t *testing.T) {
	addr := testenv.RefusedAddr(t)
	if _, err := net.DialTimeout("tcp", addr, 5*time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial %s: %v, want the connection refused", addr, err)
	}
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		return // a port closed a moment ago there
	}
	_, port, _ := net.SplitHostPort(addr)
	for _, host := range []string{"127.0.0.1", ""} {
		if ln, err := net.Listen("tcp", net.JoinHostPort(host, port)); !errors.Is(err, syscall.EADDRINUSE) {
			if err == nil {
				ln.Close()
			}
			t.Errorf("listen on %s's port at %q: %v, want EADDRINUSE", addr, host, err)
		}
	}
}

func TestLacks(t *testing.T) {
	tests := []struct {
		name      string
		expect    string
		unset     bool
		ci        string
		wantFatal bool
	}{
		{name: "unset", unset: true},
		{name: "unset under CI", unset: true, ci: "true"},
		{name: "other backends under CI", expect: "ttl levels native", ci: "true"},
		{name: "a longer name", expect: "ttl plugins"},
		{name: "named", expect: "ttl levels plugin", wantFatal: true},
		{name: "named alone, spaces around", expect: "  plugin ", wantFatal: true},
		{name: "named under CI", expect: "plugin", ci: "true", wantFatal: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setCI(t, tt.ci, false)
			t.Setenv(testenv.ExpectBackends, tt.expect)
			if tt.unset {
				os.Unsetenv(testenv.ExpectBackends)
			}
			if got := testenv.Expects("plugin"); got != tt.wantFatal {
				t.Errorf("Expects(plugin) = %v, want %v", got, tt.wantFatal)
			}
			r, returned := end(func(tb testing.TB) { testenv.Lacks(tb, "plugin", "no %s on the broker", "x-delayed-message") })
			if returned {
				t.Fatal("Lacks returned: the test it ends would have gone on")
			}
			ended, other := r.skip, r.fatal
			if tt.wantFatal {
				ended, other = r.fatal, r.skip
			}
			if len(ended) != 1 || len(other) != 0 {
				t.Fatalf("Fatalf %q, Skipf %q; want one call to Fatalf: %v", r.fatal, r.skip, tt.wantFatal)
			}
			if !strings.HasPrefix(ended[0], "no x-delayed-message on the broker (RELAY_EXPECT_BACKENDS=") {
				t.Errorf("message %q, want it to start with the one given and name the variable", ended[0])
			}
			want := "this broker runs no plugin cell"
			if tt.wantFatal {
				want = "must run the plugin backend's tests"
			}
			if !strings.Contains(ended[0], want) {
				t.Errorf("message %q, want it to say %q", ended[0], want)
			}
		})
	}
}
