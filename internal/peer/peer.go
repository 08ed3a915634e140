// Package peer names the client a request comes from, as every
// per-client limit counts it: the API's rate limits and failed tokens,
// the dashboard's cap on event streams. One function, so that no limit
// can be dodged by a client the others would count as one.
package peer

import (
	"net"
	"net/http"
	"net/netip"
)

// Addr is the address r comes from, without its port, as a per-client
// key: an IPv4 address (an IPv4-mapped IPv6 one too) as it is, an IPv6
// address by its /64, which one client usually holds whole, so that it
// cannot take a fresh key with each address of its network. Behind a
// proxy, every client is the proxy: X-Forwarded-For is not trusted, as
// anyone can send it.
func Addr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.WithZone("").Prefix(64)
		return p.String()
	}
	return ip.String()
}
