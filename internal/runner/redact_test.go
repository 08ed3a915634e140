package runner_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/config"
	"github.com/relay-demo/relay/internal/runner"
	"github.com/relay-demo/relay/internal/testenv"
	"github.com/relay-demo/relay/retry"
)

// TestProcessNeverShowsTheBrokerPassword starts a process as every relay
// service that runs the pipeline does (the retrier and each worker: the
// broker settings parsed, Start, Pipeline, Run) with AMQP_URL values that
// hold a secret, well-formed and not, and checks that neither its log nor
// its error shows it. No broker is needed: a malformed URL fails before
// any dial, and the well-formed one points at a closed port. With
// DELAY_BACKEND=auto the failing probe ends Run; with ttl, a URL that gets
// past the configuration has Run reconnecting, logging each failure,
// until its context ends.
func TestProcessNeverShowsTheBrokerPassword(t *testing.T) {
	urls := []struct {
		name    string
		url     string
		secrets []string
	}{
		{"well-formed", "amqp://guest:s3cr3t-pw@127.0.0.1:1/", []string{"s3cr3t-pw"}},
		{"bad escape", "amqp://guest:s3cr%t@localhost:5672/", []string{"s3cr", "guest:s3cr%t@localhost:5672/"}},
		{"space", "amqp://user:pa ss@host", []string{"pa ss", "user:pa ss@host"}},
		{"no colon after scheme", "amqp//user:secret@host", []string{"secret", "amqp//user"}},
		{"no scheme", "notaurl-secret", []string{"notaurl-secret"}},
	}
	for _, backend := range []string{"auto", "ttl"} {
		for _, u := range urls {
			t.Run(backend+"/"+u.name, func(t *testing.T) {
				t.Parallel()
				env := map[string]string{"AMQP_URL": u.url, "DELAY_BACKEND": backend, "TOPOLOGY_PREFIX": "test.redact."}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				var out testenv.Buffer
				err := run(ctx, func(k string) string { return env[k] }, &out)

				logs := out.String()
				// Either the start fails, the probe or the configuration
				// refusing the URL, or Run keeps dialling until ctx ends.
				if err == nil && !strings.Contains(logs, "reconnecting") {
					t.Fatalf("Run = nil and logged no reconnect attempt: the URL was never used\n%s", logs)
				}
				for _, s := range u.secrets {
					if err != nil && strings.Contains(err.Error(), s) {
						t.Errorf("the error shows %q: %v", s, err)
					}
					if strings.Contains(logs, s) {
						t.Errorf("the log shows %q:\n%s", s, logs)
					}
				}
			})
		}
	}
}

// run is a process running the retry stages, as `relay retrier` does.
func run(ctx context.Context, getenv func(string) string, stdout *testenv.Buffer) error {
	var b config.Broker
	if err := config.Parse(getenv, &b); err != nil {
		return err
	}
	proc, err := runner.Start(ctx, "redact-test", stdout, b, b, channel.Builtin())
	if err != nil {
		return err
	}
	p := proc.Pipeline(retry.Config{StageConcurrency: 1, StagePrefetch: 1, Options: retry.Options{ShutdownTimeout: time.Second}}, nil)
	p.ServeStages()
	return proc.Run(ctx, p)
}
