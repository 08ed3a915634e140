package notification

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func valid() *Notification {
	return &Notification{V: 1, ID: "n1", CreatedAt: time.Unix(0, 0).UTC(), Parts: map[string]json.RawMessage{
		"email":   json.RawMessage(`{"to":["ada@example.com"],"subject":"Hi","text":"hello"}`),
		"webhook": json.RawMessage(`{"url":"https://example.com/hook","payload":{"a":1}}`),
	}}
}

func TestEncoding(t *testing.T) {
	body, err := json.Marshal(valid().For("webhook"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"v":1,"id":"n1","channel":"webhook","created_at":"1970-01-01T00:00:00Z","webhook":{"url":"https://example.com/hook","payload":{"a":1}}}`
	if string(body) != want {
		t.Errorf("copy encodes as\n%s\nwant\n%s", body, want)
	}
	if _, err := json.Marshal(&Notification{Parts: map[string]json.RawMessage{"id": json.RawMessage(`{}`)}}); err == nil {
		t.Error("a part called id encoded")
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
		if got.Channel != ch || got.ID != "n1" || !got.CreatedAt.Equal(n.CreatedAt) || len(got.Parts) != 1 {
			t.Errorf("%s copy decoded as %+v", ch, got)
		}
		var a, b any
		_ = json.Unmarshal(got.Parts[ch], &a)
		_ = json.Unmarshal(n.Parts[ch], &b)
		if diff := cmp.Diff(b, a); diff != "" {
			t.Errorf("%s part changed on the way (-sent +decoded):\n%s", ch, diff)
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
		{"null", `null`, "not null"},
		{"an array", `[]`, "decode notification"},
		{"wrong version", `{"v":2,"id":"x","email":{}}`, "unsupported notification version"},
		{"no version", `{"id":"x"}`, "unsupported notification version"},
		{"version a string", `{"v":"1","id":"x","email":{}}`, `field "v"`},
		{"no id", `{"v":1,"email":{}}`, "id:"},
		{"id too long", `{"v":1,"id":"` + strings.Repeat("x", MaxIDLength+1) + `","email":{}}`, "id:"},
		{"no part", `{"v":1,"id":"x"}`, "at least one part"},
		{"only null parts", `{"v":1,"id":"x","email":null}`, "at least one part"},
		{"copy with another channel's part", `{"v":1,"id":"x","channel":"email","webhook":{}}`, "channel:"},
		{"copy with two parts", `{"v":1,"id":"x","channel":"email","email":{},"webhook":{}}`, "channel:"},
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
