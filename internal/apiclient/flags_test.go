package apiclient

import (
	"bytes"
	"strings"
	"testing"
)

func TestToken(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		want     string
		warnings bool
	}{
		{"none", nil, "", false},
		{"the API's variable", map[string]string{"API_TOKENS": "first-token-0123456789"}, "first-token-0123456789", false},
		{"its first entry", map[string]string{"API_TOKENS": " , first-token-0123456789, second-token-0123456789"}, "first-token-0123456789", false},
		{"ahead of the retired one", map[string]string{"API_TOKENS": "new-token-0123456789", "API_TOKEN": "old-token-0123456789"}, "new-token-0123456789", false},
		{"the retired one, with a warning", map[string]string{"API_TOKEN": "old-token-0123456789"}, "old-token-0123456789", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var warn bytes.Buffer
			if got := Token(func(k string) string { return tt.env[k] }, &warn); got != tt.want {
				t.Errorf("Token = %q, want %q", got, tt.want)
			}
			if got := strings.Contains(warn.String(), "set API_TOKENS"); got != tt.warnings {
				t.Errorf("warning %q, want one: %v", warn.String(), tt.warnings)
			}
		})
	}
}
