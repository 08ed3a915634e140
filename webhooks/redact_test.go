package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/relay-demo/relay/internal/testenv"
	"github.com/relay-demo/relay/retry"
)

func TestRedactAddresses(t *testing.T) {
	tcp := func(s string) *net.TCPAddr { return net.TCPAddrFromAddrPort(netip.MustParseAddrPort(s)) }
	guardErr := Guard{}.Control("tcp", "10.0.0.7:443", nil)
	tests := []struct {
		name     string
		err      error
		want     string
		wantGone []string
	}{
		{"resolver", &net.DNSError{Err: "no such host", Name: "localhost.", Server: "10.255.255.53:53", IsNotFound: true},
			"lookup localhost.: no such host", []string{"10.255.255.53"}},
		{"resolver inside a dial", &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "server misbehaving", Name: "hooks.example", Server: "10.0.0.2:53"}},
			"dial tcp: lookup hooks.example: server misbehaving", []string{"10.0.0.2"}},
		{"a name resolved inside", &net.OpError{Op: "dial", Net: "tcp", Addr: tcp("10.0.0.7:443"), Err: syscall.ECONNREFUSED},
			"dial tcp (internal address): connection refused", []string{"10.0.0.7"}},
		{"the guard's refusal", &net.OpError{Op: "dial", Net: "tcp", Addr: tcp("10.0.0.7:443"), Err: guardErr},
			"dial tcp (internal address): forbidden address (private)", []string{"10.0.0.7"}},
		{"the sender's own end", &net.OpError{Op: "read", Net: "tcp", Source: tcp("10.1.0.5:43210"), Addr: tcp("93.184.215.14:443"), Err: syscall.ECONNRESET},
			"read tcp 93.184.215.14:443: connection reset by peer", []string{"10.1.0.5"}},
		{"a public receiver stays", &net.OpError{Op: "dial", Net: "tcp", Addr: tcp("93.184.215.14:443"), Err: syscall.ECONNREFUSED},
			"dial tcp 93.184.215.14:443: connection refused", nil},
		{"wrapped", fmt.Errorf("webhook https://hooks.example/in: %w", &url.Error{Op: "Post", URL: "https://hooks.example/in",
			Err: &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "hooks.example", Server: "[fd00::53]:53"}}}),
			`webhook https://hooks.example/in: Post "https://hooks.example/in": dial tcp: lookup hooks.example: no such host`, []string{"fd00::53"}},
		{"nothing to cut", errors.New("webhook https://hooks.example/in: 503"), "webhook https://hooks.example/in: 503", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := RedactAddresses(tt.err)
			if got.Error() != tt.want {
				t.Errorf("RedactAddresses = %q, want %q", got, tt.want)
			}
			for _, s := range tt.wantGone {
				if strings.Contains(got.Error(), s) {
					t.Errorf("RedactAddresses = %q, still names %s", got, s)
				}
			}
			var dnsErr *net.DNSError
			if errors.As(tt.err, &dnsErr) && !errors.As(got, &dnsErr) {
				t.Error("errors.As no longer finds the *net.DNSError")
			}
			if errors.Is(tt.err, syscall.ECONNREFUSED) != errors.Is(got, syscall.ECONNREFUSED) {
				t.Error("errors.Is no longer finds ECONNREFUSED")
			}
		})
	}
	if RedactAddresses(nil) != nil {
		t.Error("RedactAddresses(nil) is not nil")
	}
}

// TestSendErrorsNameNoInternalAddress sends as the worker does to
// receivers whose names lead inside the network: what Send says names
// neither the address the name resolved to nor the resolver.
func TestSendErrorsNameNoInternalAddress(t *testing.T) {
	srv, _ := newReceiver(t)
	port := srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
	named := "http://localhost:" + port + "/hook"

	// Refused by the guard: localhost is loopback.
	_, err := NewSender(Config{}, mustSigner(t, specSecret)).Send(context.Background(), Request{URL: named, ID: "m", Payload: []byte(`{}`)})
	if err == nil || !errors.Is(err, ErrForbiddenAddress) || !retry.IsPermanent(err) {
		t.Fatalf("Send to localhost = %v, want a permanent forbidden address", err)
	}
	namesNoLoopback(t, err)
	if !strings.Contains(err.Error(), "(loopback)") {
		t.Errorf("Send's error %q does not say why it was refused", err)
	}

	// Allowed, and nobody listens: the dial's error.
	refused := testenv.RefusedAddr(t)
	refusedNamed := "http://localhost:" + refused[strings.LastIndexByte(refused, ':')+1:] + "/hook"
	_, err = newTestSender(t, Config{}, nil).Send(context.Background(), Request{URL: refusedNamed, ID: "m", Payload: []byte(`{}`)})
	if err == nil || !errors.Is(err, syscall.ECONNREFUSED) || retry.IsPermanent(err) {
		t.Fatalf("Send to a closed port = %v, want a transient connection refused", err)
	}
	namesNoLoopback(t, err)

	// A lookup that fails, as the system resolver reports it.
	lookupErr := &url.Error{Op: "Post", URL: named, Err: &net.OpError{Op: "dial", Net: "tcp",
		Err: &net.DNSError{Err: "no such host", Name: "localhost.", Server: "10.255.255.53:53", IsNotFound: true}}}
	err = transportError(context.Background(), "http://localhost.:"+port+"/hook", lookupErr, time.Second)
	if strings.Contains(err.Error(), "10.255.255.53") || !strings.Contains(err.Error(), "lookup localhost.: no such host") {
		t.Errorf("transportError = %q, want the lookup's failure without the resolver", err)
	}
	if retry.IsPermanent(err) {
		t.Errorf("a failed lookup is permanent: %v", err)
	}
}

func namesNoLoopback(t *testing.T, err error) {
	t.Helper()
	for _, s := range []string{"127.0.0.1", "::1"} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("Send's error %q names %s, where localhost led", err, s)
		}
	}
}
