package channel

import (
	"bytes"
	"encoding/base64"
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

// TestSignerSecret checks that WEBHOOK_SECRET must be a whsec_ secret of at
// least 24 bytes, and that the error names the variable without quoting
// the secret.
func TestSignerSecret(t *testing.T) {
	key := func(n int) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0x5c}, n)) }
	tests := []struct {
		name, secret string
		want         string // in the error; "" for none
	}{
		{"32 bytes", "whsec_" + key(32), ""},
		{"24 bytes", "whsec_" + key(24), ""},
		{"23 bytes", "whsec_" + key(23), "the key is 23 bytes"},
		{"bare base64", key(32), "no whsec_ prefix"},
		{"not base64", "whsec_" + key(30) + "!!", "illegal base64"},
		{"empty", "", "no whsec_ prefix"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := signer(tt.secret)
			if tt.want == "" {
				if err != nil || s == nil {
					t.Fatalf("signer = %v, %v; want a Signer", s, err)
				}
				return
			}
			if err == nil {
				t.Fatal("signer accepted the secret")
			}
			for _, w := range []string{`WEBHOOK_SECRET="***" is not valid`, "24 bytes or more", tt.want} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("signer error = %q, want it to contain %q", err, w)
				}
			}
			if k := strings.TrimPrefix(tt.secret, "whsec_"); k != "" && strings.Contains(err.Error(), k) {
				t.Errorf("signer error quotes the secret: %v", err)
			}
		})
	}
}
