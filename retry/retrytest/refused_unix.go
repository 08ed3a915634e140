//go:build unix

package retrytest

import (
	"net"
	"syscall"
	"testing"
)

// RefusedAddr is a loopback address, 127.0.0.1:port, that refuses every
// connection until the test ends: its port is bound by a socket that
// never listens. A port closed a moment ago is not as good: another test,
// or any outgoing connection, may take it meanwhile, and then the address
// answers. While the socket holds the port, the system gives it to no one
// else and a listener asking for it fails with EADDRINUSE.
func RefusedAddr(tb testing.TB) string {
	tb.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		tb.Fatalf("refused address: socket: %v", err)
	}
	syscall.CloseOnExec(fd)
	// Bound, never listening: a SYN to the port is answered with a reset.
	// Without SO_REUSEADDR, no listener may share the port.
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		syscall.Close(fd)
		tb.Fatalf("refused address: bind: %v", err)
	}
	tb.Cleanup(func() { _ = syscall.Close(fd) })
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		tb.Fatalf("refused address: getsockname: %v", err)
	}
	return (&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: sa.(*syscall.SockaddrInet4).Port}).String()
}
