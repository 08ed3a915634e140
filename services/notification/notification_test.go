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
		{"decimal host", func(n *Notification) { n.Webhook.URL = "http://2130706433/hook" }, []string{"webhook.url"}},
		{"short host with port", func(n *Notification) { n.Webhook.URL = "http://127.1:8080/hook" }, []string{"webhook.url"}},
		{"canonical ipv4 host", func(n *Notification) { n.Webhook.URL = "https://192.0.2.1/hook" }, nil},
		{"bracketed ipv6 host", func(n *Notification) { n.Webhook.URL = "https://[2001:db8::1]:8443/hook" }, nil},
		{"host name with digits", func(n *Notification) { n.Webhook.URL = "https://1password.com/hook" }, nil},
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

func TestCheckHost(t *testing.T) {
	tests := []struct {
		host string // as in URL.Host: port and brackets included
		want bool   // refused
	}{
		// Numbers that parsers read as an IPv4 address, non-canonically.
		{"2130706433", true},
		{"0177.0.0.1", true},
		{"0x7f.1", true},
		{"127.1", true},
		{"0x7f000001", true},
		{"0X7F000001", true},
		{"017700000001", true},
		{"1.2.3.04", true},
		{"127.0.0.1.", true},
		{"127.0.0.1.:8080", true},
		{"127.000.000.001", true},
		{"0.0.0.0.", true},
		{"0", true},
		{"0x", true},
		{"10.0.0.0x1", true},
		{"1.2.3.4.5", true},
		{"256.1.1.1", true},
		{"example.com.123", true},
		{"example.0x7f", true},
		{"2130706433:80", true},
		{"１２７．０．０．１", true},
		{"127。0。0。1", true},
		{"０ｘ７ｆ.1", true},
		{"[127.0.0.1]", true},
		{"[127.0.0.1]:80", true},
		{"[example.com]", true},
		// Canonical addresses: the dial-time guard judges them.
		{"127.0.0.1", false},
		{"192.0.2.1:8443", false},
		{"8.8.8.8", false},
		{"0.0.0.0", false},
		{"[::1]", false},
		{"[::1]:8080", false},
		{"[2001:db8::1]", false},
		{"[::ffff:127.0.0.1]", false},
		{"[fe80::1%eth0]", false},
		// Host names, digits and all.
		{"example.com", false},
		{"example.com.", false},
		{"api2.example.com", false},
		{"1password.com", false},
		{"123.example", false},
		{"3com.com:443", false},
		{"0xdeadbeef.example", false},
		{"example.0xg", false},
		{"localhost", false},
		{"xn--bcher-kva.example", false},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			problem := checkHost(tt.host)
			if got := problem != ""; got != tt.want {
				t.Errorf("checkHost(%q) = %q, want refused %t", tt.host, problem, tt.want)
			}
		})
	}
}
