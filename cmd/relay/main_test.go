package main

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/relay-demo/relay/demo/all"
	"github.com/relay-demo/relay/internal/testenv"
)

// asMain, set in a test binary's environment, makes it run relay's main
// with its arguments instead of the tests: the tests below start relay as
// a process of its own, signals and exit code included.
const asMain = "RELAY_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMain) == "1" {
		os.Args = append(os.Args[:1], strings.Fields(os.Getenv("RELAY_TEST_ARGS"))...)
		main()
	}
	os.Exit(m.Run())
}

// relayProcess starts relay with args and env (and nothing else of the
// test's environment but PATH and HOME) as a process of its own.
func relayProcess(t *testing.T, args string, env map[string]string) (cmd *exec.Cmd, stdout, stderr *testenv.Buffer, done <-chan error) {
	t.Helper()
	cmd = exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = []string{asMain + "=1", "RELAY_TEST_ARGS=" + args, "PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stdout, stderr = &testenv.Buffer{}, &testenv.Buffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ch := make(chan error, 1)
	go func() { ch <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-ch
		}
	})
	return cmd, stdout, stderr, ch
}

// brokerNowhere is the environment of a relay all whose broker is never
// reached (nothing listens on its port), on ports the system chooses.
func brokerNowhere(t *testing.T) map[string]string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	return map[string]string{
		"AMQP_URL": "amqp://guest:guest@" + closed + "/", "MANAGEMENT_URL": "off", "DELAY_BACKEND": "ttl",
		"DATA_DIR": t.TempDir(), "HTTP_ADDR": "127.0.0.1:0", "FLAKY_HTTP_ADDR": "127.0.0.1:0", "FLAKY_SMTP_ADDR": "127.0.0.1:0",
	}
}

// exitWithin waits for the process to end within limit and returns its
// exit code.
func exitWithin(t *testing.T, done <-chan error, limit time.Duration, what string, stdout, stderr *testenv.Buffer) int {
	t.Helper()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(limit):
		t.Fatalf("relay all still runs %s after %s; stderr:\n%s\nstdout:\n%s", limit, what, stderr, stdout)
		return -1
	}
}

// TestAllEndsOnSIGTERM starts relay all with a misspelled setting, wants
// a warning about it, waits for relay all to listen, and wants SIGTERM to
// end it within seconds, with exit code 0.
func TestAllEndsOnSIGTERM(t *testing.T) {
	env := brokerNowhere(t)
	env["RETRY_DELAY"] = "5s"
	cmd, stdout, stderr, done := relayProcess(t, "all", env)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, ok := all.Listening(stdout.String()); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("relay all never listened; stderr:\n%s\nstdout:\n%s", stderr, stdout)
		}
		select {
		case err := <-done:
			t.Fatalf("relay all ended before it was stopped (%v); stderr:\n%s\nstdout:\n%s", err, stderr, stdout)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if want := "relay: warning: RETRY_DELAY is set, but relay reads no such variable: did you mean RETRY_DELAYS?"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr:\n%s\nwant %q", stderr, want)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := exitWithin(t, done, 10*time.Second, "SIGTERM", stdout, stderr); code != 0 {
		t.Errorf("relay all exited %d on SIGTERM, want 0; stderr:\n%s", code, stderr)
	}
}

// TestAllRefusesConfigurationAtOnce starts relay all with settings a
// worker refuses and wants it to exit 1 within seconds, with the
// worker's sentence on stderr.
func TestAllRefusesConfigurationAtOnce(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"SMTP_PROVIDERS=2 without SMTP_1_HOST", map[string]string{"SMTP_PROVIDERS": "2"},
			"relay: email: configuration: SMTP_1_HOST is required: SMTP_PROVIDERS=2 names mail servers 1 to 2"},
		{"SMTP_USERNAME with SMTP_TLS=none", map[string]string{"SMTP_USERNAME": "ada", "SMTP_TLS": "none"},
			`relay: email: configuration: SMTP_* / EMAIL_FROM: invalid email config: username is set but tls is "none"`},
		{"SMS_PROVIDERS=1 without SMS_1_URL", map[string]string{"SMS_PROVIDERS": "1"}, "relay: sms: configuration: SMS_1_URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := brokerNowhere(t)
			for k, v := range tt.env {
				env[k] = v
			}
			_, stdout, stderr, done := relayProcess(t, "all", env)
			if code := exitWithin(t, done, 10*time.Second, "its configuration was refused", stdout, stderr); code != 1 {
				t.Errorf("relay all exited %d, want 1", code)
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("stderr:\n%s\nwant %q", stderr, tt.want)
			}
		})
	}
}
