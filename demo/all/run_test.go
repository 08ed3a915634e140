package all_test

import (
	"strings"
	"testing"

	"github.com/relay-demo/relay/demo/all"
	"github.com/relay-demo/relay/webhooks"
)

// anyPort is the address every test gives relay all to listen on: the
// system chooses a free port as it binds, and the test reads it back from
// the log (ready). A port found free and closed again before relay all
// binds it may be another test's by then.
const anyPort = "127.0.0.1:0"

func TestDemoAllowsLoopbackOnly(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"default", nil, "127.0.0.0/8,::1/128"},
		{"chosen by the environment", map[string]string{"WEBHOOK_ALLOW_CIDRS": "10.1.0.0/16"}, "10.1.0.0/16"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv, _ := all.Demo(func(k string) string { return tt.env[k] })
			if got := getenv("WEBHOOK_ALLOW_CIDRS"); got != tt.want {
				t.Errorf("WEBHOOK_ALLOW_CIDRS = %q, want %q", got, tt.want)
			}
			if got := getenv("WEBHOOK_ALLOW_PRIVATE"); got != "" {
				t.Errorf("WEBHOOK_ALLOW_PRIVATE = %q, want it unset: the workers refuse to start with it", got)
			}
			if _, err := webhooks.ParseAllowList(getenv("WEBHOOK_ALLOW_CIDRS")); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestDemoPointsEveryChannelDownstream checks that the demo's defaults
// point each channel at the flaky downstreams on loopback.
func TestDemoPointsEveryChannelDownstream(t *testing.T) {
	getenv, _ := all.Demo(func(k string) string {
		return map[string]string{"FLAKY_SMTP_ADDR": ":2626", "FLAKY_HTTP_ADDR": ":9191"}[k]
	})
	for k, want := range map[string]string{
		"SMTP_HOST":        "127.0.0.1",
		"SMTP_PORT":        "2626",
		"SMS_URL":          "http://127.0.0.1:9191/webhooks/sms",
		"DEMO_WEBHOOK_URL": "http://127.0.0.1:9191/webhooks/demo",
	} {
		if got := getenv(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	// The SMS gateway has a key of its own, which the worker takes.
	if sms, hook := getenv("SMS_SECRET"), getenv("WEBHOOK_SECRET"); sms == "" || webhooks.SameKey(sms, hook) {
		t.Errorf("SMS_SECRET %q beside WEBHOOK_SECRET %q, want a key of its own", sms, hook)
	}
}

func TestListening(t *testing.T) {
	api := `{"time":"2026-01-02T03:04:05Z","level":"INFO","msg":"listening","service":"api","addr":"127.0.0.1:41001","exchange":"x","auth":"token"}`
	flaky := `{"time":"2026-01-02T03:04:05Z","level":"INFO","msg":"listening","service":"flaky","http_addr":"127.0.0.1:41002","smtp_addr":"127.0.0.1:41003","email_scenario":"healthy","webhook_scenario":"healthy"}`
	again := `{"time":"2026-01-02T03:05:05Z","level":"INFO","msg":"listening","service":"api","addr":"127.0.0.1:41004","exchange":"x","auth":"token"}`
	other := `{"time":"2026-01-02T03:04:05Z","level":"INFO","msg":"listening for nothing","service":"worker","addr":"127.0.0.1:1"}`
	both := all.Addrs{API: "127.0.0.1:41001", FlakyHTTP: "127.0.0.1:41002", FlakySMTP: "127.0.0.1:41003"}
	tests := []struct {
		name   string
		log    []string
		want   all.Addrs
		wantOK bool
	}{
		{"nothing yet", nil, all.Addrs{}, false},
		{"the downstreams alone", []string{flaky, other}, all.Addrs{FlakyHTTP: "127.0.0.1:41002", FlakySMTP: "127.0.0.1:41003"}, false},
		{"both", []string{flaky, "not json", other, api}, both, true},
		{"a restart: the last counts", []string{flaky, api, again}, all.Addrs{API: "127.0.0.1:41004", FlakyHTTP: both.FlakyHTTP, FlakySMTP: both.FlakySMTP}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := all.Listening(strings.Join(tt.log, "\n"))
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("Listening = %+v, %v; want %+v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
