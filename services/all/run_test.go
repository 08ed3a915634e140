package all_test

import (
	"testing"

	"github.com/relay-demo/relay/services/all"
	"github.com/relay-demo/relay/webhooks"
)

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
}
