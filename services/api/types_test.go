package api

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

// withTypes gives the test server's topology the types otp and receipt.
func withTypes(d *Deps, _ *fakePublisher) {
	d.Topology.Types = map[string]retry.Policy{"otp": {Expiry: 10 * time.Minute}, "receipt": {}}
	d.Topology.TypeHeader = notification.HeaderType
}

// TestType checks that a notification's type goes out on every copy, in
// notification.HeaderType, and that a copy of no type carries none.
func TestType(t *testing.T) {
	tests := []struct {
		name string
		body string
		want any // the header on every copy; nil for none
	}{
		{"a type", `{"type":"otp",` + emailPart + `,` + webhookPart + `}`, "otp"},
		{"no type", bothParts, nil},
		{"an empty type is none", `{"type":"",` + emailPart + `}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, fake, _ := testServer(t, withTypes)
			rec := call(h, http.MethodPost, "/v1/notifications", tt.body, nil)
			if rec.Code != http.StatusAccepted {
				t.Fatalf("status = %d, want 202; body: %s", rec.Code, rec.Body)
			}
			msgs := fake.messages()
			if len(msgs) == 0 {
				t.Fatal("nothing published")
			}
			for _, m := range msgs {
				got, ok := m.Msg.Headers[notification.HeaderType]
				if tt.want == nil && ok || tt.want != nil && got != tt.want {
					t.Errorf("%s copy: %s = %v, want %v", m.Key, notification.HeaderType, got, tt.want)
				}
				if strings.Contains(string(m.Msg.Body), `"type"`) {
					t.Errorf("%s copy's body holds the type: %s", m.Key, m.Msg.Body)
				}
			}
			// The history's record, which GET /v1/notifications/{id}
			// shows as the payload, says the type.
			recs := fake.records()
			if len(recs) != 1 {
				t.Fatalf("%d records published, want 1", len(recs))
			}
			var payload struct {
				Type *string `json:"type"`
			}
			if err := json.Unmarshal(recs[0].Payload, &payload); err != nil {
				t.Fatal(err)
			}
			if tt.want == nil && payload.Type != nil || tt.want != nil && (payload.Type == nil || *payload.Type != tt.want) {
				t.Errorf("the record's payload %s: want type %v", recs[0].Payload, tt.want)
			}
		})
	}
}

// TestTypeUnknown checks that an unknown type is a 422 naming the field
// and the types there are, on the single route and in a batch.
func TestTypeUnknown(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Deps, *fakePublisher)
		want   string
	}{
		{"types configured", withTypes, `unknown type "sms-code": want one of otp, receipt`},
		{"no types configured", nil, "no types are configured (NOTIFICATION_TYPES)"},
	}
	body := `{"type":"sms-code",` + emailPart + `}`
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, fake, _ := testServer(t, tt.change)
			rec := call(h, http.MethodPost, "/v1/notifications", body, nil)
			if rec.Code != http.StatusUnprocessableEntity {
				t.Fatalf("status = %d, want 422; body: %s", rec.Code, rec.Body)
			}
			var p problemBody
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
				t.Fatal(err)
			}
			if len(p.Errors) != 1 || p.Errors[0].Field != "type" || !strings.Contains(p.Errors[0].Message, tt.want) {
				t.Errorf("errors = %+v, want one for type saying %q", p.Errors, tt.want)
			}
			if len(fake.messages()) != 0 {
				t.Error("a notification of an unknown type was published")
			}

			batch := `{"notifications":[` + body + `,{"type":"otp",` + webhookPart + `}]}`
			rec = call(h, http.MethodPost, "/v1/notifications/batch", batch, nil)
			quoted, _ := json.Marshal(tt.want)
			if !strings.Contains(rec.Body.String(), strings.Trim(string(quoted), `"`)) {
				t.Errorf("batch answer does not refuse the unknown type with %q: %d %s", tt.want, rec.Code, rec.Body)
			}
			if tt.change != nil {
				keys := []string{}
				for _, m := range fake.messages() {
					keys = append(keys, m.Key+"="+m.Msg.Headers[notification.HeaderType].(string))
				}
				if !slices.Equal(keys, []string{"webhook=otp"}) {
					t.Errorf("batch published %v, want the webhook copy of the known type alone", keys)
				}
			}
		})
	}
}

// TestFingerprintType checks that a request's type is part of what an
// Idempotency-Key holds it to: the same key with another type is another
// request, and no type hashes as before.
func TestFingerprintType(t *testing.T) {
	n := notification.Notification{V: 1, Parts: map[string]json.RawMessage{"webhook": json.RawMessage(`{}`)}}
	typed := n
	typed.Type = "otp"
	other := n
	other.Type = "receipt"
	base, a, b := fingerprint(&n, when{}), fingerprint(&typed, when{}), fingerprint(&other, when{})
	if string(base) == string(a) || string(a) == string(b) {
		t.Error("the type does not change the fingerprint")
	}
	if string(fingerprint(&typed, when{})) != string(a) {
		t.Error("the fingerprint of one request changes")
	}
}
