package webhooks

import (
	"fmt"
	"net/netip"
	"strings"
)

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

// ParseAllowList parses a comma-separated list of CIDRs, such as
// 127.0.0.0/8,::1/128, that webhooks may reach although they are not on
// the public internet (Config.Allow). Empty means none. It refuses a
// malformed entry, a single address without its prefix length, an
// IPv4-mapped IPv6 prefix (write the IPv4 prefix), 0.0.0.0/0 and ::/0,
// which would turn the guard off, and any entry overlapping link-local
// 169.254.0.0/16 or fe80::/10, or AWS's fd00:ec2::254, where cloud
// metadata services answer.
func ParseAllowList(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		p, err := netip.ParsePrefix(entry)
		if err != nil {
			if a, aerr := netip.ParseAddr(entry); aerr == nil && a.Zone() == "" {
				return nil, fmt.Errorf("%q is an address, not a CIDR: write %s/%d for that one address", entry, a, a.BitLen())
			}
			return nil, fmt.Errorf("%q is not a CIDR: %v", entry, err)
		}
		p = p.Masked()
		switch {
		case p.Bits() == 0:
			return nil, fmt.Errorf("%q allows every address, which turns the guard off", entry)
		case p.Addr().Is4In6():
			return nil, fmt.Errorf("%q is an IPv4-mapped prefix: write the IPv4 prefix", entry)
		}
		for _, m := range metadataNets {
			if p.Overlaps(m) {
				return nil, fmt.Errorf("%q overlaps %s, where cloud metadata services answer: it may never be allowed", entry, m)
			}
		}
		out = append(out, p)
	}
	return out, nil
}
