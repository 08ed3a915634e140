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

	"github.com/relay-demo/relay/demo/flaky"
	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/config"
	"github.com/relay-demo/relay/internal/runner"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/services/api"
	"github.com/relay-demo/relay/services/retrier"
	"github.com/relay-demo/relay/services/worker"
)

// Demo fills in what the environment leaves unset so the services find
// each other: the workers deliver to the flaky downstreams on loopback
// (DemoAllowCIDRs, for the demo only), one webhook secret and the SMS
// gateway's own secret are shared by the senders and the receivers, and a
// fresh API token is made. It returns the getenv the services read and the
// token, if one was made. The downstreams are taken to listen where the
// environment says (FLAKY_HTTP_ADDR, FLAKY_SMTP_ADDR); Run points the
// workers at the ports they got, which the system chooses for an address
// at port 0. The channels are relay's own (channel.Builtin).
func Demo(getenv func(string) string) (func(string) string, string) {
	getenv, token := demo(getenv)
	return downstreams(channel.Builtin(), getenv, flakyPort(getenv("FLAKY_HTTP_ADDR"), ":9090"), flakyPort(getenv("FLAKY_SMTP_ADDR"), ":2525")), token
}

// demo fills in what the flaky downstreams and the workers share, and
// the API token, and returns the token it made, if any.
func demo(getenv func(string) string) (func(string) string, string) {
	defaults := map[string]string{
		"WEBHOOK_SECRET":         "whsec_" + base64.StdEncoding.EncodeToString(random(32)),
		"SMS_SECRET":             "whsec_" + base64.StdEncoding.EncodeToString(random(32)),
		"FLAKY_EMAIL_SCENARIO":   "flaky",
		"FLAKY_WEBHOOK_SCENARIO": "flaky",
	}
	token := ""
	if getenv("API_TOKENS") == "" && getenv("API_AUTH") != "off" {
		token = "demo-" + hex.EncodeToString(random(16))
		defaults["API_TOKENS"] = token
	}
	return func(k string) string { return or(getenv(k), defaults[k]) }, token
}

// downstreams points each channel of channels, where the environment
// leaves it unset, at the flaky downstreams on loopback: the webhook
// receiver on httpPort, the SMTP server on smtpPort.
func downstreams(channels channel.Set, getenv func(string) string, httpPort, smtpPort string) func(string) string {
	defaults := map[string]string{"DEMO_WEBHOOK_URL": "http://127.0.0.1:" + httpPort + "/webhooks/demo"}
	// Each channel says what points it at the flaky downstreams.
	down := channel.Downstreams{SMTPHost: "127.0.0.1", SMTPPort: smtpPort, HTTP: "http://127.0.0.1:" + httpPort}
	for _, c := range channels.All() {
		maps.Copy(defaults, c.Demo(down))
	}
	return func(k string) string { return or(getenv(k), defaults[k]) }
}

// flakyPort is the port of addr, or of def when addr is empty.
func flakyPort(addr, def string) string {
	_, port, _ := net.SplitHostPort(or(addr, def))
	return port
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
// any of them fails. HTTP_ADDR, FLAKY_HTTP_ADDR and FLAKY_SMTP_ADDR may
// name port 0: the system chooses the ports, the workers are pointed at
// the downstreams' and the "listening" lines of the log say which they
// are (Listening reads them). The channels are relay's own
// (channel.Builtin).
func Run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	return RunWith(ctx, channel.Builtin(), getenv, stdout)
}

// RunWith is Run for the channels of channels, one worker each: a
// program that embeds relay with channels of its own, or a test. Every
// service is given the same channels.
func RunWith(ctx context.Context, channels channel.Set, getenv func(string) string, stdout io.Writer) error {
	getenv, token := demo(getenv)
	out := &lockedWriter{w: stdout}
	log := config.Logger(out, "all")
	if token != "" {
		log.Info("demo API token (set API_TOKENS to choose your own)", "token", token)
	}
	// One registry for every service: the API's /metrics serves it all.
	ctx = runner.WithTelemetry(ctx, runner.NewTelemetry())
	// One history store for every service: the API opens it as it starts,
	// and the workers use the API's.
	var sc config.Store
	if err := config.Parse(getenv, &sc); err != nil {
		return err
	}
	st := sc.Lazy(store.WithReseal())
	defer st.Close()
	ctx = runner.WithStore(ctx, st)
	g, ctx := errgroup.WithContext(ctx)
	// The flaky downstreams first: the workers are pointed at the ports
	// they got.
	down, err := flaky.Listen(ctx, getenv, out)
	if err != nil {
		return fmt.Errorf("flaky: %w", err)
	}
	g.Go(func() error {
		if err := down.Wait(); err != nil {
			return fmt.Errorf("flaky: %w", err)
		}
		return nil
	})
	getenv = downstreams(channels, getenv, flakyPort(down.HTTPAddr(), ""), flakyPort(down.SMTPAddr(), ""))
	if allow := getenv("WEBHOOK_ALLOW_CIDRS"); allow == channel.DemoAllowCIDRs {
		log.Warn("webhook targets on loopback are allowed, so the workers reach the flaky downstreams: this is the demo setting, never a production one",
			"webhook_allow_cidrs", allow)
	} else {
		log.Warn("webhook targets inside WEBHOOK_ALLOW_CIDRS are allowed besides the public internet", "webhook_allow_cidrs", allow)
	}
	services := map[string]func(context.Context, func(string) string, io.Writer) error{
		"retrier": func(ctx context.Context, g func(string) string, w io.Writer) error {
			return retrier.RunWith(ctx, channels, g, w)
		},
		"api": func(ctx context.Context, g func(string) string, w io.Writer) error {
			return api.RunWith(ctx, channels, g, w)
		},
	}
	// A worker for every channel.
	for _, name := range channels.Names() {
		services[name] = func(ctx context.Context, g func(string) string, w io.Writer) error {
			return worker.RunWith(ctx, channels, name, g, w)
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
