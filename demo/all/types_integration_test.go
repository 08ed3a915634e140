//go:build integration

package all_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// TestTypesEndToEnd runs every service with a notification type whose
// second retry would come back past its expiry, against a receiver that
// always fails: a copy of the type is parked as expired after its first
// retry, one of no type as max-retries after the default schedule, and
// the API's view of each says so (and the type, in the payload).
func TestTypesEndToEnd(t *testing.T) {
	prefix := retrytest.Prefix(t)
	const token = "e2e-token-0123456789abcdef"
	env := map[string]string{
		"AMQP_URL": retrytest.URL(t), "TOPOLOGY_PREFIX": prefix, "DELAY_BACKEND": "ttl",
		"RETRY_DELAYS": "100ms,200ms", "RETRY_MAX": "2", "FLAKY_RATE": "1",
		"NOTIFICATION_TYPES": "otp", "RETRY_OTP_DELAYS": "300ms,1m", "RETRY_OTP_EXPIRY": "20s",
		"API_TOKENS": token, "DATA_DIR": t.TempDir(), "HTTP_ADDR": anyPort, "FLAKY_HTTP_ADDR": anyPort, "FLAKY_SMTP_ADDR": anyPort,
	}
	topo := retry.Topology{Prefix: prefix, Routes: channel.Routes(), Backend: retry.TTL,
		Policy:     retry.Policy{Delays: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}},
		Types:      map[string]retry.Policy{"otp": {Delays: []time.Duration{300 * time.Millisecond, time.Minute}}},
		TypeHeader: notification.HeaderType}
	r := runOn(t, retrytest.Conn(t), env, topo)

	send := func(typ string) string {
		t.Helper()
		body := `{"webhook":{"url":"` + r.hooks + `/webhooks/e2e","payload":{}}}`
		if typ != "" {
			body = `{"type":"` + typ + `",` + body[1:]
		}
		return r.post(t, token, body)
	}
	type view struct {
		Payload struct {
			Type string `json:"type"`
		} `json:"payload"`
		Copies []struct {
			Status   string            `json:"status"`
			Reason   string            `json:"reason"`
			Attempts []json.RawMessage `json:"attempts"`
		} `json:"copies"`
	}
	get := func(id string) view {
		req, _ := http.NewRequest(http.MethodGet, r.api+"/v1/notifications/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		var v view
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return v
		}
		defer resp.Body.Close()
		_ = json.NewDecoder(resp.Body).Decode(&v)
		return v
	}
	otp, plain := send("otp"), send("")
	parked := func(id string) bool {
		v := get(id)
		return len(v.Copies) == 1 && v.Copies[0].Status == "parked"
	}
	retrytest.Eventually(t, 30*time.Second, func() bool { return parked(otp) && parked(plain) },
		"the copies were never parked: otp %+v, no type %+v", lazyView(func() any { return get(otp) }), lazyView(func() any { return get(plain) }))

	if v := get(otp); v.Copies[0].Reason != retry.ReasonExpired || v.Payload.Type != "otp" {
		t.Errorf("otp: parked as %q with payload type %q; want %s and otp", v.Copies[0].Reason, v.Payload.Type, retry.ReasonExpired)
	}
	if v := get(plain); v.Copies[0].Reason != retry.ReasonMaxRetries || v.Payload.Type != "" {
		t.Errorf("no type: parked as %q with payload type %q; want %s and none", v.Copies[0].Reason, v.Payload.Type, retry.ReasonMaxRetries)
	}
}

// lazyView formats what it returns only when a failure is written.
type lazyView func() any

func (l lazyView) String() string { b, _ := json.Marshal(l()); return string(b) }
