package webhooks

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"
)

// ErrForbiddenAddress is returned, wrapped, when a webhook would connect to
// an address inside the service's own network: loopback, private,
// link-local, multicast and the like.
var ErrForbiddenAddress = errors.New("forbidden address")

// GuardControl is a net.Dialer Control function that refuses to connect a
// webhook to an address that is not on the public internet. It runs after
// name resolution, on the very IP being dialled, so a public name that
// resolves (or later rebinds) to 127.0.0.1 is refused as well. Its error
// wraps ErrForbiddenAddress and names the address.
func GuardControl(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		// The dialer always passes ip:port; anything else is refused
		// rather than let through unchecked.
		return fmt.Errorf("%w %q: not an ip:port", ErrForbiddenAddress, address)
	}
	if reason := forbiddenReason(ap.Addr()); reason != "" {
		return fmt.Errorf("%w %s (%s)", ErrForbiddenAddress, ap.Addr(), reason)
	}
	return nil
}

// AllowedAddr reports whether a webhook may connect to ip.
func AllowedAddr(ip netip.Addr) bool {
	return forbiddenReason(ip) == ""
}

// forbiddenReason says why ip is refused, or returns "" if it is allowed.
func forbiddenReason(ip netip.Addr) string {
	if !ip.IsValid() {
		return "invalid"
	}
	// ::ffff:127.0.0.1 is 127.0.0.1 on the wire; judge the IPv4 form.
	ip = ip.Unmap()
	// Behind a NAT64 gateway, 64:ff9b::a00:1 (RFC 6052) reaches 10.0.0.1,
	// so such an address is judged by the IPv4 address in its last 32 bits.
	nat64 := netip.PrefixFrom(netip.AddrFrom16([16]byte{0x00, 0x64, 0xff, 0x9b}), 96)
	if nat64.Contains(ip) {
		b := ip.As16()
		if reason := forbiddenReason(netip.AddrFrom4([4]byte(b[12:]))); reason != "" {
			return "NAT64 of " + reason
		}
		return ""
	}
	switch {
	case ip.IsUnspecified():
		return "unspecified"
	case ip.IsLoopback():
		return "loopback"
	case ip.IsPrivate():
		return "private"
	case ip.IsLinkLocalUnicast():
		return "link-local"
	case ip.IsMulticast(): // covers link- and interface-local multicast
		return "multicast"
	}
	if ip.Is4() {
		b := ip.As4()
		switch {
		case b[0] == 100 && b[1]&0xc0 == 64:
			// 100.64.0.0/10, shared address space (RFC 6598): carrier-grade
			// NAT, and in several clouds the range of internal services.
			return "shared address space"
		case b[0] == 0:
			// 0.0.0.0/8: Linux sends a connect to 0.0.0.0 to the local host,
			// and nothing else in the block is a public destination.
			return "this network"
		case b[0] >= 240:
			// 240.0.0.0/4 is reserved, and its last address is the limited
			// broadcast: neither is a receiver on the internet.
			return "reserved"
		}
	}
	return ""
}
