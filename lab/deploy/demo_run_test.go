//go:build integration

package deploy

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// TestDemoDelivers runs make demo's script with its defaults (the delay
// backend auto, classic queues) against the suite's broker, on ports and
// a topology of its own: relay must come up, and every copy of the burst
// end delivered or parked, within the test's two minutes; how soon the
// first delivery came after relay was up is logged. Run against
// each broker relay names (make test-compat), it is the check that the
// default configuration starts there.
func TestDemoDelivers(t *testing.T) {
	url := retrytest.URL(t)
	bin := filepath.Join(t.TempDir(), "relay")
	build := exec.Command("go", "build", "-o", bin, "./cmd/relay")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build relay: %v\n%s", err, out)
	}
	prefix := retrytest.Prefix(t)
	t.Cleanup(func() {
		conn := retrytest.Conn(t)
		// The demo's three channels, by relay's naming (NAME-queue, key NAME).
		var routes []retry.Route
		for _, c := range []string{"email", "webhook", "sms"} {
			routes = append(routes, retry.Route{Queue: c + "-queue", Key: c})
		}
		topo := retry.Topology{Prefix: prefix, Routes: routes}
		for _, b := range []retry.Backend{retry.Levels, retry.Plugin, retry.Native} {
			topo.Backend = b
			_ = topo.Delete(conn)
		}
		if ch, err := conn.Channel(); err == nil {
			_, _ = ch.QueueDelete(prefix+"history-queue", false, false, false)
			_ = ch.ExchangeDelete(prefix+"notification-events", false, false)
			ch.Close()
		}
	})
	// demo.sh listens on ports it is told, as a user's would be: ports
	// found free, which another test may take before relay binds them.
	// A run that finds one taken is run again on new ones.
	for attempt := 1; ; attempt++ {
		out, taken := demoBurst(t, url, bin, prefix)
		if !taken {
			return
		}
		if attempt == portAttempts {
			t.Fatalf("a port of the demo's was taken in each of %d runs; the last:\n%s", attempt, out)
		}
		t.Logf("run %d: a port was taken before relay bound it; again on new ports:\n%s", attempt, out)
	}
}

// portAttempts is how many times TestDemoDelivers runs the demo when
// another program takes a port it was given.
const portAttempts = 3

// portTaken matches what demo.sh and relay say of a port another program
// holds.
var portTaken = regexp.MustCompile(`is taken by another program|address already in use`)

// demoBurst runs demo.sh once on ports of its own, checks its burst, and
// stops it. When it ended early because a port was taken, it returns its
// output and true, and fails nothing.
func demoBurst(t *testing.T, url, bin, prefix string) (string, bool) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("bash", "deploy/demo.sh")
	cmd.Dir = repoRoot
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(cmd.Environ(), "AMQP_URL="+url, "RELAY_BIN="+bin, "DEMO_LOG="+filepath.Join(dir, "demo.log"),
		"TOPOLOGY_PREFIX="+prefix, "DATA_DIR="+dir, "DEMO_N=5", "RETRY_DELAYS=200ms,400ms",
		"HTTP_ADDR=127.0.0.1:"+freeLoopbackPort(t), "FLAKY_HTTP_ADDR=127.0.0.1:"+freeLoopbackPort(t), "FLAKY_SMTP_ADDR=127.0.0.1:"+freeLoopbackPort(t),
		"FLAKY_BACKUP_HTTP_ADDR=127.0.0.1:"+freeLoopbackPort(t), "FLAKY_BACKUP_SMTP_ADDR=127.0.0.1:"+freeLoopbackPort(t))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	// Stopped before the next run starts, or the test ends, with a SIGTERM
	// to the whole group as a terminal's Ctrl-C or a service manager sends
	// it: a demo that finished its burst must end with status 0 then, or
	// make demo ends in "make: *** Error 1".
	finished := false
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan error, 1)
		go func() {
			for range lines {
			}
			done <- cmd.Wait()
		}()
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
			err = fmt.Errorf("still running 30s after SIGTERM")
		}
		if finished && err != nil {
			t.Errorf("demo.sh stopped with SIGTERM: %v, want exit status 0", err)
		}
	}()

	var out []string
	var up, firstDelivery time.Duration
	timeout := time.After(2 * time.Minute)
	done := regexp.MustCompile(`^done: (\d+) copies delivered, (\d+) parked$`)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				// relay's log, which says why it stopped, is in the
				// output's tail or in demo.log.
				log, _ := os.ReadFile(filepath.Join(dir, "demo.log"))
				all := strings.Join(out, "\n")
				if up == 0 && (portTaken.MatchString(all) || portTaken.Match(log)) {
					return all, true
				}
				t.Fatalf("demo.sh ended before its burst was done:\n%s", all)
			}
			out = append(out, l)
			switch {
			case strings.HasPrefix(l, "relay is up"):
				up = time.Since(start)
			case firstDelivery == 0 && strings.Contains(l, "delivered"):
				firstDelivery = time.Since(start) - up
			}
			if m := done.FindStringSubmatch(l); m != nil {
				var delivered, parked int
				fmt.Sscan(m[1], &delivered)
				fmt.Sscan(m[2], &parked)
				if delivered+parked == 0 || delivered == 0 {
					t.Errorf("the burst ended with %d delivered, %d parked: want deliveries", delivered, parked)
				}
				t.Logf("RabbitMQ %s: relay up after %s, first delivery %s later; %d delivered, %d parked",
					brokerVersion(url), up.Round(time.Millisecond), firstDelivery.Round(time.Millisecond), delivered, parked)
				finished = true
				return strings.Join(out, "\n"), false
			}
		case <-timeout:
			t.Fatalf("demo.sh did not finish its burst within 2 minutes:\n%s", strings.Join(out, "\n"))
		}
	}
}

// freeLoopbackPort is a loopback port free a moment ago: demo.sh's
// ports, as a user names them; TestDemoDelivers runs the demo again when
// one was taken by the time relay bound it.
func freeLoopbackPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, p, _ := net.SplitHostPort(ln.Addr().String())
	return p
}

func brokerVersion(url string) string {
	v, err := retrytest.Version(url)
	if err != nil {
		return "(unknown)"
	}
	return v
}
