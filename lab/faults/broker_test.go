//go:build faults

package faults_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/testenv"
	"github.com/relay-demo/relay/retry"
)

// brokerVersion is the RabbitMQ version of the node deploy/broker.sh runs
// for the tests (RELAY_BROKER, which its run command sets, as make
// test-faults BROKER=4.3 does); empty: the machine's own broker.
func brokerVersion() string { return os.Getenv("RELAY_BROKER") }

// brokerScript is deploy/broker.sh, from the package's directory.
func brokerScript() string {
	p, err := filepath.Abs(filepath.Join("..", "..", "deploy", "broker.sh"))
	if err != nil {
		return filepath.Join("..", "..", "deploy", "broker.sh")
	}
	return p
}

// rabbitmqctl is the command line of rabbitmqctl with args, against the
// node the tests use: deploy/broker.sh's with RELAY_BROKER, else the
// machine's own.
func rabbitmqctl(args ...string) []string {
	if v := brokerVersion(); v != "" {
		return append([]string{brokerScript(), "ctl", v}, args...)
	}
	return append([]string{"rabbitmqctl"}, args...)
}

// needBrokerControl skips a test (fails it under CI=true, as
// testenv.Unavailable does) when this machine cannot control the broker:
// with RabbitMQ's own tools, or for a node deploy/broker.sh runs, with
// that script as root.
func needBrokerControl(t *testing.T) {
	t.Helper()
	if v := brokerVersion(); v != "" {
		if _, err := os.Stat(brokerScript()); err != nil {
			testenv.Unavailable(t, "the fault tests control the RabbitMQ %s node with deploy/broker.sh: %v", v, err)
		}
		if os.Geteuid() != 0 {
			testenv.Unavailable(t, "the fault tests control the RabbitMQ %s node with deploy/broker.sh, which needs root", v)
		}
		return
	}
	for _, tool := range []string{"rabbitmqctl", "rabbitmq-diagnostics"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Unavailable(t, "the fault tests control a local broker with %s: %v", tool, err)
		}
	}
}

// ctl runs one of RabbitMQ's tools, bounded in time.
func ctl(timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// shell quotes a command line for sh.
func shell(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// reachable reports whether the broker takes an AMQP connection now.
func reachable(url string) bool {
	conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(2 * time.Second)})
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// ensureBroker starts the broker's application if it does not answer, and
// waits until it takes connections again. Every test that stops the broker
// has it in a cleanup, so the broker is running when the tests end.
func ensureBroker(t testing.TB, url string) {
	if reachable(url) {
		return
	}
	t.Logf("the broker does not answer: starting its application")
	for range 5 {
		if out, err := ctl(2*time.Minute, rabbitmqctl("start_app")...); err != nil {
			t.Logf("%v (%s)", err, out)
			// A node deploy/broker.sh runs may be down whole: start
			// it again, with its data.
			if v := brokerVersion(); v != "" {
				if out, err := ctl(5*time.Minute, brokerScript(), "start", v); err != nil {
					t.Logf("%v (%s)", err, out)
				}
			}
		}
		if poll(time.Minute, 250*time.Millisecond, func() bool { return reachable(url) }) {
			return
		}
	}
	t.Errorf("the broker at %s did not come back: start it with %s", retry.RedactURL(url), strings.Join(rabbitmqctl("start_app"), " "))
}

// restartBroker stops the broker's application, keeps it down for down,
// and starts it again, then waits until it takes connections. The stop and
// the start run as one detached script, so the start happens even if this
// test process dies in between.
func restartBroker(t *testing.T, url string, down time.Duration) {
	t.Helper()
	script := fmt.Sprintf(`timeout 90 %s
sleep %.1f
for i in 1 2 3 4 5; do
  timeout 120 %s && exit 0
  sleep 2
done
exit 1
`, shell(rabbitmqctl("stop_app")), down.Seconds(), shell(rabbitmqctl("start_app")))
	// Output goes to a file, not a pipe: a pipe would break, and take the
	// script with it, if this process died.
	out, err := os.Create(filepath.Join(t.TempDir(), "restart.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command("sh", "-c", script)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = detached()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if err != nil {
		t.Errorf("restart script: %v\n%s", err, tail(out.Name(), 4<<10))
	}
	if !poll(2*time.Minute, 250*time.Millisecond, func() bool { return reachable(url) }) {
		t.Fatalf("the broker did not take connections within 2 minutes of its restart")
	}
	t.Logf("broker restarted: stopped, down %s, started, back after %s", down, time.Since(start).Round(100*time.Millisecond))
}

// queueDepths lists the messages, ready and unacknowledged, of every queue
// whose name starts with prefix.
func queueDepths(prefix string) (map[string]int, error) {
	out, err := ctl(30*time.Second, rabbitmqctl("list_queues", "-q", "--no-table-headers", "name", "messages")...)
	if err != nil {
		return nil, err
	}
	depths := map[string]int{}
	for _, line := range strings.Split(out, "\n") {
		name, count, ok := strings.Cut(strings.TrimSpace(line), "\t")
		if !ok || !strings.HasPrefix(name, prefix) {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(count))
		if err != nil {
			return nil, fmt.Errorf("list_queues: %q: %w", line, err)
		}
		depths[name] = n
	}
	return depths, nil
}
