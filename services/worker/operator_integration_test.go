//go:build integration

package worker_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/events"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
	"github.com/relay-demo/relay/webhooks"
)

// operatorReceiver is the operator's endpoint: a real HTTP server that
// verifies each request's Standard Webhooks signature with the operator's
// secret, keeps the events it verified, and answers status.
type operatorReceiver struct {
	srv *httptest.Server

	mu       sync.Mutex
	verified []notification.Operational
	ids      []string // the webhook-id of each
	refused  []string // why a request was refused
	requests int
}

func newOperatorReceiver(t *testing.T, secret string, status int) *operatorReceiver {
	t.Helper()
	v, err := webhooks.NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	r := &operatorReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.requests++
		if err := v.Verify(req.Header, body, time.Now()); err != nil {
			r.refused = append(r.refused, err.Error())
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var op notification.Operational
		if err := json.Unmarshal(body, &op); err != nil {
			r.refused = append(r.refused, "not an operational event: "+err.Error())
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.verified = append(r.verified, op)
		r.ids = append(r.ids, req.Header.Get(webhooks.HeaderID))
		w.WriteHeader(status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// parkedAbout returns the copy.parked events it verified about
// notification id.
func (r *operatorReceiver) parkedAbout(id string) []notification.Operational {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []notification.Operational
	for _, op := range r.verified {
		if op.Type == notification.OpCopyParked && op.Data.NotificationID == id {
			out = append(out, op)
		}
	}
	return out
}

func (r *operatorReceiver) count() (requests, refused int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests, len(r.refused)
}

// watchOps binds a queue of the test's own to the operational events of
// s's topology and collects them; it and the forwarder's queue are
// deleted once the processes stopped.
func watchOps(t *testing.T, s *stack) func() []notification.Operational {
	t.Helper()
	ch, err := s.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := events.Declare(ch, s.topo); err != nil {
		t.Fatal(err)
	}
	q := s.topo.Name("test-ops")
	if _, err := ch.QueueDeclare(q, false /* durable */, false /* autoDelete */, false /* exclusive */, false /* noWait */, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.stop()
		for _, name := range []string{q, s.topo.Name(events.OperatorQueue)} {
			if _, err := ch.QueueDelete(name, false /* ifUnused */, false /* ifEmpty */, false /* noWait */); err != nil {
				t.Errorf("cleanup: delete %s: %v", name, err)
			}
		}
		ch.Close()
	})
	if err := ch.QueueBind(q, events.OpRoutingPrefix+"#", events.ExchangeName(s.topo), false /* noWait */, nil); err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume(q, "", true /* autoAck */, false /* exclusive */, false /* noLocal */, false /* noWait */, nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []notification.Operational
	go func() {
		for d := range ds {
			var op notification.Operational
			if json.Unmarshal(d.Body, &op) == nil {
				mu.Lock()
				got = append(got, op)
				mu.Unlock()
			}
		}
	}()
	return func() []notification.Operational {
		mu.Lock()
		defer mu.Unlock()
		return append([]notification.Operational(nil), got...)
	}
}

// sendWebhook publishes a webhook copy of notification id to url, as the
// API does.
func (s *stack) sendWebhook(t *testing.T, id, url string) {
	t.Helper()
	pub, err := retry.NewPublisher(s.conn, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	note := &notification.Notification{V: 1, ID: id, CreatedAt: time.Now().UTC(), Parts: map[string]json.RawMessage{
		"webhook": json.RawMessage(`{"url":` + strconv.Quote(url) + `,"payload":{"n":1}}`)}}
	body, _ := json.Marshal(note.For("webhook"))
	if err := pub.Publish(context.Background(), s.topo.Ingress(), "webhook", amqp.Publishing{
		MessageId: id, ContentType: notification.ContentType, DeliveryMode: amqp.Persistent,
		Timestamp: time.Now(), Body: body}); err != nil {
		t.Fatal(err)
	}
}

func TestOperatorWebhookOnParkedCopy(t *testing.T) {
	secret := webhooks.NewSecret()
	op := newOperatorReceiver(t, secret, http.StatusNoContent)
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	defer failing.Close()
	s := start(t, map[string]string{"RETRY_MAX": "2",
		"OPERATOR_WEBHOOK_URL": op.srv.URL + "/relay-events", "OPERATOR_WEBHOOK_SECRET": secret})
	seen := watchOps(t, s)

	id := "ntf_" + strings.ReplaceAll(s.topo.Prefix, ".", "")
	s.sendWebhook(t, id, failing.URL+"/hook")

	// On the events exchange: the park, with its reason and last error.
	var onExchange notification.Operational
	retrytest.Eventually(t, 30*time.Second, func() bool {
		for _, ev := range seen() {
			if ev.Type == notification.OpCopyParked && ev.Data.NotificationID == id {
				onExchange = ev
				return true
			}
		}
		return false
	}, "no copy.parked event on the events exchange")
	if d := onExchange.Data; d.Reason != retry.ReasonMaxRetries || !strings.Contains(d.LastError, "503") || d.Channel != "webhook" {
		t.Errorf("copy.parked data %+v, want reason max-retries, a last error with 503, channel webhook", d)
	}

	// At the operator's endpoint: the same event, signed with the
	// operator's secret, with a webhook-id of its own.
	retrytest.Eventually(t, 30*time.Second, func() bool { return len(op.parkedAbout(id)) > 0 },
		"the operator webhook did not receive copy.parked")
	got := op.parkedAbout(id)[0]
	if got.ID != onExchange.ID || got.Data != onExchange.Data {
		t.Errorf("operator webhook carried %+v, want the event on the exchange %+v", got, onExchange)
	}
	if _, refused := op.count(); refused != 0 {
		t.Errorf("the receiver refused %d requests: %v", refused, op.refused)
	}
	op.mu.Lock()
	if want := notification.OperatorIDPrefix + strings.TrimPrefix(got.ID, events.OpIDPrefix); op.ids[0] != want {
		t.Errorf("webhook-id %q, want %q", op.ids[0], want)
	}
	op.mu.Unlock()

}

func TestOperatorWebhookDoesNotReportItself(t *testing.T) {
	secret := webhooks.NewSecret()
	// The operator's endpoint refuses everything for good: its webhook
	// is parked at once.
	op := newOperatorReceiver(t, secret, http.StatusGone)
	s := start(t, map[string]string{"RETRY_MAX": "2",
		"OPERATOR_WEBHOOK_URL": op.srv.URL + "/relay-events", "OPERATOR_WEBHOOK_SECRET": secret})
	seen := watchOps(t, s)

	id := "ntf_" + strings.ReplaceAll(s.topo.Prefix, ".", "")
	s.sendWebhook(t, id, "http://127.0.0.1:1/closed")

	// The operator webhook about the park is parked in its turn, which
	// is an event on the exchange too ...
	retrytest.Eventually(t, 30*time.Second, func() bool {
		for _, ev := range seen() {
			if ev.Type == notification.OpCopyParked && strings.HasPrefix(ev.Data.NotificationID, notification.OperatorIDPrefix) {
				return true
			}
		}
		return false
	}, "the operator webhook's park is no event on the exchange")
	// ... but never another operator webhook. The forwarder takes its
	// events in order: once a marker published after that park has reached
	// the receiver, the park was forwarded or skipped.
	marker := notification.Operational{Type: notification.OpEndpointEnabled, ID: events.NewOpID(), Timestamp: time.Now().UTC(),
		Service: "test", Data: notification.OpData{EndpointID: "ep_marker"}}
	body, _ := json.Marshal(marker)
	ch, err := s.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Publish(events.ExchangeName(s.topo), events.OpRoutingKey(marker.Type),
		false, // mandatory
		false, // immediate
		amqp.Publishing{ContentType: "application/json", UserId: retry.User(s.conn), Body: body}); err != nil {
		t.Fatal(err)
	}
	retrytest.Eventually(t, 30*time.Second, func() bool {
		op.mu.Lock()
		defer op.mu.Unlock()
		for _, ev := range op.verified {
			if ev.ID == marker.ID {
				return true
			}
		}
		return false
	}, "the marker did not reach the operator's endpoint")
	retrytest.Eventually(t, 30*time.Second, func() bool {
		return depthOf(t, s, events.OperatorQueue) == 0 && depthOf(t, s, "webhook-queue") == 0 &&
			depthOf(t, s, retry.ErrorQueue)+depthOf(t, s, retry.RequeueQueue) == 0
	}, "operator webhooks still moving")
	op.mu.Lock()
	defer op.mu.Unlock()
	if op.requests != 2 || len(op.refused) != 0 {
		t.Errorf("the operator's endpoint had %d requests (refused: %v), want 2, verified: the park and the marker", op.requests, op.refused)
	}
	for _, ev := range op.verified {
		if ev.Type == notification.OpCopyParked && strings.HasPrefix(ev.Data.NotificationID, notification.OperatorIDPrefix) {
			t.Errorf("the operator webhook was told of its own park: %+v", ev)
		}
	}
}
