package webhooks

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"
)

// ErrForbiddenAddress is returned, wrapped, when a webhook would connect to
// an address that is not on the public internet: loopback, private,
// link-local, multicast, documentation and every other special-purpose
// block that is not globally reachable.
var ErrForbiddenAddress = errors.New("forbidden address")

// verdict is what the guard does with an address inside a block.
type verdict int

const (
	// refuse: the block is not globally reachable.
	refuse verdict = iota
	// reachable: the registry marks the block globally reachable. Most
	// such rows carve an exception out of a wider refused block (the
	// anycast addresses in 192.0.0.0/24 and 2001::/23); the others are
	// listed only so the table reads like the registry.
	reachable
	// embedded: the block carries an IPv4 address in its last 32 bits,
	// which is the address that is reached, so it is the one judged.
	embedded
)

// block is one row of the special-purpose address table.
type block struct {
	prefix  netip.Prefix
	reason  string // what the block is, as an error message says it
	source  string // the RFC that assigns it
	verdict verdict
}

// blocks is the IANA IPv4 and IPv6 Special-Purpose Address Registries
// (https://www.iana.org/assignments/iana-ipv4-special-registry/,
// https://www.iana.org/assignments/iana-ipv6-special-registry/), row for
// row, plus multicast and the IPv6 space outside global unicast, which
// those registries leave to others. An address in no row is allowed. The
// most specific row containing an address decides, so a globally
// reachable sub-block wins over the refused block around it.
//
// Two rows are a choice rather than a copy of the registry, which says
// "N/A" for them: 192.88.99.0/24 and 2002::/16 (6to4) are refused outright.
// A 6to4 address is delivered through a relay to the IPv4 address embedded
// in it, inside a network the guard cannot see, and no receiver worth
// reaching is addressed that way today; judging the embedded IPv4 address,
// as for NAT64, would keep a dead transition mechanism alive for nothing.
// Teredo (2001::/32, also "N/A") is refused with the rest of 2001::/23.
var blocks = []block{
	// IPv4 Special-Purpose Address Registry.
	{netip.MustParsePrefix("0.0.0.0/8"), "this network", "RFC 791", refuse},
	{netip.MustParsePrefix("0.0.0.0/32"), "unspecified", "RFC 1122", refuse},
	{netip.MustParsePrefix("10.0.0.0/8"), "private", "RFC 1918", refuse},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared address space", "RFC 6598", refuse},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback", "RFC 1122", refuse},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local", "RFC 3927", refuse},
	{netip.MustParsePrefix("172.16.0.0/12"), "private", "RFC 1918", refuse},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments", "RFC 6890", refuse},
	{netip.MustParsePrefix("192.0.0.0/29"), "IPv4 service continuity", "RFC 7335", refuse},
	{netip.MustParsePrefix("192.0.0.8/32"), "IPv4 dummy address", "RFC 7600", refuse},
	{netip.MustParsePrefix("192.0.0.9/32"), "PCP anycast", "RFC 7723", reachable},
	{netip.MustParsePrefix("192.0.0.10/32"), "TURN anycast", "RFC 8155", reachable},
	{netip.MustParsePrefix("192.0.0.170/31"), "NAT64/DNS64 discovery", "RFC 8880", refuse},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation", "RFC 5737", refuse},
	{netip.MustParsePrefix("192.31.196.0/24"), "AS112", "RFC 7535", reachable},
	{netip.MustParsePrefix("192.52.193.0/24"), "AMT", "RFC 7450", reachable},
	{netip.MustParsePrefix("192.88.99.0/24"), "deprecated 6to4 relay anycast", "RFC 7526", refuse},
	{netip.MustParsePrefix("192.168.0.0/16"), "private", "RFC 1918", refuse},
	{netip.MustParsePrefix("192.175.48.0/24"), "AS112 direct delegation", "RFC 7534", reachable},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking", "RFC 2544", refuse},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation", "RFC 5737", refuse},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation", "RFC 5737", refuse},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved", "RFC 1112", refuse},
	{netip.MustParsePrefix("255.255.255.255/32"), "limited broadcast", "RFC 919", refuse},
	// IPv4 multicast, from its own registry: never a single receiver.
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast", "RFC 5771", refuse},

	// IPv6 Special-Purpose Address Registry. ::ffff:0:0/96 (IPv4-mapped,
	// RFC 4291) has no row: such an address is unmapped and judged by the
	// IPv4 rows above.
	{netip.MustParsePrefix("::/128"), "unspecified", "RFC 4291", refuse},
	{netip.MustParsePrefix("::1/128"), "loopback", "RFC 4291", refuse},
	{netip.MustParsePrefix("64:ff9b::/96"), "NAT64", "RFC 6052", embedded},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64", "RFC 8215", refuse},
	{netip.MustParsePrefix("100::/64"), "discard-only", "RFC 6666", refuse},
	{netip.MustParsePrefix("100:0:0:1::/64"), "dummy prefix", "RFC 9780", refuse},
	{netip.MustParsePrefix("2001::/23"), "IETF protocol assignments", "RFC 2928", refuse},
	{netip.MustParsePrefix("2001::/32"), "Teredo", "RFC 4380", refuse},
	{netip.MustParsePrefix("2001:1::1/128"), "PCP anycast", "RFC 7723", reachable},
	{netip.MustParsePrefix("2001:1::2/128"), "TURN anycast", "RFC 8155", reachable},
	{netip.MustParsePrefix("2001:1::3/128"), "DNS-SD SRP anycast", "RFC 9665", reachable},
	{netip.MustParsePrefix("2001:2::/48"), "benchmarking", "RFC 5180", refuse},
	{netip.MustParsePrefix("2001:3::/32"), "AMT", "RFC 7450", reachable},
	{netip.MustParsePrefix("2001:4:112::/48"), "AS112", "RFC 7535", reachable},
	{netip.MustParsePrefix("2001:10::/28"), "deprecated ORCHID", "RFC 4843", refuse},
	{netip.MustParsePrefix("2001:20::/28"), "ORCHIDv2", "RFC 7343", reachable},
	{netip.MustParsePrefix("2001:30::/28"), "drone remote ID", "RFC 9374", reachable},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation", "RFC 3849", refuse},
	{netip.MustParsePrefix("2002::/16"), "6to4", "RFC 3056", refuse},
	{netip.MustParsePrefix("2620:4f:8000::/48"), "AS112 direct delegation", "RFC 7534", reachable},
	{netip.MustParsePrefix("3fff::/20"), "documentation", "RFC 9637", refuse},
	{netip.MustParsePrefix("5f00::/16"), "SRv6 SIDs", "RFC 9602", refuse},
	{netip.MustParsePrefix("fc00::/7"), "unique local", "RFC 4193", refuse},
	{netip.MustParsePrefix("fe80::/10"), "link-local", "RFC 4291", refuse},
	// From the IPv6 Address Space registry
	// (https://www.iana.org/assignments/ipv6-address-space/): deprecated
	// blocks that hosts and routers may still treat specially, multicast
	// (link- and interface-local scopes included), and everything outside
	// 2000::/3, the only block allocated for global unicast. The rows
	// above that lie outside 2000::/3 are more specific, so they still
	// decide, and give the more precise reason.
	{netip.MustParsePrefix("::/96"), "deprecated IPv4-compatible", "RFC 4291", refuse},
	{netip.MustParsePrefix("fec0::/10"), "deprecated site-local", "RFC 3879", refuse},
	{netip.MustParsePrefix("ff00::/8"), "multicast", "RFC 4291", refuse},
	{netip.MustParsePrefix("::/3"), "not global unicast", "RFC 4291", refuse},
	{netip.MustParsePrefix("4000::/2"), "not global unicast", "RFC 4291", refuse},
	{netip.MustParsePrefix("8000::/1"), "not global unicast", "RFC 4291", refuse},
}

// lookup returns the most specific block containing ip, which must carry
// no zone.
func lookup(ip netip.Addr) (block, bool) {
	var best block
	found := false
	for _, b := range blocks {
		if b.prefix.Contains(ip) && (!found || b.prefix.Bits() > best.prefix.Bits()) {
			best, found = b, true
		}
	}
	return best, found
}

// Guard decides which addresses a webhook may connect to. Its zero value
// refuses every address that is not globally reachable; NewGuard makes one
// that lets chosen networks through as well.
type Guard struct {
	allow []netip.Prefix
}

// NewGuard returns a Guard that lets through any address inside one of the
// allow prefixes, even a special-purpose one. IPv4-mapped prefixes are
// taken as the IPv4 prefixes they map, since addresses are judged in their
// IPv4 form.
func NewGuard(allow []netip.Prefix) Guard {
	g := Guard{allow: make([]netip.Prefix, 0, len(allow))}
	for _, p := range allow {
		if !p.IsValid() {
			continue
		}
		p = p.Masked()
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		g.allow = append(g.allow, p)
	}
	return g
}

// Control is a net.Dialer Control function that refuses to connect a
// webhook to an address the guard does not allow. It runs after name
// resolution, on the very IP being dialled, so a public name that resolves
// (or later rebinds) to 127.0.0.1 is refused as well. Its error wraps
// ErrForbiddenAddress and names the address and the reason.
func (g Guard) Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		// The dialer always passes ip:port; anything else is refused
		// rather than let through unchecked.
		return fmt.Errorf("%w %q: not an ip:port", ErrForbiddenAddress, address)
	}
	if reason := g.reason(ap.Addr()); reason != "" {
		return &forbiddenError{addr: ap.Addr(), reason: reason}
	}
	return nil
}

// forbiddenError is the guard's refusal of an address: it names the
// address, which RedactAddresses can then take out again.
type forbiddenError struct {
	addr   netip.Addr
	reason string
}

func (e *forbiddenError) Error() string {
	return fmt.Sprintf("%v %s (%s)", ErrForbiddenAddress, e.addr, e.reason)
}

func (e *forbiddenError) Unwrap() error { return ErrForbiddenAddress }

// Allowed reports whether a webhook may connect to ip.
func (g Guard) Allowed(ip netip.Addr) bool {
	return g.reason(ip) == ""
}

// GuardControl is the Control function of the zero Guard, which allows
// globally reachable addresses only.
func GuardControl(network, address string, c syscall.RawConn) error {
	return Guard{}.Control(network, address, c)
}

// AllowedAddr reports whether the zero Guard, which allows globally
// reachable addresses only, lets a webhook connect to ip.
func AllowedAddr(ip netip.Addr) bool {
	return Guard{}.Allowed(ip)
}

// reason says why ip is refused, or returns "" if it is allowed.
func (g Guard) reason(ip netip.Addr) string {
	if !ip.IsValid() {
		return "invalid"
	}
	// ::ffff:127.0.0.1 is 127.0.0.1 on the wire, so it is judged in its
	// IPv4 form. A zone only picks the interface of a link-local address,
	// and netip prefixes never contain a zoned address.
	ip = ip.Unmap().WithZone("")
	for _, p := range g.allow {
		if p.Contains(ip) {
			return ""
		}
	}
	b, ok := lookup(ip)
	if !ok {
		return ""
	}
	switch b.verdict {
	case reachable:
		return ""
	case embedded:
		// Behind a NAT64 gateway 64:ff9b::a00:1 reaches 10.0.0.1, so
		// it is allowed exactly when that IPv4 address is.
		a := ip.As16()
		if reason := g.reason(netip.AddrFrom4([4]byte(a[12:]))); reason != "" {
			return b.reason + " of " + reason
		}
		return ""
	}
	return b.reason
}
