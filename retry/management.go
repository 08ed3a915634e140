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
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
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

	// mu guards the check that the API belongs to the cluster relay
	// connects to (see Check).
	mu      sync.Mutex
	cluster string // the cluster_name the broker announced over AMQP
	checked bool   // the API has answered the check
	wrong   error  // its answer: nil, or why the API is another's
}

// ErrOtherCluster is Check's error for a management API that answers for
// another cluster than the one relay is connected to over AMQP: on a host
// with several brokers, port 15672 of the AMQP URL's host is often
// another broker's.
var ErrOtherCluster = errors.New("the management API belongs to another cluster")

// Check tells whether the management API belongs to the cluster conn is
// connected to: the cluster_name of its /api/overview must be the one the
// broker announced when conn opened (the server property cluster_name;
// every node of a cluster announces the same). The first answer is kept:
// once the API has answered, Check returns at once, and every later
// request of the client fails with the same error if the API is another
// cluster's (ErrOtherCluster). An API that cannot be reached has not
// answered: the next call asks again. conn may be nil once the client has
// seen a connection; before, and on a connection without cluster_name,
// there is nothing to compare and Check returns nil.
func (m *Management) Check(ctx context.Context, conn *amqp.Connection) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cluster == "" && conn != nil {
		m.cluster, _ = conn.Properties["cluster_name"].(string)
	}
	if m.checked || m.cluster == "" {
		return m.wrong
	}
	var ov struct {
		ClusterName string `json:"cluster_name"`
	}
	err := m.request(ctx, http.MethodGet, "/api/overview", nil, &ov)
	var status *statusError
	switch {
	case err == nil && ov.ClusterName == m.cluster:
	case err == nil:
		m.wrong = fmt.Errorf("%w: %s answers for cluster %q, the broker relay connects to is in cluster %q",
			ErrOtherCluster, RedactURL(m.URL), ov.ClusterName, m.cluster)
	case errors.As(err, &status) && status.code/100 == 4:
		// Not found, or refused credentials: not the API of this
		// broker, or not one relay may use.
		m.wrong = fmt.Errorf("%w: %s does not answer as the management API of cluster %q: %v",
			ErrOtherCluster, RedactURL(m.URL), m.cluster, err)
	default:
		return fmt.Errorf("check the management API %s: %w", RedactURL(m.URL), err)
	}
	m.checked = true
	return m.wrong
}

// statusError is an answer of the API other than 2xx.
type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return e.msg }

// ErrManagementUnknown is ManagementFor's error for an AMQP URL that names
// a port other than the default: a broker moved off 5672 has moved its
// management API off 15672 too, to a port the AMQP URL does not tell, and
// port 15672 of its host is likely another broker's.
var ErrManagementUnknown = errors.New("the management API's address cannot be derived from the AMQP URL")

// ManagementFor derives the management API's address from an AMQP URL on
// the default port (5672, or 5671 for amqps): the same host and
// credentials, port 15672 (15671 and https for amqps), and the URL's
// virtual host. For an AMQP URL on any other port it derives nothing
// (ErrManagementUnknown): give that broker's management API yourself.
func ManagementFor(amqpURL string) (*Management, error) {
	u, err := url.Parse(amqpURL)
	if err != nil {
		return nil, errors.New("derive the management API address: the AMQP URL does not parse")
	}
	scheme, amqpPort, port := "http", "5672", "15672"
	switch u.Scheme {
	case "amqp":
	case "amqps":
		scheme, amqpPort, port = "https", "5671", "15671"
	default:
		return nil, fmt.Errorf("derive the management API address: scheme %q, want amqp or amqps", u.Scheme)
	}
	if p := u.Port(); p != "" && p != amqpPort {
		return nil, fmt.Errorf("%w: it names port %s, not %s, so port %s of %s may be another broker's API",
			ErrManagementUnknown, p, amqpPort, port, u.Hostname())
	}
	vhost, err := VhostOf(amqpURL)
	if err != nil {
		return nil, fmt.Errorf("derive the management API address: %w", err)
	}
	m := &url.URL{Scheme: scheme, Host: net.JoinHostPort(u.Hostname(), port), User: u.User}
	if m.User == nil {
		m.User = url.UserPassword("guest", "guest") // amqp091-go's default too
	}
	return &Management{URL: m.String(), Vhost: vhost}, nil
}

// VhostOf is the virtual host an AMQP URL names: "/" when it names none.
// A management API whose address is given (MANAGEMENT_URL) serves the
// broker's virtual host of the AMQP URL, whatever its port.
func VhostOf(amqpURL string) (string, error) {
	u, err := url.Parse(amqpURL)
	if err != nil {
		return "", errors.New("the AMQP URL does not parse")
	}
	p := strings.TrimPrefix(u.Path, "/")
	if p == "" {
		return "/", nil
	}
	vhost, err := url.PathUnescape(p)
	if err != nil {
		return "", errors.New("the AMQP URL's vhost does not unescape")
	}
	return vhost, nil
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

// do sends one request and decodes the JSON answer into out, unless the
// API turned out to be another cluster's (see Check).
func (m *Management) do(ctx context.Context, method, path string, body []byte, out any) error {
	if err := m.Check(ctx, nil); err != nil {
		return err
	}
	return m.request(ctx, method, path, body, out)
}

// request sends one request and decodes the JSON answer into out.
func (m *Management) request(ctx context.Context, method, path string, body []byte, out any) error {
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
		return &statusError{code: resp.StatusCode, msg: fmt.Sprintf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(msg))}
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
