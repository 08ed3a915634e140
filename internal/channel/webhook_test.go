package channel

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/webhooks"
)

func TestCheckWebhook(t *testing.T) {
	const ep = "ep_3kq7ymzd5vbxw2n4c6f7h2j4la"
	tests := []struct {
		name string
		part string
		want []string // the fields at fault
	}{
		{"url", `{"url":"https://example.com/hook","payload":{}}`, nil},
		{"endpoint", `{"endpoint":"` + ep + `","payload":{}}`, nil},
		{"both", `{"url":"https://example.com/hook","endpoint":"` + ep + `","payload":{}}`, []string{"webhook.endpoint"}},
		{"neither", `{"payload":{}}`, []string{"webhook.url"}},
		{"port 0", `{"url":"https://example.com:0/hook","payload":{}}`, []string{"webhook.url"}},
		{"port 99999", `{"url":"https://example.com:99999/hook","payload":{}}`, []string{"webhook.url"}},
		{"endpoint upper case", `{"endpoint":"EP_3KQ7YMZD5VBXW2N4C6F8H2J4LA","payload":{}}`, []string{"webhook.endpoint"}},
		{"endpoint too short", `{"endpoint":"ep_3kq7","payload":{}}`, []string{"webhook.endpoint"}},
		{"endpoint without payload", `{"endpoint":"` + ep + `"}`, []string{"webhook.payload"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p WebhookPart
			if err := json.Unmarshal([]byte(tt.part), &p); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range Webhook.Check(&p) {
				got = append(got, e.Field)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("fields at fault (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWebhookRecipients(t *testing.T) {
	const ep = "ep_3kq7ymzd5vbxw2n4c6f7h2j4la"
	n := &notification.Notification{Parts: map[string]json.RawMessage{"webhook": json.RawMessage(`{"endpoint":"` + ep + `","payload":1}`)}}
	if got := Webhook.RecipientsOf(n); len(got) != 1 || got[0] != ep {
		t.Errorf("recipients of an endpoint part = %q, want the endpoint id", got)
	}
}

func TestCheckEndpointURL(t *testing.T) {
	for raw, bad := range map[string]bool{
		"https://hooks.example.com/in": false, "http://127.0.0.1:9090/webhooks/ok": false,
		"ftp://example.com/": true, "https://user:pw@example.com/": true, "http://0x7f000001/": true, "": true, "/relative": true,
		"https://hooks.example.com:1/in": false, "https://hooks.example.com:65535/in": false,
		"https://hooks.example.com:0/in": true, "https://hooks.example.com:99999/in": true, "https://hooks.example.com:65536/in": true,
		"https://[2001:db8::1]:0/in": true, "https://hooks.example.com:00443/in": false,
	} {
		if got := CheckEndpointURL(raw); (got != "") != bad {
			t.Errorf("CheckEndpointURL(%q) = %q, want a problem: %t", raw, got, bad)
		}
	}
}

func TestWebhookOpenEndpointConfig(t *testing.T) {
	secret := webhooks.NewSecret()
	tests := []struct {
		name, key, value string
		wantErr          string // "" for none
	}{
		{"defaults", "", "", ""},
		{"breaker off", "WEBHOOK_BREAKER_FAILURES", "0", ""},
		{"postgres", "HISTORY_DSN", "postgres://relay:s3cret@db:5432/relay", ""},
		{"no concurrency", "WEBHOOK_ENDPOINT_CONCURRENCY", "0", "WEBHOOK_ENDPOINT_CONCURRENCY"},
		{"negative failures", "WEBHOOK_BREAKER_FAILURES", "-1", "WEBHOOK_BREAKER_FAILURES"},
		{"no cooldown", "WEBHOOK_BREAKER_COOLDOWN", "0s", "WEBHOOK_BREAKER_COOLDOWN"},
		{"negative disable-after", "WEBHOOK_DISABLE_AFTER", "-1h", "WEBHOOK_DISABLE_AFTER"},
		{"never disable", "WEBHOOK_DISABLE_AFTER", "0", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Opening touches no store: it is opened by the first
			// delivery to an endpoint.
			t.Chdir(t.TempDir())
			env := map[string]string{"WEBHOOK_SECRET": secret, tt.key: tt.value}
			send, closeSend, err := Webhook.Open(func(k string) string { return env[k] }, nil)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				if send == nil || closeSend() != nil {
					t.Error("Open returned no sender, or one that does not close")
				}
				if _, err := os.Stat("data"); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("Open created the store's directory: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Open = %v, want an error naming %s", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error shows a password: %v", err)
			}
		})
	}
}
