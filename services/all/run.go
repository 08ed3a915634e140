// Package all is `relay all`: every relay service in one process, wired
// to each other for the local demo. The webhook and email workers deliver
// to the flaky downstreams running beside them.
package all

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/config"
	"github.com/relay-demo/relay/internal/runner"
	"github.com/relay-demo/relay/services/api"
	"github.com/relay-demo/relay/services/flaky"
	"github.com/relay-demo/relay/services/retrier"
	"github.com/relay-demo/relay/services/worker"
)

// Demo fills in what the environment leaves unset so the services find
// each other: the workers deliver to the flaky downstreams on loopback
// (DemoAllowCIDRs, for the demo only), one webhook secret is shared by the
// sender and the receiver, and a fresh API token is made. It returns the
// getenv the services read and the token, if one was made.
func Demo(getenv func(string) string) (func(string) string, string) {
	smtpAddr := or(getenv("FLAKY_SMTP_ADDR"), ":2525")
	_, smtpPort, _ := net.SplitHostPort(smtpAddr)
	httpAddr := or(getenv("FLAKY_HTTP_ADDR"), ":9090")
	_, httpPort, _ := net.SplitHostPort(httpAddr)
	defaults := map[string]string{
		"WEBHOOK_SECRET":         "whsec_" + base64.StdEncoding.EncodeToString(random(32)),
		"FLAKY_EMAIL_SCENARIO":   "flaky",
		"FLAKY_WEBHOOK_SCENARIO": "flaky",
		"DEMO_WEBHOOK_URL":       "http://127.0.0.1:" + httpPort + "/webhooks/demo",
	}
	// Each channel says what points it at the flaky downstreams.
	down := channel.Downstreams{SMTPHost: "127.0.0.1", SMTPPort: smtpPort, HTTP: "http://127.0.0.1:" + httpPort}
	for _, c := range channel.All() {
		maps.Copy(defaults, c.Demo(down))
	}
	token := ""
	if getenv("API_TOKENS") == "" && getenv("API_AUTH") != "off" {
		token = "demo-" + hex.EncodeToString(random(16))
		defaults["API_TOKENS"] = token
	}
	return func(k string) string { return or(getenv(k), defaults[k]) }, token
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func random(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// Run starts every service and stops them all when ctx is done or when
// any of them fails.
func Run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	getenv, token := Demo(getenv)
	out := &lockedWriter{w: stdout}
	log := config.Logger(out, "all")
	if token != "" {
		log.Info("demo API token (set API_TOKENS to choose your own)", "token", token)
	}
	if allow := getenv("WEBHOOK_ALLOW_CIDRS"); allow == channel.DemoAllowCIDRs {
		log.Warn("webhook targets on loopback are allowed, so the workers reach the flaky downstreams: this is the demo setting, never a production one",
			"webhook_allow_cidrs", allow)
	} else {
		log.Warn("webhook targets inside WEBHOOK_ALLOW_CIDRS are allowed besides the public internet", "webhook_allow_cidrs", allow)
	}
	// One registry for every service: the API's /metrics serves it all.
	ctx = runner.WithTelemetry(ctx, runner.NewTelemetry())
	g, ctx := errgroup.WithContext(ctx)
	services := map[string]func(context.Context, func(string) string, io.Writer) error{
		"flaky":   flaky.Run,
		"retrier": retrier.Run,
		"api":     api.Run,
	}
	// A worker for every channel.
	for _, c := range worker.Channels() {
		name := c.Name
		services[name] = func(ctx context.Context, g func(string) string, w io.Writer) error {
			return worker.Run(ctx, name, g, w)
		}
	}
	for name, run := range services {
		g.Go(func() error {
			if err := run(ctx, getenv, out); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// lockedWriter lets the services share one stdout without interleaving
// their log lines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
