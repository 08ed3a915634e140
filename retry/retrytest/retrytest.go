// Package retrytest gives tests a real RabbitMQ broker and a private,
// self-cleaning copy of the retry topology on it.
//
// The broker is found in this order: the AMQP_URL environment variable; a
// broker listening on localhost:5672; a RabbitMQ container started with
// testcontainers (needs Docker). With none of them, a test is skipped,
// except when CI=true, where it fails (Unavailable): in CI a
// missing broker is a broken build, never a quiet pass.
package retrytest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
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
		Unavailable(tb, "no RabbitMQ broker (set AMQP_URL, run one on localhost, or start Docker): %s", reason)
	}
	return url
}

func find() (string, string) {
	if u := os.Getenv("AMQP_URL"); u != "" {
		if err := ping(u); err != nil {
			return "", fmt.Sprintf("AMQP_URL=%s is set but unreachable: %v", retry.RedactURL(u), retry.RedactError(err, u))
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

// Routes are the work queues the tests use when a topology names none.
var Routes = []retry.Route{{Queue: "email-queue", Key: "email"}, {Queue: "webhook-queue", Key: "webhook"}}

// Declare gives topo a unique prefix (and Routes, if it has none),
// declares it on conn's broker, and deletes all of it, messages included,
// when the test ends.
func Declare(tb testing.TB, conn *amqp.Connection, topo retry.Topology) retry.Topology {
	tb.Helper()
	topo.Prefix = Prefix(tb)
	if len(topo.Routes) == 0 {
		topo.Routes = Routes
	}
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

// Depth is how many messages queue holds now, ready and unacked.
func Depth(tb testing.TB, conn *amqp.Connection, queue string) int {
	tb.Helper()
	ch, err := conn.Channel()
	if err != nil {
		tb.Fatal(err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return q.Messages
}

// TakeAll takes every message queue holds now, acking each, and counts
// them by message id: how a test sees what arrived, and how often.
func TakeAll(tb testing.TB, conn *amqp.Connection, queue string) map[string]int {
	tb.Helper()
	ch, err := conn.Channel()
	if err != nil {
		tb.Fatal(err)
	}
	defer ch.Close()
	out := map[string]int{}
	for {
		d, ok, err := ch.Get(queue, true /* autoAck */)
		if err != nil {
			tb.Fatal(err)
		}
		if !ok {
			return out
		}
		out[d.MessageId]++
	}
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

var (
	mgmtOnce   sync.Once
	mgmt       *retry.Management
	mgmtReason string
)

// Management returns a client of the test broker's management HTTP API
// (MANAGEMENT_URL if set, else derived from the broker's URL), or ends the
// test like URL does when the API does not answer: skipped, except under
// CI=true, where CI enables the plugin and its absence is a failure.
func Management(tb testing.TB) *retry.Management {
	tb.Helper()
	u := URL(tb)
	mgmtOnce.Do(func() {
		m, err := retry.ManagementFor(u)
		if v := os.Getenv("MANAGEMENT_URL"); v != "" {
			m, err = &retry.Management{URL: v, Vhost: "/"}, nil
		}
		if err != nil {
			mgmtReason = err.Error()
			return
		}
		if err := mgmtCall(m, http.MethodGet, "/api/overview", nil); err != nil {
			mgmtReason = err.Error()
			return
		}
		mgmt = m
	})
	if mgmt == nil {
		Unavailable(tb, "no RabbitMQ management API (rabbitmq-plugins enable rabbitmq_management, or set MANAGEMENT_URL): %s", mgmtReason)
	}
	return mgmt
}

// PublishHTTP puts a message into queue through the management API's
// default exchange: the way to make a message whose headers exceed the
// AMQP frame, which no AMQP 0-9-1 client can publish.
func PublishHTTP(tb testing.TB, m *retry.Management, queue, id string, headers map[string]any, body string) {
	tb.Helper()
	req := map[string]any{
		"properties":       map[string]any{"message_id": id, "delivery_mode": 2, "content_type": "application/json", "headers": headers},
		"routing_key":      queue,
		"payload":          body,
		"payload_encoding": "string",
	}
	b, err := json.Marshal(req)
	if err != nil {
		tb.Fatal(err)
	}
	if err := mgmtCall(m, http.MethodPost, "/api/exchanges/"+neturl.PathEscape(m.Vhost)+"/amq.default/publish", b); err != nil {
		tb.Fatalf("publish %q to %q over the management API: %v", id, queue, err)
	}
}

func mgmtCall(m *retry.Management, method, path string, body []byte) error {
	base, err := neturl.Parse(m.URL)
	if err != nil {
		return err
	}
	user := base.User
	base.User = nil
	req, err := http.NewRequest(method, strings.TrimSuffix(base.String(), "/")+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if user != nil {
		pass, _ := user.Password()
		req.SetBasicAuth(user.Username(), pass)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s %s", method, path, resp.Status, out)
	}
	if strings.Contains(string(out), `"routed":false`) {
		return fmt.Errorf("%s %s: not routed", method, path)
	}
	return nil
}
