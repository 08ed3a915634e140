//go:build integration

package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

// TestAPITypes runs the real `relay api` with a notification type: the
// topology it declares waits the type's delays (a wait queue of the ttl
// backend for each), a notification of the type goes out with it on its
// copy, and one of an unknown type is refused.
func TestAPITypes(t *testing.T) {
	p := startAPIWith(t, deadLetterToken, map[string]string{"NOTIFICATION_TYPES": "otp", "RETRY_OTP_DELAYS": "2s,7s", "RETRY_OTP_EXPIRY": "1m"},
		map[string]retry.Policy{"otp": {Delays: []time.Duration{2 * time.Second, 7 * time.Second}}})

	post := func(body string) int {
		t.Helper()
		code, _ := p.do(t, http.MethodPost, "/v1/notifications", body)
		return code
	}
	ch, err := p.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if _, err := ch.QueueDeclarePassive(p.topo.WaitQueue(7*time.Second), true, false, false, false, nil); err != nil {
		t.Fatalf("the API declared no wait queue for the otp type's 7s: %v", err)
	}

	if code := post(`{"type":"sms-code","webhook":{"url":"https://example.com/hook","payload":{}}}`); code != http.StatusUnprocessableEntity {
		t.Errorf("an unknown type: status %d, want 422", code)
	}
	if code := post(`{"type":"otp","webhook":{"url":"https://example.com/hook","payload":{}}}`); code != http.StatusAccepted {
		t.Fatalf("a known type: status %d, want 202; log:\n%s", code, p.logs.String())
	}
	var queue string
	for _, r := range p.topo.WorkRoutes() {
		if r.Key == "webhook" {
			queue = r.Queue
		}
	}
	// The 202 came after the confirm, so the copy is already there.
	d, ok, err := ch.Get(queue, true)
	switch {
	case err != nil:
		t.Fatal(err)
	case !ok:
		t.Fatalf("%s is empty", queue)
	case d.Headers[notification.HeaderType] != "otp":
		t.Errorf("the copy's %s = %v, want otp", notification.HeaderType, d.Headers[notification.HeaderType])
	}
	if _, more, err := ch.Get(queue, true); err != nil || more {
		t.Errorf("%s holds more than one copy (err %v): the refused notification went out", queue, err)
	}
}
