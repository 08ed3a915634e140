package all_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/relay-demo/relay/demo/all"
	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/config"
	"github.com/relay-demo/relay/retry/retrytest"
	"github.com/relay-demo/relay/services/worker"
)

// startupLimit is how long relay all may take to give up on a
// configuration its workers refuse: at once, give or take a loaded machine.
const startupLimit = 10 * time.Second

// PagerPart is the part of a channel the start-up test adds to relay's: a
// channel of one's own with a required URL and no Demo entry, which relay
// all cannot point at its downstreams.
type PagerPart struct {
	Page string `json:"page"`
}

type pagerConfig struct {
	URL string `env:"PAGER_URL,required" help:"an https URL of the pager gateway"`
}

var pager = channel.Define(channel.Spec[PagerPart]{
	Name:    "pager",
	Summary: "page someone, for the start-up test",
	Check: func(p *PagerPart, bad func(field, format string, args ...any)) {
		if p.Page == "" {
			bad("page", "required")
		}
	},
	Recipients: func(p *PagerPart) []string { return []string{p.Page} },
	Schema:     `{"type": "object", "required": ["page"], "additionalProperties": false, "properties": {"page": {"type": "string"}}}`,
	Env:        []any{&pagerConfig{}},
	Open: func(getenv func(string) string, _ channel.Store) (channel.Send[PagerPart], func() error, error) {
		var cfg pagerConfig
		if err := config.Parse(getenv, &cfg); err != nil {
			return nil, nil, err
		}
		return func(context.Context, string, *PagerPart) error { return nil }, func() error { return nil }, nil
	},
})

// closedPort is an address nothing listens on: the broker relay all is
// given is never reached, so only the configuration can end it.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestRunRefusesConfigurationAtOnce starts relay all with each setting a
// worker refuses and wants it to end within seconds with the worker's own
// sentence, the one `relay worker <channel>` alone prints: relay all has
// its downstreams and other services running by then, and each must stop.
func TestRunRefusesConfigurationAtOnce(t *testing.T) {
	tests := []struct {
		name    string
		channel string
		env     map[string]string
		want    string
	}{
		{"a channel without its URL", "pager", nil, "PAGER_URL"},
		{"SMTP_PROVIDERS=2 without SMTP_1_HOST", "email", map[string]string{"SMTP_PROVIDERS": "2"}, "SMTP_1_HOST is required"},
		{"SMTP_USERNAME with SMTP_TLS=none", "email", map[string]string{"SMTP_USERNAME": "ada", "SMTP_PASSWORD": "secret", "SMTP_TLS": "none"}, `tls is "none"`},
		{"SMS_PROVIDERS=1 without SMS_1_URL", "sms", map[string]string{"SMS_PROVIDERS": "1"}, "SMS_1_URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			channels := channel.Builtin()
			if tt.channel == "pager" {
				channels = channels.With(pager)
			}
			env := map[string]string{
				"AMQP_URL": "amqp://guest:guest@" + closedPort(t) + "/", "MANAGEMENT_URL": "off", "DELAY_BACKEND": "ttl",
				"DATA_DIR": t.TempDir(), "HTTP_ADDR": anyPort, "FLAKY_HTTP_ADDR": anyPort, "FLAKY_SMTP_ADDR": anyPort, "METRICS_ADDR": "",
			}
			for k, v := range tt.env {
				env[k] = v
			}
			getenv := func(k string) string { return env[k] }

			// The sentence the worker alone ends with, given what relay
			// all would give it: the demo's settings, with the downstreams
			// on their default ports rather than port 0.
			demo, _ := all.Demo(func(k string) string {
				if strings.HasPrefix(k, "FLAKY_") {
					return ""
				}
				return env[k]
			})
			alone := worker.RunWith(t.Context(), channels, tt.channel, demo, &strings.Builder{})
			if alone == nil || !strings.Contains(alone.Error(), tt.want) {
				t.Fatalf("relay worker %s alone: %v, want an error naming %s", tt.channel, alone, tt.want)
			}

			logs := &retrytest.Buffer{}
			done := make(chan error, 1)
			go func() { done <- all.RunWith(t.Context(), channels, getenv, logs) }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), alone.Error()) {
					t.Errorf("relay all = %v, want %q", err, alone)
				}
			case <-time.After(startupLimit):
				t.Fatalf("relay all still runs %s after its %s worker refused its configuration (%v); log:\n%s",
					startupLimit, tt.channel, alone, logs)
			}
		})
	}
}

// TestRunEndsWhenAPortIsTaken starts relay all with each of its ports
// held by another program and wants it to end within seconds, naming the
// address.
func TestRunEndsWhenAPortIsTaken(t *testing.T) {
	for _, variable := range []string{"HTTP_ADDR", "FLAKY_HTTP_ADDR", "FLAKY_SMTP_ADDR"} {
		t.Run(variable, func(t *testing.T) {
			held, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer held.Close()
			env := map[string]string{
				"AMQP_URL": "amqp://guest:guest@" + closedPort(t) + "/", "MANAGEMENT_URL": "off", "DELAY_BACKEND": "ttl",
				"DATA_DIR": t.TempDir(), "HTTP_ADDR": anyPort, "FLAKY_HTTP_ADDR": anyPort, "FLAKY_SMTP_ADDR": anyPort,
			}
			env[variable] = held.Addr().String()
			logs := &retrytest.Buffer{}
			done := make(chan error, 1)
			go func() { done <- all.Run(t.Context(), func(k string) string { return env[k] }, logs) }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), held.Addr().String()) {
					t.Errorf("relay all = %v, want an error naming %s", err, held.Addr())
				}
			case <-time.After(startupLimit):
				t.Fatalf("relay all still runs %s after finding %s taken; log:\n%s", startupLimit, held.Addr(), logs)
			}
		})
	}
}
