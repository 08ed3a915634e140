//go:build integration

package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/events"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
	"github.com/relay-demo/relay/services/api"
)

// poll checks cond every 20ms until it holds or timeout passes.
func poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}

// apiProcess is the real `relay api`, run in-process against the broker
// on a topology of its own.
type apiProcess struct {
	base string // http://host:port
	topo retry.Topology
	conn *amqp.Connection // for the test's own look at the broker
	logs *retrytest.Buffer
	stop func() // stops the API and checks it returned cleanly; idempotent
}

// startAPI runs `relay api` with token as its one bearer token, waits for
// /readyz and deletes everything it declared when the test ends.
func startAPI(t *testing.T, token string) *apiProcess {
	t.Helper()
	return startAPIWith(t, token, nil, nil)
}

// startAPIWith is startAPI with the variables extra besides, and the
// types they configure, whose wait queues the test deletes too.
func startAPIWith(t *testing.T, token string, extra map[string]string, types map[string]retry.Policy) *apiProcess {
	t.Helper()
	url := retrytest.URL(t)
	prefix := retrytest.Prefix(t)
	env := map[string]string{
		"AMQP_URL": url, "TOPOLOGY_PREFIX": prefix, "DELAY_BACKEND": "ttl",
		"HTTP_ADDR": "127.0.0.1:0", "API_TOKENS": token, "DATA_DIR": t.TempDir(),
	}
	for k, v := range extra {
		env[k] = v
	}
	topo := retry.Topology{Prefix: prefix, Routes: channel.Routes(), Backend: retry.TTL}
	if len(types) > 0 {
		topo.Types, topo.TypeHeader = types, notification.HeaderType
	}
	conn := retrytest.Conn(t)
	t.Cleanup(func() {
		if err := topo.Delete(conn); err != nil {
			t.Error(err)
		}
		if ch, err := conn.Channel(); err == nil {
			_, _ = ch.QueueDelete(topo.Name(events.HistoryQueue), false, false, false)
			_ = ch.ExchangeDelete(events.ExchangeName(topo), false, false)
			ch.Close()
		}
	})

	ctx, cancel := context.WithCancel(context.Background())
	logs := &retrytest.Buffer{}
	done := make(chan error, 1)
	go func() { done <- api.Run(ctx, func(k string) string { return env[k] }, logs) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("api.Run: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("api.Run did not return after its context ended; log:\n%s", logs.String())
		}
	}
	t.Cleanup(stop)

	listening := regexp.MustCompile(`"msg":"listening",.*?"addr":"([^"]+)"`)
	var addr string
	if !poll(10*time.Second, func() bool {
		if m := listening.FindStringSubmatch(logs.String()); m != nil {
			addr = m[1]
		}
		return addr != ""
	}) {
		t.Fatalf("the API never listened; log:\n%s", logs.String())
	}
	base := "http://" + addr

	if !poll(15*time.Second, func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}) {
		t.Fatalf("/readyz never answered 200; log:\n%s", logs.String())
	}
	return &apiProcess{base: base, topo: topo, conn: conn, logs: logs, stop: stop}
}

// TestAPIProcess runs the real `relay api` in-process against the broker:
// a notification with both parts lands once in each work queue.
func TestAPIProcess(t *testing.T) {
	const token = "integration-token-0123456789"
	p := startAPI(t, token)
	base, topo, conn, logs, stop := p.base, p.topo, p.conn, p.logs, p.stop

	body := `{"email":{"to":["ada@example.com"],"subject":"Hi","text":"hello"},` +
		`"webhook":{"url":"https://example.com/hook","payload":{"order":42}}}`
	req, err := http.NewRequest(http.MethodPost, base+"/v1/notifications", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		ID       string   `json:"id"`
		Channels []string `json:"channels"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status = %d, want 202; log:\n%s", resp.StatusCode, logs.String())
	}
	if diff := cmp.Diff([]string{"email", "webhook"}, got.Channels); diff != "" {
		t.Errorf("channels (-want +got):\n%s", diff)
	}

	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	for _, r := range topo.WorkRoutes() {
		if !slices.Contains(got.Channels, r.Key) {
			continue // a channel the notification does not use
		}
		// The 202 came after the confirm, so the copy is already there.
		d, ok, err := ch.Get(r.Queue, true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Errorf("%s is empty", r.Queue)
			continue
		}
		n, err := notification.Decode(d.Body)
		if err != nil {
			t.Errorf("%s: %v", r.Queue, err)
			continue
		}
		if n.ID != got.ID || n.Channel != r.Key || d.MessageId != got.ID || d.DeliveryMode != amqp.Persistent || d.AppId != "relay-api" {
			t.Errorf("%s holds %+v (message id %s, delivery mode %d, app id %s), want the %s copy of %s",
				r.Queue, n, d.MessageId, d.DeliveryMode, d.AppId, r.Key, got.ID)
		}
		if _, more, err := ch.Get(r.Queue, true); err != nil || more {
			t.Errorf("%s holds more than one copy (err %v)", r.Queue, err)
		}
	}

	stop()
	if !strings.Contains(logs.String(), `"msg":"stopped"`) {
		t.Errorf("no clean stop in the log:\n%s", logs.String())
	}
}

// TestAPIBatch posts a batch of 100 notifications to the real API: every
// item is accepted, each of its copies is in its work queue once, with the
// single route's message properties, and the history knows every item.
func TestAPIBatch(t *testing.T) {
	const token = "integration-token-0123456789"
	p := startAPI(t, token)
	const items = 100
	parts := make([]string, items)
	for i := range parts {
		parts[i] = fmt.Sprintf(`{"email":{"to":["ada@example.com"],"subject":"Batch %d","text":"hello"},`+
			`"webhook":{"url":"https://example.com/hook","payload":{"item":%d}}}`, i, i)
	}
	body := `{"notifications":[` + strings.Join(parts, ",") + `]}`
	req, err := http.NewRequest(http.MethodPost, p.base+"/v1/notifications/batch", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Results []struct {
			ID       string   `json:"id"`
			Channels []string `json:"channels"`
		} `json:"results"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusAccepted || len(got.Results) != items {
		t.Fatalf("status = %d with %d results, want 202 with %d; log:\n%s", resp.StatusCode, len(got.Results), items, p.logs.String())
	}
	// Which item each id is, to check each copy holds its own item.
	index := map[string]int{}
	for i, r := range got.Results {
		if _, dup := index[r.ID]; dup || r.ID == "" {
			t.Fatalf("result %d has id %q: empty or given twice", i, r.ID)
		}
		index[r.ID] = i
		if diff := cmp.Diff([]string{"email", "webhook"}, r.Channels); diff != "" {
			t.Errorf("result %d channels (-want +got):\n%s", i, diff)
		}
	}

	ch, err := p.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	for _, r := range p.topo.WorkRoutes() {
		if !slices.Contains(got.Results[0].Channels, r.Key) {
			continue // a channel the items do not use
		}
		// The 202 came after every confirm, so every copy is already there.
		seen := map[string]int{}
		for {
			d, ok, err := ch.Get(r.Queue, true)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			seen[d.MessageId]++
			n, err := notification.Decode(d.Body)
			if err != nil {
				t.Errorf("%s: %v", r.Queue, err)
				continue
			}
			i, known := index[n.ID]
			if !known || n.ID != d.MessageId || n.Channel != r.Key || d.DeliveryMode != amqp.Persistent || d.AppId != "relay-api" {
				t.Errorf("%s holds %+v (message id %s, delivery mode %d, app id %s), not a %s copy of the batch",
					r.Queue, n, d.MessageId, d.DeliveryMode, d.AppId, r.Key)
				continue
			}
			if want := fmt.Sprintf("%d", i); r.Key == "webhook" && !strings.Contains(string(n.Parts["webhook"]), `"item":`+want) {
				t.Errorf("the webhook copy of item %d holds %s", i, n.Parts["webhook"])
			}
		}
		if len(seen) != items {
			t.Errorf("%s holds copies of %d notifications, want %d", r.Queue, len(seen), items)
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("%s holds %d copies of %s", r.Queue, n, id)
			}
		}
	}

	// The accepted records reach the history.
	missing := items
	if !poll(15*time.Second, func() bool {
		req, _ := http.NewRequest(http.MethodGet, p.base+"/v1/notifications?limit=500", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var page struct {
			Notifications []struct {
				ID string `json:"id"`
			} `json:"notifications"`
		}
		if json.NewDecoder(resp.Body).Decode(&page) != nil {
			return false
		}
		missing = items
		for _, n := range page.Notifications {
			if _, ok := index[n.ID]; ok {
				missing--
			}
		}
		return missing == 0
	}) {
		t.Errorf("the history lacks %d of the batch's %d notifications", missing, items)
	}
	p.stop()
}

// TestAPIBatchNacked sends a batch to the real API while the broker
// refuses every webhook copy with a negative confirm (a second queue bound
// to the webhook key takes nothing): the batch answers 207, each webhook
// item 503 and each email item accepted, with its copy in the email queue.
func TestAPIBatchNacked(t *testing.T) {
	const token = "integration-token-0123456789"
	p := startAPI(t, token)
	ch, err := p.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	full := p.topo.Name("full-webhook")
	if _, err := ch.QueueDeclare(full,
		false, // durable
		false, // autoDelete
		false, // exclusive
		false, // noWait
		amqp.Table{"x-max-length": int64(0), "x-overflow": "reject-publish"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := p.conn.Channel()
		if err != nil {
			t.Errorf("delete %s: %v", full, err)
			return
		}
		defer c.Close()
		if _, err := c.QueueDelete(full, false /* ifUnused */, false /* ifEmpty */, false /* noWait */); err != nil {
			t.Errorf("delete %s: %v", full, err)
		}
	})
	if err := ch.QueueBind(full, "webhook", p.topo.Ingress(), false /* noWait */, nil); err != nil {
		t.Fatal(err)
	}

	const items = 10
	parts := make([]string, items)
	for i := range parts {
		parts[i] = fmt.Sprintf(`{"email":{"to":["ada@example.com"],"subject":"Batch %d","text":"hello"}}`, i)
		if i%2 == 1 {
			parts[i] = fmt.Sprintf(`{"webhook":{"url":"https://example.com/hook","payload":{"item":%d}}}`, i)
		}
	}
	req, err := http.NewRequest(http.MethodPost, p.base+"/v1/notifications/batch",
		strings.NewReader(`{"notifications":[`+strings.Join(parts, ",")+`]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Results []struct {
			ID     string `json:"id"`
			Status int    `json:"status"`
		} `json:"results"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusMultiStatus || len(got.Results) != items {
		t.Fatalf("status = %d with %d results, want 207 with %d; log:\n%s", resp.StatusCode, len(got.Results), items, p.logs.String())
	}
	accepted := map[string]bool{}
	for i, r := range got.Results {
		switch {
		case i%2 == 1 && (r.ID != "" || r.Status != http.StatusServiceUnavailable):
			t.Errorf("webhook item %d = %+v, want a 503 problem", i, r)
		case i%2 == 0 && (r.ID == "" || r.Status != 0):
			t.Errorf("email item %d = %+v, want accepted", i, r)
		case i%2 == 0:
			accepted[r.ID] = true
		}
	}
	var email string
	for _, r := range p.topo.WorkRoutes() {
		if r.Key == "email" {
			email = r.Queue
		}
	}
	held := map[string]bool{}
	for {
		d, ok, err := ch.Get(email, true /* autoAck */)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		held[d.MessageId] = true
	}
	if diff := cmp.Diff(accepted, held); diff != "" {
		t.Errorf("email queue against the accepted items (-accepted +held):\n%s", diff)
	}
	p.stop()
}
