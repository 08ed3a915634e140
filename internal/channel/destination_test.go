package channel

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWebhookDestination(t *testing.T) {
	tests := []struct {
		name string
		part WebhookPart
		want map[string]string
	}{
		{"host and port, no path or query", WebhookPart{URL: "https://hooks.example.com:8443/t/abc?token=s3cret"},
			map[string]string{"server.address": "hooks.example.com", "server.port": "8443"}},
		{"https's port", WebhookPart{URL: "https://hooks.example.com/x"},
			map[string]string{"server.address": "hooks.example.com", "server.port": "443"}},
		{"http's port", WebhookPart{URL: "http://192.0.2.1/x"},
			map[string]string{"server.address": "192.0.2.1", "server.port": "80"}},
		{"an IPv6 literal", WebhookPart{URL: "http://[2001:db8::1]:9000/x"},
			map[string]string{"server.address": "2001:db8::1", "server.port": "9000"}},
		{"an endpoint", WebhookPart{Endpoint: "ep_3kq7ymzd5vbxw2n4c6f8h2j4la"},
			map[string]string{"relay.webhook.endpoint": "ep_3kq7ymzd5vbxw2n4c6f8h2j4la"}},
		{"no URL", WebhookPart{}, map[string]string{}},
		{"not a URL", WebhookPart{URL: "::"}, map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]string{}
			for _, kv := range tt.part.destination() {
				got[string(kv.Key)] = kv.Value.Emit()
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("destination (-want +got):\n%s", diff)
			}
		})
	}
}
