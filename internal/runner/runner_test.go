package runner

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/config"
)

// TestStartWithoutManagement checks the management API a process starts
// with, and that it says why it has none when MANAGEMENT_URL is not off:
// a broker moved off port 5672 has its API off 15672 too.
func TestStartWithoutManagement(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		wantMgmt bool
		wantWarn bool
	}{
		{"the default port", map[string]string{"AMQP_URL": "amqp://guest:guest@localhost:5672/"}, true, false},
		{"another port", map[string]string{"AMQP_URL": "amqp://guest:guest@localhost:5673/"}, false, true},
		{"another port, named", map[string]string{"AMQP_URL": "amqp://guest:guest@localhost:5673/", "MANAGEMENT_URL": "http://guest:guest@localhost:15673"}, true, false},
		{"off", map[string]string{"MANAGEMENT_URL": "off"}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b config.Broker
			if err := config.Parse(func(k string) string { return tt.env[k] }, &b); err != nil {
				t.Fatal(err)
			}
			var log bytes.Buffer
			p, err := Start(context.Background(), "worker-test", &log, b, b, channel.Builtin())
			if err != nil {
				t.Fatal(err)
			}
			if got := p.mgmt != nil; got != tt.wantMgmt {
				t.Errorf("management API %v, want one: %v", p.mgmt, tt.wantMgmt)
			}
			warned := strings.Contains(log.String(), "relay does without the management API")
			if warned != tt.wantWarn {
				t.Errorf("warned %v, want %v; log:\n%s", warned, tt.wantWarn, &log)
			}
			if warned && !strings.Contains(log.String(), "Set MANAGEMENT_URL to this broker's management API") {
				t.Errorf("the warning does not say how to name the API; log:\n%s", &log)
			}
		})
	}
}
