//go:build !unix

package retrytest

import (
	"net"
	"testing"
)

// RefusedAddr is a loopback address that refuses connections. Outside
// Unix it is a port closed a moment ago, which another program may take
// meanwhile; on Unix the port stays bound, never listening, until the test
// ends.
func RefusedAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("refused address: %v", err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
