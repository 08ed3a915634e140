package peers

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"testing"

	"github.com/relay-demo/relay/internal/testenv"
)

// TestRedisOnATakenPort starts redis-server on a port this test holds:
// it must say the port was taken, which startRedis answers with another.
func TestRedisOnATakenPort(t *testing.T) {
	exe, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.Unavailable(t, "no redis-server on the PATH, which the peers benchmark's persistent rows start (apt install redis-server): %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s, err := startRedisOn(context.Background(), exe, "everysec", ln.Addr().(*net.TCPAddr).Port)
	if err == nil {
		_ = s.Stop()
		t.Fatalf("redis-server started on %s, a port this test holds", s.Addr)
	}
	if !errors.Is(err, errPortTaken) {
		t.Errorf("startRedisOn a taken port: %v, want errPortTaken", err)
	}
}
