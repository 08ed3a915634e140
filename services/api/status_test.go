package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/query"
	"github.com/relay-demo/relay/internal/store/storetest"
)

// get calls h with a GET and the test token.
func get(h http.Handler, path string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.Header.Set("Authorization", "Bearer "+tokenA)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestNotificationStatus(t *testing.T) {
	store := storetest.Open(t, storetest.SQLite)
	ctx := context.Background()
	at := now.Add(-time.Minute)
	if err := store.Accept(ctx, []notification.Accepted{{ID: "ntf_a", CreatedAt: at, Channels: []string{"email", "webhook"},
		Recipients: []string{"ada@example.com", "https://hooks.example/a"}, Payload: json.RawMessage(`{"id":"ntf_a"}`)}}); err != nil {
		t.Fatal(err)
	}
	if err := store.Record(ctx, []notification.Event{
		{ID: "ntf_a", Channel: "email", Attempt: 1, Outcome: "failed", At: at.Add(time.Second), Error: "452 mailbox full", Service: "worker-email"},
		{ID: "ntf_a", Channel: "email", Attempt: 1, Outcome: "retrying", At: at.Add(time.Second), DelayMS: 500, Service: "retrier"},
		{ID: "ntf_a", Channel: "email", Attempt: 2, Outcome: "delivered", At: at.Add(2 * time.Second), Service: "worker-email"},
		{ID: "ntf_a", Channel: "webhook", Attempt: 1, Outcome: "parked", Reason: "permanent", Error: "410 Gone", At: at.Add(time.Second), Service: "worker-webhook"},
	}); err != nil {
		t.Fatal(err)
	}
	h, _, _ := testServer(t, func(d *Deps, _ *fakePublisher) { d.History = store })

	rec := get(h, "/v1/notifications/ntf_a")
	if rec.Code != http.StatusOK {
		t.Fatalf("GET = %d %s", rec.Code, rec.Body)
	}
	var v notification.View
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Copies) != 2 || v.Copies[0].Channel != "email" || v.Copies[0].Status != "delivered" || len(v.Copies[0].Attempts) != 2 ||
		v.Copies[0].Attempts[0].Error != "452 mailbox full" || *v.Copies[0].Attempts[0].DelayMS != 500 ||
		v.Copies[1].Status != "parked" || v.Copies[1].Reason != "permanent" || v.Copies[1].LastError != "410 Gone" {
		t.Errorf("notification = %s", rec.Body)
	}

	tests := []struct {
		name, path string
		status     int
		want       string
	}{
		{"unknown id", "/v1/notifications/ntf_nope", 404, `no notification has the id \"ntf_nope\"`},
		{"list", "/v1/notifications", 200, `"id":"ntf_a"`},
		{"by status", "/v1/notifications?status=parked&channel=webhook", 200, `"webhook":"parked"`},
		{"by status, none", "/v1/notifications?status=retrying", 200, `{"notifications":[]}`},
		{"search a recipient", "/v1/notifications?q=ADA@", 200, `"ntf_a"`},
		{"bad status", "/v1/notifications?status=lost", 422, `"field":"status"`},
		{"bad limit", "/v1/notifications?limit=abc", 422, `"field":"limit"`},
		{"bad since", "/v1/notifications?since=yesterday", 422, `"field":"since"`},
		{"unknown parameter", "/v1/notifications?colour=red", 422, `"field":"colour"`},
		{"a ';' in the query", "/v1/notifications?bogus=1;x", 422, `"field":"query"`},
		{"q as long as allowed", "/v1/notifications?q=" + strings.Repeat("x", query.MaxSearch), 200, `"notifications":[]`},
		{"q too long", "/v1/notifications?q=" + strings.Repeat("x", 50_001), 422, `"field":"q","message":"at most 256 characters, not 50001"`},
		{"bad cursor", "/v1/notifications?cursor=!!", 422, `"field":"cursor"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := get(h, tt.path)
			if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.want) {
				t.Errorf("GET %s = %d %s, want %d containing %s", tt.path, rec.Code, rec.Body, tt.status, tt.want)
			}
		})
	}

	noHistory, _, _ := testServer(t, nil)
	if rec := get(noHistory, "/v1/notifications/ntf_a"); rec.Code != http.StatusServiceUnavailable {
		t.Errorf("without a history: %d", rec.Code)
	}
	unauth := httptest.NewRecorder()
	h.ServeHTTP(unauth, httptest.NewRequest(http.MethodGet, "/v1/notifications/ntf_a", nil))
	if unauth.Code != http.StatusUnauthorized {
		t.Errorf("without a token: %d", unauth.Code)
	}
}

// TestNotificationStatusRecipients shows a notification whose email has
// a copy per recipient: each copy names its recipient, a copy of a whole
// channel names none, and the list shows the email as parked while one
// recipient's copy is.
func TestNotificationStatusRecipients(t *testing.T) {
	store := storetest.Open(t, storetest.SQLite)
	ctx := context.Background()
	at := now.Add(-time.Minute)
	if err := store.Accept(ctx, []notification.Accepted{{ID: "ntf_split", CreatedAt: at, Channels: []string{"email", "webhook"},
		Copies:     []notification.CopyRef{{Channel: "email", Recipient: "ok1@example.com"}, {Channel: "email", Recipient: "reject@example.com"}, {Channel: "webhook"}},
		Recipients: []string{"ok1@example.com", "reject@example.com", "https://hooks.example/a"}}}); err != nil {
		t.Fatal(err)
	}
	if err := store.Record(ctx, []notification.Event{
		{ID: "ntf_split", Channel: "email", Recipient: "ok1@example.com", Attempt: 1, Outcome: "delivered", At: at.Add(time.Second)},
		{ID: "ntf_split", Channel: "email", Recipient: "reject@example.com", Attempt: 1, Outcome: "parked", Reason: "permanent",
			Error: "550 no such user", At: at.Add(time.Second)},
		{ID: "ntf_split", Channel: "webhook", Attempt: 1, Outcome: "delivered", At: at.Add(time.Second)},
	}); err != nil {
		t.Fatal(err)
	}
	h, _, _ := testServer(t, func(d *Deps, _ *fakePublisher) { d.History = store })

	rec := get(h, "/v1/notifications/ntf_split")
	if rec.Code != http.StatusOK {
		t.Fatalf("GET = %d %s", rec.Code, rec.Body)
	}
	var raw struct{ Copies []map[string]any }
	if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range raw.Copies {
		r, named := c["recipient"]
		got = append(got, fmt.Sprintf("%v %v %v %v", c["channel"], r, named, c["status"]))
	}
	want := []string{"email ok1@example.com true delivered", "email reject@example.com true parked", "webhook <nil> false delivered"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("copies (-want +got):\n%s\n%s", diff, rec.Body)
	}

	for _, path := range []string{"/v1/notifications", "/v1/notifications?status=delivered&channel=email"} {
		rec = get(h, path)
		if want := `"status":{"email":"parked","webhook":"delivered"}`; rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), want) {
			t.Errorf("GET %s = %d %s, want %s", path, rec.Code, rec.Body, want)
		}
	}
}

// post sends a notification with an Idempotency-Key.
func post(h http.Handler, key, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/v1/notifications", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tokenA)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestIdempotencyWithHistory(t *testing.T) {
	store := storetest.Open(t, storetest.SQLite)
	h, fake, _ := testServer(t, func(d *Deps, _ *fakePublisher) { d.History = store })
	body := `{` + emailPart + `}`

	first := post(h, "order-1", body)
	if first.Code != http.StatusAccepted {
		t.Fatalf("first = %d %s", first.Code, first.Body)
	}
	// The same body with other whitespace is the same request.
	again := post(h, "order-1", "{ "+emailPart+" }\n")
	if again.Code != http.StatusAccepted || again.Body.String() != first.Body.String() || again.Header().Get("Idempotent-Replayed") != "true" {
		t.Errorf("repeat = %d %s %v, want the first answer replayed", again.Code, again.Body, again.Header())
	}
	if n := len(fake.messages()); n != 1 {
		t.Errorf("%d copies published, want 1: a repeat must not publish", n)
	}
	other := post(h, "order-1", `{"email":{"to":["bob@example.com"],"subject":"Hi","text":"hello"}}`)
	if other.Code != http.StatusUnprocessableEntity || !strings.Contains(other.Body.String(), ProblemKeyReused) {
		t.Errorf("same key, other body = %d %s, want 422 %s", other.Code, other.Body, ProblemKeyReused)
	}

	// Concurrent requests with one key publish once.
	var wg sync.WaitGroup
	codes := make(chan int, 20)
	for range 20 {
		wg.Go(func() { codes <- post(h, "order-2", body).Code })
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusAccepted {
			t.Errorf("a concurrent request got %d", c)
		}
	}
	if n := len(fake.messages()); n != 2 {
		t.Errorf("%d copies published after 20 concurrent requests with one key, want 2 in all", n)
	}

	// A failed publish frees the key for the retry.
	fake.err = errTest
	if rec := post(h, "order-3", body); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("with the broker failing = %d", rec.Code)
	}
	fake.err = nil
	if rec := post(h, "order-3", body); rec.Code != http.StatusAccepted || rec.Header().Get("Idempotent-Replayed") != "" {
		t.Errorf("retry after a failed publish = %d %v, want a fresh 202", rec.Code, rec.Header())
	}
}

var errTest = &testError{}

type testError struct{}

func (*testError) Error() string { return "broker says no" }
