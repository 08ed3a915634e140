package retry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Management is a client of RabbitMQ's management HTTP API (the
// rabbitmq_management plugin, shipped with every RabbitMQ). relay uses it
// for the one thing AMQP 0-9-1 cannot do: take a message off a queue
// without delivering it over an AMQP connection. A message whose headers
// exceed the connection's frame_max (one published over HTTP, MQTT, STOMP
// or AMQP 1.0, where that limit does not apply) closes every AMQP
// connection it is delivered to; the API reads it as JSON instead.
type Management struct {
	// URL is the API's base address with credentials, such as
	// http://guest:guest@localhost:15672.
	URL string
	// Vhost is the virtual host of the queues; empty means "/".
	Vhost string
	// Client makes the requests; nil means one with a 10 s timeout.
	Client *http.Client
}

// ManagementFor derives the management API's address from an AMQP URL: the
// same host and credentials, port 15672 (15671 and https for amqps), and
// the URL's virtual host.
func ManagementFor(amqpURL string) (*Management, error) {
	u, err := url.Parse(amqpURL)
	if err != nil {
		return nil, errors.New("derive the management API address: the AMQP URL does not parse")
	}
	scheme, port := "http", "15672"
	switch u.Scheme {
	case "amqp":
	case "amqps":
		scheme, port = "https", "15671"
	default:
		return nil, fmt.Errorf("derive the management API address: scheme %q, want amqp or amqps", u.Scheme)
	}
	vhost := "/"
	if p := strings.TrimPrefix(u.Path, "/"); p != "" {
		if vhost, err = url.PathUnescape(p); err != nil {
			return nil, errors.New("derive the management API address: the AMQP URL's vhost does not unescape")
		}
	}
	m := &url.URL{Scheme: scheme, Host: net.JoinHostPort(u.Hostname(), port), User: u.User}
	if m.User == nil {
		m.User = url.UserPassword("guest", "guest") // amqp091-go's default too
	}
	return &Management{URL: m.String(), Vhost: vhost}, nil
}

// mgmtMessage is one message as the API's queue "get" returns it.
type mgmtMessage struct {
	Payload         string          `json:"payload"`
	PayloadEncoding string          `json:"payload_encoding"`
	Properties      json.RawMessage `json:"properties"`
	Exchange        string          `json:"exchange"`
	RoutingKey      string          `json:"routing_key"`
}

// get takes the head message of queue, settling it with ackmode:
// "ack_requeue_false" removes it for good; "reject_requeue_true" puts it
// back (at the tail of a quorum queue). It returns nil when the queue is
// empty.
func (m *Management) get(ctx context.Context, queue, ackmode string) (*mgmtMessage, error) {
	body, _ := json.Marshal(map[string]any{"count": 1, "ackmode": ackmode, "encoding": "base64"})
	var out []mgmtMessage
	if err := m.do(ctx, http.MethodPost, "/api/queues/"+url.PathEscape(m.vhost())+"/"+url.PathEscape(queue)+"/get", body, &out); err != nil {
		return nil, fmt.Errorf("get from %q over the management API: %w", queue, err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return &out[0], nil
}

func (m *Management) vhost() string {
	if m.Vhost == "" {
		return "/"
	}
	return m.Vhost
}

// do sends one request and decodes the JSON answer into out.
func (m *Management) do(ctx context.Context, method, path string, body []byte, out any) error {
	base, err := url.Parse(m.URL)
	if err != nil || base.Host == "" {
		return errors.New("the management API URL does not parse")
	}
	user := base.User
	base.User = nil
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(base.String(), "/")+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if user != nil {
		pass, _ := user.Password()
		req.SetBasicAuth(user.Username(), pass)
	}
	req.Header.Set("Content-Type", "application/json")
	client := m.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(msg))
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
