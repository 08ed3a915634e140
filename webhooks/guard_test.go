package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/relay-demo/relay/retry"
)

func TestAllowedAddr(t *testing.T) {
	tests := []struct {
		name string
		ip   string
		want bool
	}{
		// IPv4
		{"v4 public", "8.8.8.8", true},
		{"v4 public near private", "172.32.0.1", true},
		{"v4 below shared space", "100.63.255.255", true},
		{"v4 above shared space", "100.128.0.1", true},
		{"v4 loopback", "127.0.0.1", false},
		{"v4 loopback elsewhere in /8", "127.1.2.3", false},
		{"v4 private 10/8", "10.0.0.1", false},
		{"v4 private 172.16/12 start", "172.16.0.1", false},
		{"v4 private 172.16/12 end", "172.31.255.255", false},
		{"v4 private 192.168/16", "192.168.1.1", false},
		{"v4 link-local metadata", "169.254.169.254", false},
		{"v4 shared space start", "100.64.0.1", false},
		{"v4 shared space end", "100.127.255.255", false},
		{"v4 unspecified", "0.0.0.0", false},
		{"v4 this network", "0.1.2.3", false},
		{"v4 multicast", "224.0.0.1", false},
		{"v4 multicast ssdp", "239.255.255.250", false},
		{"v4 reserved", "240.0.0.1", false},
		{"v4 broadcast", "255.255.255.255", false},
		// IPv6
		{"v6 public", "2001:4860:4860::8888", true},
		{"v6 public cloudflare", "2606:4700:4700::1111", true},
		{"v6 loopback", "::1", false},
		{"v6 unspecified", "::", false},
		{"v6 unique local fc00", "fc00::1", false},
		{"v6 unique local fd00", "fd12:3456::1", false},
		{"v6 link-local", "fe80::1", false},
		{"v6 link-local with zone", "fe80::1%eth0", false},
		{"v6 link-local multicast", "ff02::1", false},
		{"v6 interface-local multicast", "ff01::1", false},
		{"v6 site multicast", "ff05::1:3", false},
		// IPv4-mapped IPv6
		{"mapped public", "::ffff:8.8.8.8", true},
		{"mapped loopback", "::ffff:127.0.0.1", false},
		{"mapped private", "::ffff:10.0.0.1", false},
		{"mapped private 192.168", "::ffff:192.168.0.10", false},
		{"mapped link-local", "::ffff:169.254.169.254", false},
		{"mapped shared space", "::ffff:100.64.0.1", false},
		{"mapped unspecified", "::ffff:0.0.0.0", false},
		{"mapped multicast", "::ffff:224.0.0.1", false},
		// NAT64
		{"nat64 of public", "64:ff9b::808:808", true},
		{"nat64 of private", "64:ff9b::a00:1", false},
		{"nat64 of loopback", "64:ff9b::127.0.0.1", false},
		{"nat64 of documentation", "64:ff9b::192.0.2.1", false},
		{"nat64 of pcp anycast", "64:ff9b::192.0.0.9", true},

		// Every other special-purpose block: one address inside, and the
		// addresses just outside where they are public.
		// 192.0.0.0/24, IETF protocol assignments, and its sub-blocks.
		{"v4 ietf assignments start", "192.0.0.0", false},
		{"v4 ietf assignments", "192.0.0.100", false},
		{"v4 ietf assignments end", "192.0.0.255", false},
		{"v4 below ietf assignments", "191.255.255.255", true},
		{"v4 above ietf assignments", "192.0.1.0", true},
		{"v4 service continuity", "192.0.0.7", false},
		{"v4 dummy address", "192.0.0.8", false},
		{"v4 pcp anycast", "192.0.0.9", true},
		{"v4 turn anycast", "192.0.0.10", true},
		{"v4 after turn anycast", "192.0.0.11", false},
		{"v4 nat64 discovery", "192.0.0.170", false},
		{"v4 nat64 discovery second", "192.0.0.171", false},
		// Documentation, TEST-NET-1, -2 and -3.
		{"v4 test-net-1", "192.0.2.1", false},
		{"v4 test-net-1 end", "192.0.2.255", false},
		{"v4 above test-net-1", "192.0.3.0", true},
		{"v4 test-net-2", "198.51.100.7", false},
		{"v4 below test-net-2", "198.51.99.255", true},
		{"v4 above test-net-2", "198.51.101.0", true},
		{"v4 test-net-3", "203.0.113.9", false},
		{"v4 below test-net-3", "203.0.112.255", true},
		{"v4 above test-net-3", "203.0.114.0", true},
		// Benchmarking, 198.18.0.0/15.
		{"v4 benchmarking start", "198.18.0.1", false},
		{"v4 benchmarking end", "198.19.255.255", false},
		{"v4 below benchmarking", "198.17.255.255", true},
		{"v4 above benchmarking", "198.20.0.0", true},
		// Deprecated 6to4 relay anycast, 192.88.99.0/24.
		{"v4 6to4 relay anycast", "192.88.99.1", false},
		{"v4 below 6to4 relay anycast", "192.88.98.255", true},
		{"v4 above 6to4 relay anycast", "192.88.100.0", true},
		// Globally reachable rows of the registry.
		{"v4 as112", "192.31.196.1", true},
		{"v4 amt", "192.52.193.1", true},
		{"v4 as112 direct delegation", "192.175.48.1", true},
		// Multicast and reserved edges.
		{"v4 below multicast", "223.255.255.255", true},
		{"v4 multicast end", "239.255.255.255", false},
		{"v4 reserved end", "255.255.255.254", false},

		// IPv6, 64:ff9b:1::/48: local-use NAT64 is refused outright,
		// whatever it embeds.
		{"v6 local-use nat64 of public", "64:ff9b:1::808:808", false},
		{"v6 local-use nat64 of private", "64:ff9b:1::a00:1", false},
		{"v6 local-use nat64 end", "64:ff9b:1:ffff:ffff:ffff:ffff:ffff", false},
		// Discard-only 100::/64 and the dummy prefix beside it.
		{"v6 discard-only", "100::1", false},
		{"v6 dummy prefix", "100:0:0:1::1", false},
		// 2001::/23, IETF protocol assignments, and its sub-blocks.
		{"v6 teredo", "2001:0:4136:e378:8000:63bf:3fff:fdd2", false},
		{"v6 ietf assignments", "2001:5::1", false},
		{"v6 ietf assignments end", "2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", false},
		{"v6 above ietf assignments", "2001:200::1", true},
		{"v6 below ietf assignments", "2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true},
		{"v6 pcp anycast", "2001:1::1", true},
		{"v6 turn anycast", "2001:1::2", true},
		{"v6 dns-sd srp anycast", "2001:1::3", true},
		{"v6 after the anycast addresses", "2001:1::4", false},
		{"v6 benchmarking", "2001:2::1", false},
		{"v6 above benchmarking", "2001:2:1::1", false},
		{"v6 amt", "2001:3::1", true},
		{"v6 amt end", "2001:3:ffff:ffff:ffff:ffff:ffff:ffff", true},
		{"v6 above amt", "2001:4::1", false},
		{"v6 as112", "2001:4:112::1", true},
		{"v6 below as112", "2001:4:111:ffff:ffff:ffff:ffff:ffff", false},
		{"v6 above as112", "2001:4:113::", false},
		{"v6 deprecated orchid", "2001:10::1", false},
		{"v6 orchidv2", "2001:20::1", true},
		{"v6 orchidv2 end", "2001:2f:ffff:ffff:ffff:ffff:ffff:ffff", true},
		{"v6 below orchidv2", "2001:1f:ffff:ffff:ffff:ffff:ffff:ffff", false},
		{"v6 drone remote id", "2001:30::1", true},
		{"v6 above drone remote id", "2001:40::", false},
		// Documentation: 2001:db8::/32 and 3fff::/20.
		{"v6 documentation", "2001:db8::1", false},
		{"v6 documentation end", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", false},
		{"v6 below documentation", "2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", true},
		{"v6 above documentation", "2001:db9::", true},
		{"v6 new documentation", "3fff::1", false},
		{"v6 new documentation end", "3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", false},
		{"v6 above new documentation", "3fff:1000::", true},
		{"v6 below new documentation", "3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true},
		// 6to4 is refused outright, whatever it embeds.
		{"v6 6to4 of public", "2002:808:808::1", false},
		{"v6 6to4 of loopback", "2002:7f00:1::1", false},
		{"v6 above 6to4", "2003::1", true},
		{"v6 as112 direct delegation", "2620:4f:8000::42", true},
		// SRv6 SIDs, deprecated site-local and IPv4-compatible.
		{"v6 srv6", "5f00::1", false},
		{"v6 site-local", "fec0::1", false},
		{"v6 site-local end", "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", false},
		{"v6 ipv4-compatible loopback", "::127.0.0.1", false},
		{"v6 ipv4-compatible public", "::8.8.8.8", false},
		// Outside 2000::/3, global unicast.
		{"v6 below global unicast", "1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", false},
		{"v6 above global unicast", "4000::1", false},
		{"v6 reserved high", "e000::1", false},
		{"v6 global unicast start", "2000::1", true},
		{"v6 global unicast end", "3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ip := netip.MustParseAddr(tt.ip)
			if got := AllowedAddr(ip); got != tt.want {
				t.Errorf("AllowedAddr(%s) = %t, want %t", ip, got, tt.want)
			}
		})
	}
	if AllowedAddr(netip.Addr{}) {
		t.Error("AllowedAddr(zero Addr) = true, want false")
	}
}

func TestGuardControl(t *testing.T) {
	tests := []struct {
		name    string
		network string
		address string
		wantErr string // "" for allowed; else a part of the message
	}{
		{"public v4", "tcp4", "8.8.8.8:443", ""},
		{"public v6", "tcp6", "[2001:4860:4860::8888]:443", ""},
		{"loopback v4", "tcp4", "127.0.0.1:8080", "forbidden address 127.0.0.1 (loopback)"},
		{"loopback v6", "tcp6", "[::1]:80", "forbidden address ::1 (loopback)"},
		{"mapped loopback", "tcp6", "[::ffff:127.0.0.1]:80", "forbidden address ::ffff:127.0.0.1 (loopback)"},
		{"metadata service", "tcp4", "169.254.169.254:80", "forbidden address 169.254.169.254 (link-local)"},
		{"zoned link-local", "tcp6", "[fe80::1%eth0]:80", "forbidden address fe80::1%eth0 (link-local)"},
		{"nat64 of private", "tcp6", "[64:ff9b::a00:1]:80", "forbidden address 64:ff9b::a00:1 (NAT64 of private)"},
		{"nat64 of metadata", "tcp6", "[64:ff9b::a9fe:a9fe]:80", "forbidden address 64:ff9b::a9fe:a9fe (NAT64 of link-local)"},
		{"local-use nat64", "tcp6", "[64:ff9b:1::808:808]:443", "forbidden address 64:ff9b:1::808:808 (local-use NAT64)"},
		{"v4 documentation", "tcp4", "192.0.2.1:443", "forbidden address 192.0.2.1 (documentation)"},
		{"v4 benchmarking", "tcp4", "198.18.0.1:443", "forbidden address 198.18.0.1 (benchmarking)"},
		{"v4 dummy address", "tcp4", "192.0.0.8:443", "forbidden address 192.0.0.8 (IPv4 dummy address)"},
		{"v6 documentation", "tcp6", "[2001:db8::1]:443", "forbidden address 2001:db8::1 (documentation)"},
		{"v6 teredo", "tcp6", "[2001::1]:443", "forbidden address 2001::1 (Teredo)"},
		{"v6 6to4", "tcp6", "[2002:808:808::1]:443", "forbidden address 2002:808:808::1 (6to4)"},
		{"v6 discard-only", "tcp6", "[100::1]:443", "forbidden address 100::1 (discard-only)"},
		{"v6 srv6", "tcp6", "[5f00::1]:443", "forbidden address 5f00::1 (SRv6 SIDs)"},
		{"v6 site-local", "tcp6", "[fec0::1]:443", "forbidden address fec0::1 (deprecated site-local)"},
		{"v6 unallocated", "tcp6", "[4000::1]:443", "forbidden address 4000::1 (not global unicast)"},
		{"v6 globally reachable sub-block", "tcp6", "[2001:4:112::1]:53", ""},
		{"host name, not an ip", "tcp", "localhost:80", `forbidden address "localhost:80": not an ip:port`},
		{"no port", "tcp4", "8.8.8.8", `forbidden address "8.8.8.8": not an ip:port`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := GuardControl(tt.network, tt.address, nil)
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("GuardControl(%q) = %v, want nil", tt.address, err)
				}
				return
			}
			if !errors.Is(err, ErrForbiddenAddress) {
				t.Fatalf("GuardControl(%q) = %v, want ErrForbiddenAddress", tt.address, err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("GuardControl(%q) = %q, want it to contain %q", tt.address, err, tt.wantErr)
			}
		})
	}
}

func TestGuardAllow(t *testing.T) {
	prefixes := func(s ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, p := range s {
			out = append(out, netip.MustParsePrefix(p))
		}
		return out
	}
	tests := []struct {
		name  string
		allow []netip.Prefix
		ip    string
		want  bool
	}{
		{"nothing allowed, public", nil, "8.8.8.8", true},
		{"nothing allowed, loopback", nil, "127.0.0.1", false},
		{"loopback allowed, v4", prefixes("127.0.0.0/8", "::1/128"), "127.0.0.1", true},
		{"loopback allowed, v6", prefixes("127.0.0.0/8", "::1/128"), "::1", true},
		{"loopback allowed, mapped", prefixes("127.0.0.0/8", "::1/128"), "::ffff:127.0.0.1", true},
		{"loopback allowed, nat64 of loopback", prefixes("127.0.0.0/8", "::1/128"), "64:ff9b::7f00:1", true},
		{"loopback allowed, private", prefixes("127.0.0.0/8", "::1/128"), "10.0.0.1", false},
		{"loopback allowed, metadata", prefixes("127.0.0.0/8", "::1/128"), "169.254.169.254", false},
		{"loopback allowed, public", prefixes("127.0.0.0/8", "::1/128"), "8.8.8.8", true},
		{"compose subnet, inside", prefixes("172.28.0.0/24"), "172.28.0.5", true},
		{"compose subnet, just outside", prefixes("172.28.0.0/24"), "172.28.1.5", false},
		{"unique local, inside", prefixes("fd00::/8"), "fd12::1", true},
		{"unique local, other half", prefixes("fd00::/8"), "fc00::1", false},
		{"host bits set", prefixes("10.1.2.3/16"), "10.1.200.1", true},
		{"mapped prefix", prefixes("::ffff:10.0.0.0/104"), "10.9.9.9", true},
		{"mapped prefix, mapped address", prefixes("::ffff:10.0.0.0/104"), "::ffff:10.9.9.9", true},
		{"zoned address", prefixes("fe80::/64"), "fe80::1%eth0", true},
		{"v4 prefix, v6 address", prefixes("10.0.0.0/8"), "fd00::a00:1", false},
		{"zero prefix ignored", []netip.Prefix{{}}, "127.0.0.1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ip := netip.MustParseAddr(tt.ip)
			if got := NewGuard(tt.allow).Allowed(ip); got != tt.want {
				t.Errorf("NewGuard(%v).Allowed(%s) = %t, want %t", tt.allow, ip, got, tt.want)
			}
		})
	}
}

// TestBlocks checks the table itself: canonical prefixes, each listed
// once with a reason and an RFC, and each deciding for its own first and
// last address wherever no more specific row does.
func TestBlocks(t *testing.T) {
	seen := map[netip.Prefix]bool{}
	for _, b := range blocks {
		t.Run(b.prefix.String(), func(t *testing.T) {
			if b.prefix != b.prefix.Masked() {
				t.Errorf("prefix %s has host bits set", b.prefix)
			}
			if seen[b.prefix] {
				t.Errorf("prefix %s is listed twice", b.prefix)
			}
			seen[b.prefix] = true
			if b.reason == "" || !strings.HasPrefix(b.source, "RFC ") {
				t.Errorf("row %+v wants a reason and an RFC", b)
			}
			if b.verdict == embedded {
				return
			}
			for _, ip := range []netip.Addr{b.prefix.Addr(), lastAddr(b.prefix)} {
				if got, _ := lookup(ip); got.prefix != b.prefix {
					continue // a more specific row decides
				}
				if got, want := AllowedAddr(ip), b.verdict == reachable; got != want {
					t.Errorf("AllowedAddr(%s) = %t, want %t", ip, got, want)
				}
			}
		})
	}
}

// lastAddr returns the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Addr().AsSlice()
	for i := p.Bits(); i < len(a)*8; i++ {
		a[i/8] |= 0x80 >> (i % 8)
	}
	last, _ := netip.AddrFromSlice(a)
	return last
}

// TestSenderGuard dials real loopback servers, by IP and by a name that
// resolves to loopback, so the check is known to run on the resolved
// address at dial time.
func TestSenderGuard(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	byIP := srv.URL + "/hook"
	byName := "http://localhost:" + port + "/hook"

	private := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	tests := []struct {
		name          string
		url           string
		allow         []netip.Prefix
		wantForbidden bool
	}{
		{"loopback ip, guarded", byIP, nil, true},
		{"name resolving to loopback, guarded", byName, nil, true},
		{"loopback ip, other networks allowed", byIP, private, true},
		{"loopback ip, loopback allowed", byIP, loopback, false},
		{"name resolving to loopback, loopback allowed", byName, loopback, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := hits.Load()
			s := NewSender(Config{Allow: tt.allow}, mustSigner(t, specSecret))
			resp, err := s.Send(context.Background(), Request{URL: tt.url, ID: "msg_1", Payload: json.RawMessage(`{}`)})
			reached := hits.Load() > before
			if !tt.wantForbidden {
				if err != nil || resp.Status != http.StatusNoContent || !reached {
					t.Fatalf("Send = %+v, %v (reached %t), want 204 and nil", resp, err, reached)
				}
				return
			}
			if !errors.Is(err, ErrForbiddenAddress) || !retry.IsPermanent(err) {
				t.Fatalf("Send error = %v, want a permanent ErrForbiddenAddress", err)
			}
			if reached {
				t.Error("the server was reached")
			}
			if resp.Status != 0 {
				t.Errorf("Status = %d, want 0", resp.Status)
			}
		})
	}
}
