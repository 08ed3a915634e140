package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/internal/store/storetest"
	"github.com/relay-demo/relay/retry"
)

// The fixtures of the tests of what a public dashboard's visitor reads:
// texts that must never reach a visitor without a token, and two
// notifications, one with a parked copy, one with an email copy per
// recipient.
const (
	secretError   = "POST https://hooks.example/orders?key=s3cret: 503 Service Unavailable"
	secretPayload = "s3cret-payload"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func ms(v int64) *int64 { return &v }

func parkedNotification() *notification.View {
	return &notification.View{
		ID: "ntf_1", CreatedAt: t0, Accepted: true, Channels: []string{"email", "webhook"},
		Recipients: []string{"ada@example.com", "https://hooks.example/orders"},
		Payload:    json.RawMessage(`{"webhook":{"url":"https://hooks.example/orders","payload":{"note":"` + secretPayload + `"}}}`),
		Copies: []notification.Copy{
			{Channel: "email", Status: notification.StatusDelivered, AttemptCount: 1, UpdatedAt: t0.Add(time.Second),
				Attempts: []notification.Attempt{{Round: 0, N: 1, At: t0.Add(time.Second), Outcome: retry.Delivered, DurationMS: ms(12)}}},
			{Channel: "webhook", Status: notification.StatusParked, Reason: "max-retries", AttemptCount: 2, LastError: secretError, UpdatedAt: t0.Add(3 * time.Second),
				Attempts: []notification.Attempt{
					{Round: 0, N: 1, At: t0.Add(time.Second), Outcome: retry.Failed, Error: secretError, DelayMS: ms(100), DurationMS: ms(30)},
					{Round: 0, N: 2, At: t0.Add(3 * time.Second), Outcome: retry.Parked, Error: secretError, Reason: "max-retries", WaitedMS: ms(110)},
				}},
		},
	}
}

func splitNotification() *notification.View {
	return &notification.View{
		ID: "ntf_split", CreatedAt: t0, Accepted: true, Channels: []string{"email", "webhook"},
		Recipients: []string{"ok1@example.com", "reject@example.com", "https://hooks.example/orders"},
		Copies: []notification.Copy{
			{Channel: "email", Recipient: "ok1@example.com", Status: notification.StatusDelivered, AttemptCount: 1, UpdatedAt: t0.Add(time.Second),
				Attempts: []notification.Attempt{{N: 1, At: t0.Add(time.Second), Outcome: retry.Delivered}}},
			{Channel: "email", Recipient: "reject@example.com", Status: notification.StatusParked, Reason: "permanent", AttemptCount: 1, LastError: secretError,
				UpdatedAt: t0.Add(time.Second), Attempts: []notification.Attempt{
					{N: 1, At: t0.Add(time.Second), Outcome: retry.Parked, Error: secretError, Reason: "permanent"}}},
			{Channel: "webhook", Status: notification.StatusDelivered, AttemptCount: 1, UpdatedAt: t0.Add(time.Second),
				Attempts: []notification.Attempt{{N: 1, At: t0.Add(time.Second), Outcome: retry.Delivered}}},
		},
	}
}

// fakeHistory is an in-memory history that only reads: its other
// methods are the nil HistoryStore's.
type fakeHistory struct {
	HistoryStore
	notifications []*notification.View
	err           error
}

func (f *fakeHistory) Get(_ context.Context, id string) (*notification.View, error) {
	if f.err != nil {
		return nil, f.err
	}
	for _, n := range f.notifications {
		if n.ID == id {
			return n, nil
		}
	}
	return nil, fmt.Errorf("notification %q: %w", id, store.ErrNotFound)
}

func (f *fakeHistory) List(_ context.Context, q store.Query) (store.Page, error) {
	if f.err != nil {
		return store.Page{}, f.err
	}
	var p store.Page
	for _, n := range f.notifications {
		recipients := n.Recipients
		if q.Public {
			recipients = nil
			for _, r := range n.Recipients {
				recipients = append(recipients, notification.PublicRecipient(r))
			}
		}
		if q.Search != "" && !strings.HasPrefix(n.ID, q.Search) && !strings.Contains(strings.Join(recipients, " "), q.Search) {
			continue
		}
		s := store.Summary{ID: n.ID, CreatedAt: n.CreatedAt, Accepted: n.Accepted, Channels: n.Channels, Recipients: n.Recipients}
		keep := q.Status == ""
		for _, c := range n.Copies {
			s.Copies = append(s.Copies, notification.CopyStatus{Channel: c.Channel, Recipient: c.Recipient, Status: c.Status})
			keep = keep || c.Status == q.Status
		}
		if keep {
			p.Items = append(p.Items, s)
		}
	}
	return p, nil
}

// readServer is the API over store, the notifications open to visitors
// without a token when public (DASHBOARD_PUBLIC).
func readServer(t *testing.T, st HistoryStore, public bool) http.Handler {
	h, _, _ := testServer(t, func(d *Deps, _ *fakePublisher) { d.History, d.DashboardPublic = st, public })
	return h
}

// getAs GETs path with the Authorization header authorization, none when
// it is "".
func getAs(h http.Handler, path, authorization string) (int, string) {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

const goodToken = "Bearer " + tokenA

// TestReadNeedsAToken asks the notifications without a token, with a
// wrong one and with the right one, of the API of a private and a public
// dashboard: a visitor of a public one reads them redacted, and nothing
// else.
func TestReadNeedsAToken(t *testing.T) {
	paths := []string{"/v1/notifications", "/v1/notifications/ntf_1", "/v1/notifications?attempts=true"}
	tests := []struct {
		name          string
		public        bool
		authorization string
		wantStatus    int
		wantSecrets   bool // error texts and the payload in the answers
	}{
		{"private, no token", false, "", 401, false},
		{"private, wrong token", false, "Bearer nope-0123456789", 401, false},
		{"private, not a bearer token", false, "Basic YWxhZGRpbjpvcGVuc2VzYW1l", 401, false},
		{"private, right token", false, goodToken, 200, true},
		{"public, no token", true, "", 200, false},
		{"public, wrong token", true, "Bearer nope-0123456789", 401, false},
		{"public, right token", true, goodToken, 200, true},
	}
	for _, tt := range tests {
		h := readServer(t, &fakeHistory{notifications: []*notification.View{parkedNotification()}}, tt.public)
		for _, path := range paths {
			t.Run(tt.name+" "+path, func(t *testing.T) {
				req := httptest.NewRequest(http.MethodGet, path, nil)
				if tt.authorization != "" {
					req.Header.Set("Authorization", tt.authorization)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				body := rec.Body.String()
				if rec.Code != tt.wantStatus {
					t.Fatalf("GET %s = %d %s, want %d", path, rec.Code, body, tt.wantStatus)
				}
				if tt.wantStatus == 401 {
					if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" || !strings.Contains(body, `"status":401`) {
						t.Errorf("401 answer %q %s, want a problem", ct, body)
					}
					if rec.Header().Get("WWW-Authenticate") == "" {
						t.Error("401 without WWW-Authenticate")
					}
					return
				}
				if got := strings.Contains(body, "s3cret"); got != tt.wantSecrets && path == "/v1/notifications/ntf_1" {
					t.Errorf("answer holds the error text and payload: %v, want %v:\n%s", got, tt.wantSecrets, body)
				}
				if !tt.wantSecrets && strings.Contains(body, "s3cret") {
					t.Errorf("answer without a token holds a secret:\n%s", body)
				}
			})
		}
	}
	// Every other route refuses a visitor, as it refuses a request
	// without a token on a private dashboard.
	h := readServer(t, &fakeHistory{notifications: []*notification.View{parkedNotification()}}, true)
	for _, rq := range []struct{ method, path string }{
		{http.MethodPost, "/v1/notifications"}, {http.MethodDelete, "/v1/notifications/ntf_1"}, {http.MethodGet, "/v1/dead-letters"},
		{http.MethodPost, "/v1/dead-letters/replay"}, {http.MethodGet, "/v1/endpoints"}, {http.MethodGet, "/v1/providers"},
		{http.MethodPost, "/v1/dashboard/links"}, {http.MethodGet, "/v1/no-such-route"}, {http.MethodPut, "/v1/notifications"},
	} {
		rec := call(h, rq.method, rq.path, "{}", map[string]string{"Authorization": ""})
		if rec.Code != http.StatusUnauthorized || rec.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("a visitor's %s %s = %d %s, want 401", rq.method, rq.path, rec.Code, rec.Body)
		}
	}
}

func TestDetailRedacted(t *testing.T) {
	h := readServer(t, &fakeHistory{notifications: []*notification.View{parkedNotification()}}, true)
	var views [2]detailView
	var bodies [2]string
	for i, auth := range []string{"", goodToken} {
		code, body := getAs(h, "/v1/notifications/ntf_1", auth)
		if code != 200 {
			t.Fatalf("GET = %d %s", code, body)
		}
		if err := json.Unmarshal([]byte(body), &views[i]); err != nil {
			t.Fatal(err)
		}
		bodies[i] = body
	}
	anonymous, full := views[0], views[1]
	if !anonymous.Redacted || full.Redacted || strings.Contains(bodies[1], `"redacted"`) {
		t.Errorf("redacted: anonymous %v, authenticated %v; want true, false (and absent): %s", anonymous.Redacted, full.Redacted, bodies[1])
	}
	// The redacted view is the full one less the error texts and payload,
	// with each webhook URL as its scheme and host.
	want := full
	want.Redacted, want.Payload = true, nil
	want.Recipients = []string{"ada@example.com", "https://hooks.example/***"}
	want.Copies = append([]notification.Copy(nil), full.Copies...)
	for i := range want.Copies {
		c := &want.Copies[i]
		c.LastError = ""
		c.Attempts = append([]notification.Attempt(nil), c.Attempts...)
		for j := range c.Attempts {
			c.Attempts[j].Error = ""
		}
	}
	if diff := cmp.Diff(want, anonymous); diff != "" {
		t.Errorf("redacted view (-want +got):\n%s", diff)
	}
	if got := full.Copies[1].Attempts[1].Error; got != secretError {
		t.Errorf("authenticated view's error = %q, want the full text %q", got, secretError)
	}
}

// TestDetailRecipients shows each copy of a channel with a copy per
// recipient under its recipient, and a whole channel's copy under none.
func TestDetailRecipients(t *testing.T) {
	h := readServer(t, &fakeHistory{notifications: []*notification.View{splitNotification()}}, true)
	code, body := getAs(h, "/v1/notifications/ntf_split", "")
	if code != 200 {
		t.Fatalf("GET = %d %s", code, body)
	}
	var raw struct{ Copies []map[string]any }
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range raw.Copies {
		got = append(got, fmt.Sprintf("%v %v %v", c["channel"], c["recipient"], c["status"]))
	}
	want := []string{"email ok1@example.com delivered", "email reject@example.com parked", "webhook <nil> delivered"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("copies (-want +got):\n%s", diff)
	}
	if strings.Contains(body, "s3cret") {
		t.Errorf("the redacted detail holds the error text:\n%s", body)
	}
}

// TestListCopies: each notification of the list has each copy's status,
// which the dashboard keeps up to date from the live events.
func TestListCopies(t *testing.T) {
	st := &fakeHistory{notifications: []*notification.View{parkedNotification()}}
	tests := []struct {
		name     string
		store    *fakeHistory
		query    string
		status   int
		contains string
	}{
		{"every notification", st, "", 200, `{"notifications":[{"id":"ntf_1","created_at":"2026-03-01T12:00:00Z","channels":["email","webhook"],` +
			`"recipients":["ada@example.com","https://hooks.example/orders"],"status":{"email":"delivered","webhook":"parked"},` +
			`"copies":[{"channel":"email","status":"delivered"},{"channel":"webhook","status":"parked"}]}]}`},
		{"a copy per recipient", &fakeHistory{notifications: []*notification.View{splitNotification()}}, "?status=parked", 200,
			`"status":{"email":"parked","webhook":"delivered"},"copies":[{"channel":"email","recipient":"ok1@example.com","status":"delivered"},` +
				`{"channel":"email","recipient":"reject@example.com","status":"parked"},{"channel":"webhook","status":"delivered"}]}`},
		{"by recipient", st, "?q=ada@", 200, `"id":"ntf_1"`},
		{"no match", st, "?q=grace", 200, `{"notifications":[]}`},
		{"parked", st, "?status=parked&channel=webhook&limit=10", 200, `"id":"ntf_1"`},
		{"bad attempts", st, "?attempts=yes", 422, `"field":"attempts"`},
		{"too many with attempts", st, "?attempts=true&limit=51", 422, `"field":"limit","message":"at most 50 with attempts=true"`},
		{"store down", &fakeHistory{err: errors.New("database is locked at /data/history.db")}, "", 503, "try again shortly"},
		{"store down, with attempts", &fakeHistory{err: errors.New("database is locked at /data/history.db")}, "?attempts=true", 503, "try again shortly"},
		{"bad cursor", &fakeHistory{err: fmt.Errorf("decode: %w", store.ErrBadCursor)}, "?cursor=x", 422, `"field":"cursor"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := getAs(readServer(t, tt.store, false), "/v1/notifications"+tt.query, goodToken)
			if code != tt.status || !strings.Contains(body, tt.contains) {
				t.Errorf("GET = %d %s, want %d with %s", code, body, tt.status, tt.contains)
			}
			if strings.Contains(body, "/data/history.db") {
				t.Errorf("the store's error reached the client: %s", body)
			}
		})
	}
}

// TestListAttempts: with attempts=true, the list gives each copy its
// attempts, times and outcomes without the error texts, for the time
// axis the dashboard draws on each row.
func TestListAttempts(t *testing.T) {
	h := readServer(t, &fakeHistory{notifications: []*notification.View{parkedNotification()}}, true)
	for _, auth := range []string{"", goodToken} {
		code, body := getAs(h, "/v1/notifications?attempts=true", auth)
		if code != http.StatusOK {
			t.Fatalf("status %d: %s", code, body)
		}
		if strings.Contains(body, "s3cret") {
			t.Errorf("the list shows an error text or a payload: %s", body)
		}
		var got listView
		if err := json.Unmarshal([]byte(body), &got); err != nil || len(got.Notifications) != 1 {
			t.Fatalf("%v: %s", err, body)
		}
		want := []copyView{
			{CopyStatus: notification.CopyStatus{Channel: "email", Status: "delivered"},
				Attempts: []notification.Attempt{{N: 1, At: t0.Add(time.Second), Outcome: "delivered", DurationMS: ms(12)}}},
			{CopyStatus: notification.CopyStatus{Channel: "webhook", Status: "parked"}, Attempts: []notification.Attempt{
				{N: 1, At: t0.Add(time.Second), Outcome: "failed", DelayMS: ms(100), DurationMS: ms(30)},
				{N: 2, At: t0.Add(3 * time.Second), Outcome: "parked", Reason: "max-retries", WaitedMS: ms(110)},
			}},
		}
		if diff := cmp.Diff(want, got.Notifications[0].Copies); diff != "" {
			t.Errorf("copies (-want +got):\n%s", diff)
		}
	}
	// A notification pruned between the list and its detail keeps its
	// copies' statuses, without attempts.
	pruned := &prunedHistory{fakeHistory{notifications: []*notification.View{parkedNotification()}}}
	code, body := getAs(readServer(t, pruned, false), "/v1/notifications?attempts=true", goodToken)
	if want := `"copies":[{"channel":"email","status":"delivered"},{"channel":"webhook","status":"parked"}]`; code != 200 || !strings.Contains(body, want) {
		t.Errorf("GET = %d %s, want %s", code, body, want)
	}
}

// prunedHistory lists notifications it no longer has.
type prunedHistory struct{ fakeHistory }

func (*prunedHistory) Get(_ context.Context, id string) (*notification.View, error) {
	return nil, fmt.Errorf("notification %q: %w", id, store.ErrNotFound)
}

// TestPublicHidesURLSecrets: on a public dashboard, a visitor without a
// token sees each webhook URL as its scheme, host and a fixed mask, in
// every answer about notifications it can get: the list, with or without
// the attempts, a search and the detail (the dashboard's tests hold the
// live events to it). The secrets a receiver puts after the host, in the
// path (Slack's and Discord's webhook URLs are all path), the query or
// the user information, appear in none, and a search for them finds
// nothing; a token shows the URLs whole.
func TestPublicHidesURLSecrets(t *testing.T) {
	const slack = "https://hooks.example/services/T000/B000/XXXXsecretpath"
	urls := []string{slack, "https://hooks.example/in?tok=SECRET123", "https://user:pw0rd@hooks.example/basic#frag"}
	secrets := []string{"services", "T000", "B000", "XXXX", "secretpath", "/in", "tok=", "SECRET123", "user", "pw0rd", "basic", "frag"}
	n := &notification.View{ID: "ntf_hook", CreatedAt: t0, Accepted: true, Channels: []string{"email", "webhook"},
		Recipients: append([]string{"ada@example.com"}, urls...)}
	for _, u := range urls {
		// A copy per URL, as a channel that delivers to each recipient on
		// its own would have.
		n.Copies = append(n.Copies, notification.Copy{Channel: "webhook", Recipient: u, Status: notification.StatusDelivered, UpdatedAt: t0,
			Attempts: []notification.Attempt{{N: 1, At: t0, Outcome: retry.Delivered}}})
	}
	h := readServer(t, &fakeHistory{notifications: []*notification.View{n}}, true)
	leaks := func(what, body string) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(body, s) {
				t.Errorf("anonymous %s shows %q: %s", what, s, body)
			}
		}
	}
	for _, path := range []string{"/v1/notifications", "/v1/notifications/ntf_hook", "/v1/notifications?q=hooks.example",
		"/v1/notifications?q=ada", "/v1/notifications?attempts=true"} {
		code, body := getAs(h, path, "")
		if code != 200 || strings.Count(body, `"https://hooks.example/***"`) < len(urls) {
			t.Errorf("anonymous GET %s = %d %s, want every URL as https://hooks.example/***", path, code, body)
		}
		leaks("GET "+path, body)
	}
	for _, q := range append(secrets, "hooks.example/s", "example/in", "@hooks") {
		if _, body := getAs(h, "/v1/notifications?q="+url.QueryEscape(q), ""); !strings.Contains(body, `{"notifications":[]}`) {
			t.Errorf("anonymous search for %q found the notification: %s", q, body)
		}
	}
	for _, q := range []string{"XXXXsecretpath", "tok=", "pw0rd"} {
		if _, body := getAs(h, "/v1/notifications?q="+url.QueryEscape(q), goodToken); !strings.Contains(body, `"id":"ntf_hook"`) {
			t.Errorf("authenticated search for %q did not find the notification: %s", q, body)
		}
	}
	for _, path := range []string{"/v1/notifications/ntf_hook", "/v1/notifications?attempts=true"} {
		if _, body := getAs(h, path, goodToken); !strings.Contains(body, slack) {
			t.Errorf("authenticated GET %s without the whole URL: %s", path, body)
		}
	}
}

// oracleAlphabet is what the guesses of TestSearchIsNoOracle are made of:
// the characters of the hidden secrets and more.
const oracleAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789=&?/._-:@%"

// guessFrom plays a visitor who knows how a secret starts and learns the
// rest a character at a time: for each candidate, it searches for what it
// knows plus the candidate, one notification a page; a notification, or a
// next_cursor on an empty page, says the guess is part of some recipient.
// It returns the characters it recovered and how many requests it sent.
func guessFrom(search func(query string) listView, known string, max int) (recovered string, requests int) {
	hit := func(term string) bool {
		requests++
		page := search(url.Values{"q": {term}, "limit": {"1"}}.Encode())
		return len(page.Notifications) > 0 || page.NextCursor != ""
	}
	for len(recovered) < max {
		next := ""
		for _, c := range oracleAlphabet {
			if hit(known + recovered + string(c)) {
				next = string(c)
				break
			}
		}
		if next == "" {
			break
		}
		recovered += next
	}
	return recovered, requests
}

// TestSearchIsNoOracle attacks a public dashboard over a real store:
// notifications to webhook URLs with a token in
// their query and in their path, and a visitor without a token who knows
// how each secret starts, searches for it a character further each time
// with one notification a page, and reads the answers and their cursors.
// It recovers nothing, and every answer it gets is the answer to a search
// that matches nothing. The same script with a token recovers each secret
// whole: it is an attack that works wherever the search sees more than
// the searcher.
func TestSearchIsNoOracle(t *testing.T) {
	for _, backend := range storetest.Backends() {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			st := storetest.Open(t, backend)
			at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
			var accepted []notification.Accepted
			add := func(recipients ...string) {
				accepted = append(accepted, notification.Accepted{ID: fmt.Sprintf("ntf_%03d", len(accepted)), CreatedAt: at.Add(time.Duration(len(accepted)) * time.Second),
					Channels: []string{"webhook"}, Recipients: recipients, Payload: json.RawMessage(`{}`)})
			}
			for range 3 {
				add("http://127.0.0.1:19310/hook?token=k7q2zx9secret")
				add("ada@example.com")
				add("https://hooks.example/services/T000/B000/xxxxsecretpath")
				add("+15555550100")
			}
			if err := st.Accept(t.Context(), accepted); err != nil {
				t.Fatal(err)
			}
			h := readServer(t, st, true)
			answers := map[string]int{} // every answer without a token, and how often
			search := func(auth string) func(string) listView {
				return func(query string) listView {
					code, body := getAs(h, "/v1/notifications?"+query, auth)
					var page listView
					if err := json.Unmarshal([]byte(body), &page); code != 200 || err != nil {
						t.Fatalf("GET /v1/notifications?%s = %d %s", query, code, body)
					}
					if auth == "" {
						answers[body]++
					}
					return page
				}
			}
			_, nothing := getAs(h, "/v1/notifications?limit=1&q=no-such-thing", "")
			starts := []struct{ known, secret string }{
				{"token=", "k7q2zx9secret"},
				{"hook?", "token=k7q2zx9secret"},
				{"/services/", "t000/b000/xxxxsecretpath"},
				{"xxxx", "secretpath"},
			}
			sent := 0
			for _, s := range starts {
				got, n := guessFrom(search(""), s.known, len(s.secret))
				sent += n
				if got != "" {
					t.Errorf("a visitor who knows %q recovered %q in %d requests", s.known, got, n)
				}
				full, _ := guessFrom(search(goodToken), s.known, len(s.secret))
				if full != s.secret {
					t.Errorf("with a token, the script recovered %q after %q, want %q: it proves nothing", full, s.known, s.secret)
				}
			}
			if len(answers) != 1 || answers[nothing] != sent {
				t.Errorf("%d requests without a token got %d different answers, want each %q", sent, len(answers), nothing)
			}
			// What the visitor sees is found, a page at a time.
			page := search("")("q=hooks.example&limit=2")
			if len(page.Notifications) != 2 || page.NextCursor == "" {
				t.Errorf("a visitor's search for the host it sees: %+v, want a page of 2 and a cursor", page)
			}
		})
	}
}

// TestPublicSearchPages: a visitor's search pages on like any other, each
// page full, the cursor from the last notification it shows, none on the
// last page, over a history whose newest notifications match only in what
// the visitor does not see.
func TestPublicSearchPages(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var accepted []notification.Accepted
	for i := range 10 {
		recipient := fmt.Sprintf("https://hooks.example/in?user=grace%d", i) // hidden: matches "grace" only in the query
		if i < 5 {
			recipient = fmt.Sprintf("grace%d@example.com", i)
		}
		accepted = append(accepted, notification.Accepted{ID: fmt.Sprintf("ntf_%02d", i), CreatedAt: at.Add(time.Duration(i) * time.Second),
			Channels: []string{"email"}, Recipients: []string{recipient}})
	}
	if err := st.Accept(t.Context(), accepted); err != nil {
		t.Fatal(err)
	}
	h := readServer(t, st, true)
	var pages [][]string
	cursor := ""
	for range 5 {
		code, body := getAs(h, "/v1/notifications?limit=2&q=grace&cursor="+cursor, "")
		var page listView
		if err := json.Unmarshal([]byte(body), &page); code != 200 || err != nil {
			t.Fatalf("GET = %d %s", code, body)
		}
		var ids []string
		for _, n := range page.Notifications {
			ids = append(ids, n.ID+" "+strings.Join(n.Recipients, " "))
		}
		pages = append(pages, ids)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	want := [][]string{{"ntf_04 grace4@example.com", "ntf_03 grace3@example.com"}, {"ntf_02 grace2@example.com", "ntf_01 grace1@example.com"}, {"ntf_00 grace0@example.com"}}
	if fmt.Sprint(pages) != fmt.Sprint(want) {
		t.Errorf("pages %q, want %q", pages, want)
	}
}
