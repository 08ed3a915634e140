package webhooks

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseAllowList(t *testing.T) {
	prefixes := func(s ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, p := range s {
			out = append(out, netip.MustParsePrefix(p))
		}
		return out
	}
	tests := []struct {
		name    string
		value   string
		want    []netip.Prefix
		wantErr string // "" for no error; else a part of the message
	}{
		{"empty", "", nil, ""},
		{"only commas and spaces", " , ,", nil, ""},
		{"loopback", "127.0.0.0/8,::1/128", prefixes("127.0.0.0/8", "::1/128"), ""},
		{"spaces around entries", " 10.1.0.0/16 , fd00:1::/64 ", prefixes("10.1.0.0/16", "fd00:1::/64"), ""},
		{"compose subnet", "172.28.0.0/24", prefixes("172.28.0.0/24"), ""},
		{"host bits cleared", "10.1.2.3/16", prefixes("10.1.0.0/16"), ""},
		{"trailing comma", "127.0.0.0/8,", prefixes("127.0.0.0/8"), ""},
		{"next to link-local", "169.255.0.0/16,169.253.0.0/16", prefixes("169.255.0.0/16", "169.253.0.0/16"), ""},
		{"nat64 of a private network", "64:ff9b::a00:0/104", prefixes("64:ff9b::a00:0/104"), ""},

		{"malformed", "127.0.0.0/8,localhost", nil, `"localhost" is not a CIDR`},
		{"bad length", "10.0.0.0/33", nil, `"10.0.0.0/33" is not a CIDR`},
		{"address without length", "127.0.0.1", nil, "write 127.0.0.1/32"},
		{"v6 address without length", "::1", nil, "write ::1/128"},
		{"zone", "fe80::%eth0/64", nil, "is not a CIDR"},
		{"everything v4", "0.0.0.0/0", nil, "turns the guard off"},
		{"everything v6", "10.0.0.0/8,::/0", nil, "turns the guard off"},
		{"everything v4, host bits", "10.0.0.0/0", nil, "turns the guard off"},
		{"metadata address", "169.254.169.254/32", nil, "overlaps 169.254.0.0/16, where cloud metadata services answer"},
		{"link-local v4", "169.254.0.0/16", nil, "overlaps 169.254.0.0/16"},
		{"wider than link-local", "169.0.0.0/8", nil, "overlaps 169.254.0.0/16"},
		{"half of v4", "128.0.0.0/1", nil, "overlaps 169.254.0.0/16"},
		{"link-local v6", "fe80::/64", nil, "overlaps fe80::/10"},
		{"wider than link-local v6", "fe00::/7", nil, "overlaps fe80::/10"},
		{"nat64 of metadata", "64:ff9b::/96", nil, "overlaps 64:ff9b::a9fe:0/112"},
		{"aws metadata over ipv6", "fd00::/8", nil, "overlaps fd00:ec2::254/128"},
		{"mapped", "::ffff:127.0.0.0/104", nil, "IPv4-mapped prefix"},
		{"mapped link-local", "::ffff:169.254.0.0/112", nil, "IPv4-mapped prefix"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseAllowList(tt.value)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseAllowList(%q) = %v, want an error containing %q", tt.value, got, tt.wantErr)
				}
				if msg := err.Error(); !strings.Contains(msg, tt.wantErr) {
					t.Errorf("ParseAllowList(%q) error = %q, want it to contain %q", tt.value, msg, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseAllowList(%q) = %v", tt.value, err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Errorf("ParseAllowList(%q) (-want +got):\n%s", tt.value, diff)
			}
		})
	}
}
