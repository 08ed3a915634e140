//go:build integration

package worker_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
	"github.com/relay-demo/relay/webhooks"
)

// gateway is a real HTTP SMS gateway that counts the messages it took,
// by id, and every request; down, it answers each with 503.
type gateway struct {
	url  string
	down bool

	mu    sync.Mutex
	got   map[string]int
	tries int
}

func newGateway(t *testing.T, down bool) *gateway {
	t.Helper()
	g := &gateway{down: down, got: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.tries++
		if g.down {
			http.Error(w, "gateway down", http.StatusServiceUnavailable)
			return
		}
		g.got[r.Header.Get(webhooks.HeaderID)]++
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(srv.Close)
	g.url = srv.URL + "/send"
	return g
}

func (g *gateway) snapshot() (got map[string]int, tries int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	got = map[string]int{}
	for k, v := range g.got {
		got[k] = v
	}
	return got, g.tries
}

// TestSMSFailoverGatewayDown: the first of two gateways is down. Every
// message is delivered once, through the second; the attempt events name
// the gateway each went through, and the history store holds the first
// one's circuit open, for the API to show.
func TestSMSFailoverGatewayDown(t *testing.T) {
	one, two := newGateway(t, true), newGateway(t, false)
	dsn := filepath.Join(t.TempDir(), "history.db")
	s := startChannel(t, "sms", 1, map[string]string{
		"SMS_SECRET":          "whsec_" + base64.StdEncoding.EncodeToString([]byte("sms-failover-test-secret-0123456")),
		"WEBHOOK_ALLOW_CIDRS": "127.0.0.0/8,::1/128", "HISTORY_DSN": dsn,
		"SMS_PROVIDERS": "2", "SMS_1_NAME": "one", "SMS_1_URL": one.url, "SMS_2_NAME": "two", "SMS_2_URL": two.url,
		"SMS_TIMEOUT": "2s", "SMS_BREAKER_FAILURES": "2", "SMS_BREAKER_COOLDOWN": "5m",
	})
	const n = 20
	pub, err := retry.NewPublisher(s.conn, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	var ids []string
	for i := range n {
		id := fmt.Sprintf("ntf_%s_%d", strings.Trim(s.topo.Prefix, ".-"), i)
		note := &notification.Notification{V: 1, ID: id, CreatedAt: time.Now().UTC(), Parts: map[string]json.RawMessage{
			"sms": json.RawMessage(fmt.Sprintf(`{"to":"+1555000%04d","text":"hello"}`, i))}}
		body, _ := json.Marshal(note.For("sms"))
		if err := pub.Publish(context.Background(), s.topo.Ingress(), "sms", amqp.Publishing{
			MessageId: id, ContentType: notification.ContentType, DeliveryMode: amqp.Persistent,
			Timestamp: time.Now(), Body: body}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}

	var got map[string]int
	retrytest.Eventually(t, 60*time.Second, func() bool {
		got, _ = two.snapshot()
		return len(got) >= n
	}, "not every message reached the second gateway")
	if parked := s.parked(t); len(parked) != 0 {
		t.Fatalf("%d parked, want none: %+v", len(parked), parked[0])
	}
	for _, id := range ids {
		if got[id] != 1 {
			t.Errorf("%s reached the second gateway %d times, want once", id, got[id])
		}
	}
	// The circuit opened after two failures: the first gateway saw few of
	// the messages, not one try each.
	if _, tries := one.snapshot(); tries < 2 || tries >= n {
		t.Errorf("the first gateway was tried %d times, want from 2 (to open its circuit) to fewer than %d", tries, n)
	}

	var via map[string]int
	retrytest.Eventually(t, 10*time.Second, func() bool {
		via = map[string]int{}
		for _, e := range s.attempts(retry.Delivered) {
			via[e.Provider]++
		}
		return via["two"] >= n
	}, "not every delivery's event arrived")
	if via["two"] != n || len(via) != 1 {
		t.Errorf("delivered events by gateway %v, want all %d through two", via, n)
	}
	for _, e := range s.attempts(retry.Failed) {
		if e.Provider != "one" {
			t.Errorf("a failed attempt through %q, want every failure through one", e.Provider)
		}
	}

	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ps, err := st.Providers(context.Background(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 || ps[0].Name != "one" || ps[1].Name != "two" {
		t.Fatalf("the store holds providers %+v, want sms gateways one and two", ps)
	}
	if c := ps[0].Circuit; c.State != store.CircuitOpen || !strings.Contains(c.LastError, "503") {
		t.Errorf("gateway one's circuit in the store: %+v, want open after its 503s", c)
	}
	if c := ps[1].Circuit; c.State != store.CircuitClosed {
		t.Errorf("gateway two's circuit in the store: %+v, want closed", c)
	}
}
