package notification

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func valid() *Notification {
	return &Notification{V: 1, ID: "n1", CreatedAt: time.Unix(0, 0).UTC(),
		Email:   &Email{To: []string{"ada@example.com"}, Subject: "Hi", Text: "hello"},
		Webhook: &Webhook{URL: "https://example.com/hook", Payload: json.RawMessage(`{"a":1}`)}}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name       string
		change     func(n *Notification)
		wantFields []string
	}{
		{"valid", func(*Notification) {}, nil},
		{"no parts", func(n *Notification) { n.Email, n.Webhook = nil, nil }, []string{"email"}},
		{"no recipients", func(n *Notification) { n.Email.To = nil }, []string{"email.to"}},
		{"bad address", func(n *Notification) { n.Email.To = []string{"ada@example.com", "not an address"} }, []string{"email.to[1]"}},
		{"named address", func(n *Notification) { n.Email.To = []string{"Ada <ada@example.com>"} }, []string{"email.to[0]"}},
		{"header injection", func(n *Notification) { n.Email.Subject = "Hi\r\nBcc: x@y.z" }, []string{"email.subject"}},
		{"no body", func(n *Notification) { n.Email.Text = "" }, []string{"email.text"}},
		{"html only", func(n *Notification) { n.Email.Text, n.Email.HTML = "", "<p>hi</p>" }, nil},
		{"ftp url", func(n *Notification) { n.Webhook.URL = "ftp://example.com/x" }, []string{"webhook.url"}},
		{"relative url", func(n *Notification) { n.Webhook.URL = "/hook" }, []string{"webhook.url"}},
		{"url with credentials", func(n *Notification) { n.Webhook.URL = "https://u:p@example.com/" }, []string{"webhook.url"}},
		{"bad payload", func(n *Notification) { n.Webhook.Payload = json.RawMessage(`{`) }, []string{"webhook.payload"}},
		{"empty payload", func(n *Notification) { n.Webhook.Payload = nil }, []string{"webhook.payload"}},
		{"sms ok", func(n *Notification) { n.SMS = &SMS{To: "+15551234567", Text: "hi"} }, nil},
		{"sms not e164", func(n *Notification) { n.SMS = &SMS{To: "555-1234", Text: "hi"} }, []string{"sms.to"}},
		{"sms leading zero", func(n *Notification) { n.SMS = &SMS{To: "+0123", Text: "hi"} }, []string{"sms.to"}},
		{"sms empty text", func(n *Notification) { n.SMS = &SMS{To: "+15551234567"} }, []string{"sms.text"}},
		{"sms only", func(n *Notification) { n.Email, n.Webhook, n.SMS = nil, nil, &SMS{To: "+447700900123", Text: "hi"} }, nil},
		{"huge body", func(n *Notification) { n.Email.Text = strings.Repeat("x", MaxBody+1) }, []string{"email.text"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := valid()
			tt.change(n)
			err := n.Validate()
			var got []string
			var inv Invalid
			if errors.As(err, &inv) {
				for _, f := range inv {
					got = append(got, f.Field)
				}
			} else if err != nil {
				t.Fatalf("Validate() = %v, want Invalid", err)
			}
			if diff := cmp.Diff(tt.wantFields, got); diff != "" {
				t.Errorf("invalid fields (-want +got):\n%s", diff)
			}
		})
	}
}

func TestForAndDecode(t *testing.T) {
	n := valid()
	if diff := cmp.Diff([]string{"email", "webhook"}, n.Channels()); diff != "" {
		t.Error(diff)
	}
	for _, ch := range n.Channels() {
		body, err := json.Marshal(n.For(ch))
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(body)
		if err != nil {
			t.Fatalf("Decode(%s copy): %v", ch, err)
		}
		if got.Channel != ch || got.ID != "n1" || (ch == "email") != (got.Email != nil) || (ch == "webhook") != (got.Webhook != nil) {
			t.Errorf("%s copy decoded as %+v", ch, got)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string
	}{
		{"not json", `hello`, "decode notification"},
		{"wrong version", `{"v":2,"id":"x","email":{"to":["a@b.c"],"subject":"s","text":"t"}}`, "unsupported notification version"},
		{"no version", `{"id":"x"}`, "unsupported notification version"},
		{"no id", `{"v":1,"email":{"to":["a@b.c"],"subject":"s","text":"t"}}`, "id:"},
		{"invalid part", `{"v":1,"id":"x","email":{"to":[],"subject":"s","text":"t"}}`, "email.to"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.body))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Decode = %v, want error containing %q", err, tt.want)
			}
		})
	}
}
