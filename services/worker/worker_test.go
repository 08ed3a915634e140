package worker

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

// TestHandlerTarget names the endpoint of a webhook copy, and nothing for
// a bare URL or another channel's copy.
func TestHandlerTarget(t *testing.T) {
	const ep = "ep_3kq7ymzd5vbxw2n4c6f7h2j4la"
	tests := []struct {
		name    string
		channel string
		part    string
		want    string
	}{
		{"an endpoint", "webhook", `{"endpoint":"` + ep + `","payload":{}}`, ep},
		{"a bare URL", "webhook", `{"url":"https://example.com/hook","payload":{}}`, ""},
		{"an email", "email", `{"to":"a@example.com","subject":"s","text":"t"}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := notification.Notification{V: notification.Version, ID: "ntf_1", Channel: tt.channel, CreatedAt: time.Now(),
				Parts: map[string]json.RawMessage{tt.channel: json.RawMessage(tt.part)}}
			body, err := n.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			m := &retry.Message{ID: "ntf_1", Body: body}
			send := func(context.Context, *notification.Notification) error { return nil }
			if err := Handler(tt.channel, channel.Sender(send))(context.Background(), m); err != nil {
				t.Fatalf("handle: %v", err)
			}
			if m.Target != tt.want {
				t.Errorf("Target = %q, want %q", m.Target, tt.want)
			}
		})
	}
}
