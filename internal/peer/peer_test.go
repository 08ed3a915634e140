package peer

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestAddr(t *testing.T) {
	tests := []struct{ remote, want string }{
		{"192.0.2.1:1234", "192.0.2.1"},
		{"192.0.2.1", "192.0.2.1"},
		{"[::ffff:192.0.2.1]:80", "192.0.2.1"},
		{"[2001:db8:1:2:3:4:5:6]:443", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:ffff::9]:443", "2001:db8:1:2::/64"},
		{"[2001:db8:1:3::1]:443", "2001:db8:1:3::/64"},
		{"[fe80::1%eth0]:80", "fe80::/64"},
		{"@unix", "@unix"},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = tt.remote
		if got := Addr(r); got != tt.want {
			t.Errorf("Addr(%q) = %q, want %q", tt.remote, got, tt.want)
		}
	}
}
