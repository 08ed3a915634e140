package worker

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/relay-demo/relay/services/config"
)

// retiredAllowPrivate is the variable WEBHOOK_ALLOW_CIDRS replaced. It
// turned the address guard off entirely; a deployment that still sets it
// is stopped rather than silently guarded, which would break its
// deliveries, or silently open.
const retiredAllowPrivate = "WEBHOOK_ALLOW_PRIVATE"

// AllowConfig is the address guard's environment, shared by the channels
// that deliver over HTTP (webhook and sms).
type AllowConfig struct {
	AllowCIDRs string `env:"WEBHOOK_ALLOW_CIDRS" help:"a comma-separated list of CIDRs such as 10.1.0.0/16,fd00:1::/64 (empty: none)"`
}

// metadataNets are the networks an allow-list entry may not overlap:
// link-local, where cloud metadata services answer (169.254.169.254 on
// every major cloud), in each form the guard would let reach it.
var metadataNets = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("fe80::/10"),
	// NAT64 of 169.254.0.0/16: the guard lets 64:ff9b::a9fe:a9fe through
	// when 64:ff9b::/96 is allowed.
	netip.MustParsePrefix("64:ff9b::a9fe:0/112"),
	// AWS's instance metadata service over IPv6 lives in unique-local
	// space, not link-local: fd00::/8 must not take it in.
	netip.MustParsePrefix("fd00:ec2::254/128"),
}

// allowList returns the networks the address guard lets through, from
// WEBHOOK_ALLOW_CIDRS as parsed into cfg. It refuses to run while the
// retired WEBHOOK_ALLOW_PRIVATE is set, whatever its value.
func allowList(getenv func(string) string, cfg AllowConfig) ([]netip.Prefix, error) {
	if v := getenv(retiredAllowPrivate); v != "" {
		return nil, fmt.Errorf("configuration: %s=%q is no longer read: it was replaced by WEBHOOK_ALLOW_CIDRS, "+
			"the networks webhooks may reach besides the public internet; for loopback, unset %s and set "+
			"WEBHOOK_ALLOW_CIDRS=127.0.0.0/8,::1/128", retiredAllowPrivate, v, retiredAllowPrivate)
	}
	return ParseAllowCIDRs(cfg.AllowCIDRs)
}

// ParseAllowCIDRs parses the value of WEBHOOK_ALLOW_CIDRS: comma-separated
// CIDRs, such as 127.0.0.0/8,::1/128, that webhooks may reach even though
// they are not on the public internet. Empty means none. It refuses, with
// an error naming the variable, a malformed entry, a single address
// without its prefix length, an IPv4-mapped IPv6 prefix (write the IPv4
// prefix), 0.0.0.0/0 and ::/0, which would turn the guard off, and any
// entry overlapping link-local 169.254.0.0/16 or fe80::/10, or AWS's
// fd00:ec2::254, where cloud metadata services answer.
func ParseAllowCIDRs(s string) ([]netip.Prefix, error) {
	const key = "WEBHOOK_ALLOW_CIDRS"
	invalid := func(format string, args ...any) error {
		return config.Invalid(key, s, "a comma-separated list of CIDRs such as 10.1.0.0/16,fd00:1::/64 ("+fmt.Sprintf(format, args...)+")")
	}
	var out []netip.Prefix
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		p, err := netip.ParsePrefix(entry)
		if err != nil {
			if a, aerr := netip.ParseAddr(entry); aerr == nil && a.Zone() == "" {
				return nil, invalid("%q is an address, not a CIDR: write %s/%d for that one address", entry, a, a.BitLen())
			}
			return nil, invalid("%q is not a CIDR: %v", entry, err)
		}
		p = p.Masked()
		switch {
		case p.Bits() == 0:
			return nil, invalid("%q allows every address, which turns the guard off", entry)
		case p.Addr().Is4In6():
			return nil, invalid("%q is an IPv4-mapped prefix: write the IPv4 prefix", entry)
		}
		for _, m := range metadataNets {
			if p.Overlaps(m) {
				return nil, invalid("%q overlaps %s, where cloud metadata services answer: it may never be allowed", entry, m)
			}
		}
		out = append(out, p)
	}
	return out, nil
}
