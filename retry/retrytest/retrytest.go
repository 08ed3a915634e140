// Package retrytest gives tests a real RabbitMQ broker and a private,
// self-cleaning copy of the retry topology on it.
//
// The broker is found in this order: the AMQP_URL environment variable; a
// broker listening on localhost:5672; a RabbitMQ container started with
// testcontainers (needs Docker). With none of them, a test is skipped,
// except when CI=true, where it fails: in CI a missing broker is a broken
// build, never a quiet pass.
package retrytest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	tcrabbit "github.com/testcontainers/testcontainers-go/modules/rabbitmq"

	"github.com/relay-demo/relay/retry"
)

// Image is the RabbitMQ image started when no broker is reachable.
const Image = "rabbitmq:4.2-management"

const localURL = "amqp://guest:guest@localhost:5672/"

var (
	once   sync.Once
	url    string
	reason string
)

// URL returns the address of a reachable broker, or ends the test as
// described in the package comment.
func URL(tb testing.TB) string {
	tb.Helper()
	once.Do(func() { url, reason = find() })
	if url == "" {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("no RabbitMQ broker for integration tests in CI: %s", reason)
		}
		tb.Skipf("no RabbitMQ broker (set AMQP_URL, run one on localhost, or start Docker): %s", reason)
	}
	return url
}

func find() (string, string) {
	if u := os.Getenv("AMQP_URL"); u != "" {
		if err := ping(u); err != nil {
			return "", fmt.Sprintf("AMQP_URL=%s is set but unreachable: %v", redact(u), err)
		}
		return u, ""
	}
	localErr := ping(localURL)
	if localErr == nil {
		return localURL, ""
	}
	u, err := container()
	if err != nil {
		return "", fmt.Sprintf("localhost:5672: %v; testcontainers: %v", localErr, err)
	}
	return u, ""
}

func ping(u string) error {
	conn, err := amqp.DialConfig(u, amqp.Config{Dial: amqp.DefaultDial(3 * time.Second)})
	if err != nil {
		return err
	}
	return conn.Close()
}

// container starts a broker with testcontainers. The container lives as
// long as the test binary; testcontainers' reaper removes it afterwards.
func container() (u string, err error) {
	defer func() {
		// Some Docker-less environments make the Docker client panic.
		if r := recover(); r != nil {
			err = fmt.Errorf("docker unavailable: %v", r)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := tcrabbit.Run(ctx, Image)
	if err != nil {
		return "", err
	}
	return c.AmqpURL(ctx)
}

func redact(u string) string {
	return regexp.MustCompile(`//[^@/]*@`).ReplaceAllString(u, "//***@")
}

// Conn opens a connection to the test broker, closed when the test ends.
func Conn(tb testing.TB) *amqp.Connection {
	tb.Helper()
	conn, err := retry.Dial(URL(tb), "relay test "+tb.Name())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	return conn
}

// Prefix returns a name prefix no other test run uses.
func Prefix(tb testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := strings.NewReplacer("/", ".", " ", "_").Replace(tb.Name())
	if len(name) > 60 {
		name = name[:60]
	}
	return fmt.Sprintf("test.%s.%s.", name, hex.EncodeToString(b[:]))
}

// Declare gives topo a unique prefix, declares it on conn's broker, and
// deletes all of it, messages included, when the test ends.
func Declare(tb testing.TB, conn *amqp.Connection, topo retry.Topology) retry.Topology {
	tb.Helper()
	topo.Prefix = Prefix(tb)
	if err := topo.Declare(context.Background(), conn); err != nil {
		tb.Fatalf("declare topology: %v", err)
	}
	tb.Cleanup(func() {
		c, err := retry.Dial(URL(tb), "relay test cleanup")
		if err != nil {
			tb.Errorf("cleanup: %v", err)
			return
		}
		defer c.Close()
		if err := topo.Delete(c); err != nil {
			tb.Errorf("cleanup: %v", err)
		}
	})
	return topo
}

// Eventually polls cond every 10ms until it holds or timeout passes, and
// fails the test with msg if it never does.
func Eventually(tb testing.TB, timeout time.Duration, cond func() bool, msg string, args ...any) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("after %s: "+msg, append([]any{timeout}, args...)...)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Buffer is a bytes.Buffer safe for concurrent writers: a service's log
// sink that a test reads while the service runs.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
