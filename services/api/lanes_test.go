package api

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/relay-demo/relay/retry"
)

// TestLanesByReceiver: with WORK_LANES above 1, the API publishes each
// copy to the lane its receiver picks: every webhook to one host, by any
// path, to one lane; an email's by its recipient,
// each recipient's copy on its own; and receivers spread over the lanes.
func TestLanesByReceiver(t *testing.T) {
	topo := retry.Topology{Prefix: "t.", Routes: []retry.Route{
		{Queue: "email-queue", Key: "email", Lanes: 4}, {Queue: "webhook-queue", Key: "webhook", Lanes: 4}}}
	var n atomic.Int64
	h, fake, _ := testServer(t, func(d *Deps, _ *fakePublisher) {
		d.Topology = topo
		d.NewID = func() string { return fmt.Sprintf("ntf_%026d", n.Add(1)) }
	})
	var items []string
	for i := range 40 {
		for _, path := range []string{"/a", "/b?x=1"} {
			items = append(items, fmt.Sprintf(`{"webhook":{"url":"https://h%d.example%s","payload":{}}}`, i, path))
		}
	}
	items = append(items, `{"email":{"to":["ada@example.com","bob@example.com","cy@example.org"],"subject":"Hi","text":"hello"}}`)
	req := httptest.NewRequest(http.MethodPost, "/v1/notifications/batch", strings.NewReader(`{"notifications":[`+strings.Join(items, ",")+`]}`))
	req.Header.Set("Authorization", "Bearer "+tokenA)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusAccepted {
		t.Fatalf("batch: %d %s", rec.Code, rec.Body)
	}
	bound := map[string]bool{}
	for _, r := range topo.WorkRoutes() {
		bound[r.Key] = true
	}
	hostLane := map[string]string{}
	lanes := map[string]bool{}
	for _, p := range fake.messages() {
		if !bound[p.Key] {
			t.Fatalf("a copy published with key %q, which binds no queue", p.Key)
		}
		body := string(p.Msg.Body)
		switch {
		case strings.Contains(body, `"url"`):
			i := strings.Index(body, "https://h")
			host := body[i : i+strings.Index(body[i:], ".example")]
			if k, ok := hostLane[host]; ok && k != p.Key {
				t.Errorf("two webhooks to %s went to lanes %s and %s", host, k, p.Key)
			}
			hostLane[host] = p.Key
			lanes[p.Key] = true
		default:
			r, _ := p.Msg.Headers["x-recipient"].(string)
			if want := topo.Lane("email", r).Key; p.Key != want {
				t.Errorf("the email to %q went to %s, want %s", r, p.Key, want)
			}
		}
	}
	if len(hostLane) != 40 || len(lanes) < 3 {
		t.Errorf("40 hosts' webhooks: %d hosts seen, in %d lanes; want 40, spread over at least 3 of 4", len(hostLane), len(lanes))
	}
}
