//go:build integration

package deploy

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/relay-demo/relay/retry/retrytest"
)

// runDemo runs deploy/demo.sh with env added to the environment and
// returns its combined output and exit error.
func runDemo(t *testing.T, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", "deploy/demo.sh")
	cmd.Dir = repoRoot
	cmd.Env = append(cmd.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestDemoRefusesATakenPort checks that make demo says so when another
// program holds a port relay would listen on, the API's or a fake
// downstream's, instead of reporting relay up and then failing with that
// program's answers.
func TestDemoRefusesATakenPort(t *testing.T) {
	for _, variable := range []string{"HTTP_ADDR", "FLAKY_HTTP_ADDR", "FLAKY_SMTP_ADDR"} {
		t.Run(variable, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
			env := map[string]string{
				"AMQP_URL": retrytest.URL(t), "HTTP_ADDR": ":" + freeLoopbackPort(t),
				"FLAKY_HTTP_ADDR": ":" + freeLoopbackPort(t), "FLAKY_SMTP_ADDR": ":" + freeLoopbackPort(t),
				"FLAKY_BACKUP_HTTP_ADDR": "127.0.0.1:" + freeLoopbackPort(t), "FLAKY_BACKUP_SMTP_ADDR": "127.0.0.1:" + freeLoopbackPort(t),
			}
			env[variable] = ":" + port
			var list []string
			for k, v := range env {
				list = append(list, k+"="+v)
			}
			out, err := runDemo(t, list...)
			if err == nil {
				t.Fatalf("demo.sh succeeded with port %s (%s) taken:\n%s", port, variable, out)
			}
			for _, want := range []string{"port " + port + " is taken by another program", variable + "="} {
				if !strings.Contains(out, want) {
					t.Errorf("demo.sh said:\n%s\nwant %q", out, want)
				}
			}
			if strings.Contains(out, "relay is up") {
				t.Errorf("demo.sh said relay is up:\n%s", out)
			}
		})
	}
}

// TestDemoLeavesAnotherPortAlone gives make demo a local broker port
// nothing listens on, a mistyped one: it must say what it found and how
// to point it elsewhere, and not start the local rabbitmq-server, which
// would listen on 5672 and not answer there. A rabbitmq-server first on
// PATH records whether it was started.
func TestDemoLeavesAnotherPortAlone(t *testing.T) {
	bin := t.TempDir()
	started := filepath.Join(bin, "started")
	stub := "#!/bin/sh\ntouch " + started + "\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bin, "rabbitmq-server"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	port := freeLoopbackPort(t)
	out, err := runDemo(t, "AMQP_URL=amqp://guest:guest@localhost:"+port+"/", "HTTP_ADDR=:0",
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	if err == nil {
		t.Fatalf("demo.sh succeeded without a broker:\n%s", out)
	}
	if _, err := os.Stat(started); err == nil {
		t.Errorf("demo.sh started rabbitmq-server for port %s:\n%s", port, out)
	}
	for _, want := range []string{"no RabbitMQ broker on 127.0.0.1:" + port, "set AMQP_URL", "only for the default port, 5672"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo.sh said:\n%s\nwant it to mention %q", out, want)
		}
	}
}

// TestDemoSaysHowToGetABroker checks the one-line advice when no broker
// answers at AMQP_URL and none can be started there.
func TestDemoSaysHowToGetABroker(t *testing.T) {
	out, err := runDemo(t, "AMQP_URL=amqp://guest:guest@127.0.0.2:1/", "HTTP_ADDR=:0")
	if err == nil {
		t.Fatalf("demo.sh succeeded without a broker:\n%s", out)
	}
	for _, want := range []string{"no RabbitMQ broker on 127.0.0.2:1", "rabbitmq-server", "docker compose up"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo.sh said:\n%s\nwant it to mention %q", out, want)
		}
	}
}
