package channel

import (
	"strings"
	"testing"
)

func TestAllowListNamesTheVariable(t *testing.T) {
	getenv := func(string) string { return "" }
	_, err := allowList(getenv, AllowConfig{AllowCIDRs: "127.0.0.0/8,localhost"})
	if err == nil {
		t.Fatal("allowList accepted a host name as a CIDR")
	}
	for _, want := range []string{"WEBHOOK_ALLOW_CIDRS", `"localhost" is not a CIDR`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("allowList error = %q, want it to contain %q", err, want)
		}
	}
}

func TestAllowListRetiredVariable(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		wantErr bool
	}{
		{"neither set", nil, false},
		{"allow-list only", map[string]string{"WEBHOOK_ALLOW_CIDRS": "127.0.0.0/8"}, false},
		{"retired true", map[string]string{"WEBHOOK_ALLOW_PRIVATE": "true"}, true},
		{"retired false", map[string]string{"WEBHOOK_ALLOW_PRIVATE": "false"}, true},
		{"retired beside the allow-list", map[string]string{"WEBHOOK_ALLOW_PRIVATE": "true", "WEBHOOK_ALLOW_CIDRS": "127.0.0.0/8"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string { return tt.env[k] }
			_, err := allowList(getenv, AllowConfig{AllowCIDRs: getenv("WEBHOOK_ALLOW_CIDRS")})
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("allowList = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("allowList = nil, want an error")
			}
			for _, want := range []string{"WEBHOOK_ALLOW_PRIVATE", "replaced by WEBHOOK_ALLOW_CIDRS", "WEBHOOK_ALLOW_CIDRS=127.0.0.0/8,::1/128"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("allowList error = %q, want it to contain %q", err, want)
				}
			}
		})
	}
}
