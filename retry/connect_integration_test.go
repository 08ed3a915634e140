//go:build integration

package retry_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// node stands in for one node of a cluster: a TCP forwarder to the test
// broker on a port of its own. kill drops its connections and stops
// listening, as a node that dies does.
type node struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	dead   bool
}

func startNode(t *testing.T, target string) *node {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &node{ln: ln, target: target}
	go n.serve()
	t.Cleanup(n.kill)
	return n
}

func (n *node) serve() {
	for {
		c, err := n.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", n.target)
		if err != nil {
			c.Close()
			continue
		}
		n.mu.Lock()
		if n.dead {
			n.mu.Unlock()
			c.Close()
			up.Close()
			return
		}
		n.conns = append(n.conns, c, up)
		n.mu.Unlock()
		go func() { _, _ = io.Copy(up, c); up.Close() }()
		go func() { _, _ = io.Copy(c, up); c.Close() }()
	}
}

func (n *node) kill() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.dead = true
	n.ln.Close()
	for _, c := range n.conns {
		c.Close()
	}
	n.conns = nil
}

// url is the broker's URL with this node's address.
func (n *node) url(t *testing.T, broker string) string {
	u, err := url.Parse(broker)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = n.ln.Addr().String()
	return u.String()
}

// TestSuperviseAnyFailsOver gives SuperviseAny three nodes, one of them
// down from the start, kills the node it connected to, and checks that it
// runs fn again on the one live node left.
func TestSuperviseAnyFailsOver(t *testing.T) {
	broker := retrytest.URL(t)
	u, err := url.Parse(broker)
	if err != nil {
		t.Fatal(err)
	}
	a, b := startNode(t, u.Host), startNode(t, u.Host)
	down := startNode(t, u.Host)
	down.kill()
	byAddr := map[string]*node{a.ln.Addr().String(): a, b.ln.Addr().String(): b}
	urls := []string{a.url(t, broker), down.url(t, broker), b.url(t, broker)}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	connected := make(chan string)
	done := make(chan error, 1)
	go func() {
		done <- retry.SuperviseAny(ctx, urls, "relay test failover", slog.New(slog.DiscardHandler), func(ctx context.Context, conn *amqp.Connection) error {
			closed := conn.NotifyClose(make(chan *amqp.Error, 1))
			select {
			case connected <- conn.RemoteAddr().String():
			case <-ctx.Done():
				return nil
			}
			select {
			case <-closed:
				return retry.ErrConnectionLost
			case <-ctx.Done():
				return nil
			}
		})
	}()
	next := func() string {
		t.Helper()
		select {
		case addr := <-connected:
			return addr
		case err := <-done:
			t.Fatalf("SuperviseAny returned %v before connecting", err)
		case <-time.After(30 * time.Second):
			t.Fatal("no connection within 30s")
		}
		return ""
	}

	first := next()
	n, ok := byAddr[first]
	if !ok {
		t.Fatalf("connected to %s, which is neither live node", first)
	}
	n.kill()
	second := next()
	if second == first {
		t.Fatalf("connected to the killed node %s again", first)
	}
	if _, ok := byAddr[second]; !ok {
		t.Fatalf("connected to %s, which is neither live node", second)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("SuperviseAny = %v, want nil once ctx is done", err)
	}
}

// TestDialAnyFirstThatAnswers checks that DialAny skips a node that is
// down and connects to the next one in the list's order.
func TestDialAnyFirstThatAnswers(t *testing.T) {
	broker := retrytest.URL(t)
	u, err := url.Parse(broker)
	if err != nil {
		t.Fatal(err)
	}
	a, b := startNode(t, u.Host), startNode(t, u.Host)
	down := startNode(t, u.Host)
	down.kill()
	tests := []struct {
		name string
		urls []string
		want *node
	}{
		{"first answers", []string{a.url(t, broker), b.url(t, broker)}, a},
		{"first down", []string{down.url(t, broker), b.url(t, broker), a.url(t, broker)}, b},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := retry.DialAny(tt.urls, "relay test dial")
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if got, want := conn.RemoteAddr().String(), tt.want.ln.Addr().String(); got != want {
				t.Errorf("connected to %s, want %s", got, want)
			}
		})
	}
}
