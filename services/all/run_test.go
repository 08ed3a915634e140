package all_test

import (
	"testing"

	"github.com/relay-demo/relay/services/all"
	"github.com/relay-demo/relay/services/worker"
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
			if _, err := worker.ParseAllowCIDRs(getenv("WEBHOOK_ALLOW_CIDRS")); err != nil {
				t.Error(err)
			}
		})
	}
}
