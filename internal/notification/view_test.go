package notification

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/retry"
)

// sample is a notification with every field of the answer set.
func sample() View {
	t0 := time.Date(2026, 5, 3, 10, 0, 0, 0, time.UTC)
	ms := func(v int64) *int64 { return &v }
	due, next := t0.Add(time.Minute), t0.Add(2*time.Minute)
	return View{ID: "ntf_1", CreatedAt: t0, DueAt: &due, Accepted: true, Channels: []string{"email"},
		Recipients: []string{"https://user:pw@hooks.example.org/x?token=s3cret"}, Payload: json.RawMessage(`{"a":1}`),
		Copies: []Copy{{Channel: "email", Recipient: "ada@example.com", Status: StatusRetrying, Reason: "max-retries", NextAttemptAt: &next,
			Round: 1, AttemptCount: 2, LastError: "452 mailbox full", UpdatedAt: t0,
			Attempts: []Attempt{{N: 1, Round: 1, At: t0, Outcome: retry.Failed, Error: "452 mailbox full", Reason: "r",
				DelayMS: ms(500), WaitedMS: ms(10), DurationMS: ms(20), Provider: "primary", Service: "worker-email"}}}}}
}

// TestViewJSON pins the answer of GET /v1/notifications/{id}: every field
// name, in order, as the API, the dashboard and relay status read it.
func TestViewJSON(t *testing.T) {
	got, err := json.Marshal(sample())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"ntf_1","created_at":"2026-05-03T10:00:00Z","due_at":"2026-05-03T10:01:00Z","accepted":true,` +
		`"channels":["email"],"recipients":["https://user:pw@hooks.example.org/x?token=s3cret"],"payload":{"a":1},` +
		`"copies":[{"channel":"email","recipient":"ada@example.com","status":"retrying","reason":"max-retries",` +
		`"next_attempt_at":"2026-05-03T10:02:00Z","round":1,"attempt_count":2,"last_error":"452 mailbox full",` +
		`"updated_at":"2026-05-03T10:00:00Z","attempts":[{"n":1,"round":1,"at":"2026-05-03T10:00:00Z","outcome":"failed",` +
		`"error":"452 mailbox full","reason":"r","delay_ms":500,"waited_ms":10,"duration_ms":20,"provider":"primary"}]}]}`
	if string(got) != want {
		t.Errorf("JSON:\n got %s\nwant %s", got, want)
	}
	empty, err := json.Marshal(View{}.Filled())
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"id":"","created_at":"0001-01-01T00:00:00Z","accepted":false,"channels":[],"recipients":[],"copies":[]}`; string(empty) != want {
		t.Errorf("empty JSON:\n got %s\nwant %s", empty, want)
	}
}

func TestFilled(t *testing.T) {
	v := View{Copies: []Copy{{Channel: "email"}}}.Filled()
	if v.Channels == nil || v.Recipients == nil || v.Copies[0].Attempts == nil {
		t.Errorf("Filled left a list nil: %+v", v)
	}
}

func TestRedacted(t *testing.T) {
	full := sample()
	hide := func(r string) string { return strings.ToUpper(r) }
	got := full.Redacted(hide)
	want := sample()
	want.Payload, want.Recipients = nil, []string{hide(full.Recipients[0])}
	want.Copies[0].Recipient, want.Copies[0].LastError = hide(full.Copies[0].Recipient), ""
	want.Copies[0].Attempts[0].Error = ""
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Redacted (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(sample(), full); diff != "" {
		t.Errorf("Redacted changed the view it was called on (-want +got):\n%s", diff)
	}
}

func TestDecided(t *testing.T) {
	t0 := time.Date(2026, 5, 3, 10, 0, 0, 0, time.UTC)
	failed := Attempt{N: 1, At: t0, Outcome: retry.Failed}
	tests := []struct {
		name string
		c    Copy
		i    int
		want bool
	}{
		{"failed, only the worker's report", Copy{UpdatedAt: t0, Attempts: []Attempt{failed}}, 0, false},
		{"failed, a decision after it", Copy{UpdatedAt: t0.Add(time.Millisecond), Attempts: []Attempt{failed}}, 0, true},
		{"failed, an attempt after it", Copy{UpdatedAt: t0, Attempts: []Attempt{failed, {N: 2, At: t0, Outcome: retry.Delivered}}}, 0, true},
		{"delivered", Copy{UpdatedAt: t0, Attempts: []Attempt{{N: 1, At: t0, Outcome: retry.Delivered}}}, 0, true},
		{"parked", Copy{UpdatedAt: t0, Attempts: []Attempt{{N: 1, At: t0, Outcome: retry.Parked}}}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.Decided(tt.i); got != tt.want {
				t.Errorf("Decided(%d) = %v, want %v", tt.i, got, tt.want)
			}
		})
	}
}
