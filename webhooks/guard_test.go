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

	tests := []struct {
		name          string
		url           string
		allowPrivate  bool
		wantForbidden bool
	}{
		{"loopback ip, guarded", byIP, false, true},
		{"name resolving to loopback, guarded", byName, false, true},
		{"loopback ip, private allowed", byIP, true, false},
		{"name resolving to loopback, private allowed", byName, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := hits.Load()
			s := NewSender(Config{AllowPrivate: tt.allowPrivate}, mustSigner(t, specSecret))
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
