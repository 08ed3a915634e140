package webhooks

import (
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzParseRetryAfter checks that ParseRetryAfter never panics and that
// every delay it accepts is the one the header says: never negative,
// delta-seconds exactly, and an HTTP-date exactly that far from now (so a
// date too far away to represent is refused, not cut short).
func FuzzParseRetryAfter(f *testing.F) {
	now := fixedNow()
	for _, seed := range []string{
		"120", "0", " 7 ", "007", "9223372036", "9223372037", "99999999999999999999",
		"", "-5", "+5", "1.5", "5s", "soon", "\t\n", "١٢", "12\x00",
		now.Add(90 * time.Second).UTC().Format(http.TimeFormat),
		now.Add(time.Hour).UTC().Format(time.RFC850),
		now.Add(2 * time.Minute).UTC().Format(time.ANSIC),
		"Wed, 21 Oct 2015 07:28:00 GMT",
		"Sun, 01 Mar 2026 12:01:30",
		"Fri, 31 Dec 2100 23:59:59 GMT",
	} {
		f.Add(seed, now.Unix())
	}
	f.Add("Fri, 31 Dec 2100 23:59:59 GMT", int64(0))
	f.Add("0", int64(1<<40))
	f.Fuzz(func(t *testing.T, v string, unix int64) {
		now := time.Unix(unix, 0).UTC()
		d, ok := ParseRetryAfter(v, now)
		if !ok {
			if d != 0 {
				t.Fatalf("ParseRetryAfter(%q) = %s, false: want 0 with false", v, d)
			}
			return
		}
		if d < 0 {
			t.Fatalf("ParseRetryAfter(%q) = %s: a negative delay", v, d)
		}
		s := strings.TrimSpace(v)
		if secs, err := strconv.ParseUint(s, 10, 64); err == nil && isDigits(s) {
			if time.Duration(secs)*time.Second != d || d/time.Second != time.Duration(secs) {
				t.Fatalf("ParseRetryAfter(%q) = %s: want %d seconds", v, d, secs)
			}
			return
		}
		at, err := http.ParseTime(s)
		if err != nil {
			t.Fatalf("ParseRetryAfter(%q) accepted a value that is neither delta-seconds nor an HTTP-date", v)
		}
		if got := now.Add(d); !got.Equal(at) {
			t.Fatalf("ParseRetryAfter(%q, %s) = %s: now plus that is %s, not the date %s", v, now, d, got, at)
		}
	})
}

// FuzzGuard checks that the guard judges an address the same in every
// form that reaches the same host: IPv4 and IPv4-mapped IPv6, with and
// without a zone; and that an address inside an allowed prefix always
// passes.
func FuzzGuard(f *testing.F) {
	for _, seed := range []string{
		"8.8.8.8", "127.0.0.1", "169.254.169.254", "192.0.0.9", "192.0.2.1", "255.255.255.255",
		"::1", "fe80::1", "64:ff9b::a00:1", "64:ff9b:1::1", "2001:1::1", "2001:db8::1", "2002::1", "5f00::1",
	} {
		a := netip.MustParseAddr(seed).As16()
		f.Add(a[:], uint8(8))
	}
	f.Fuzz(func(t *testing.T, b []byte, bits uint8) {
		if len(b) != 16 {
			return
		}
		ip := netip.AddrFrom16([16]byte(b))
		var zero Guard
		if ip.Is4In6() && zero.Allowed(ip) != zero.Allowed(ip.Unmap()) {
			t.Fatalf("%s and %s judged apart", ip, ip.Unmap())
		}
		if ip.Is6() && !ip.Is4In6() && zero.Allowed(ip) != zero.Allowed(ip.WithZone("eth0")) {
			t.Fatalf("%s judged apart from its zoned form", ip)
		}
		p, err := ip.Unmap().Prefix(int(bits) % (ip.Unmap().BitLen() + 1))
		if err != nil {
			t.Fatal(err)
		}
		if !NewGuard([]netip.Prefix{p}).Allowed(ip) {
			t.Fatalf("%s refused with %s allowed", ip, p)
		}
	})
}
