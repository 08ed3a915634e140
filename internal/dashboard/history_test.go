package dashboard

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/history/historytest"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

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
	for _, backend := range historytest.Backends() {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			store := historytest.Open(t, backend)
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
			if err := store.Accept(t.Context(), accepted); err != nil {
				t.Fatal(err)
			}
			h := New(Deps{History: store, Authenticate: authenticate, Public: true})
			answers := map[string]int{} // every answer without a token, and how often
			search := func(auth string) func(string) listView {
				return func(query string) listView {
					resp, body := get(t, h, "/dashboard/notifications?"+query, auth)
					var page listView
					if err := json.Unmarshal([]byte(body), &page); resp.StatusCode != 200 || err != nil {
						t.Fatalf("GET /dashboard/notifications?%s = %d %s", query, resp.StatusCode, body)
					}
					if auth == "" {
						answers[body]++
					}
					return page
				}
			}
			_, nothing := get(t, h, "/dashboard/notifications?limit=1&q=no-such-thing", "")
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
				full, _ := guessFrom(search("Bearer "+goodToken), s.known, len(s.secret))
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
	store := historytest.Open(t, historytest.SQLite)
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
	if err := store.Accept(t.Context(), accepted); err != nil {
		t.Fatal(err)
	}
	h := New(Deps{History: store, Authenticate: authenticate, Public: true})
	var pages [][]string
	cursor := ""
	for range 5 {
		resp, body := get(t, h, "/dashboard/notifications?limit=2&q=grace&cursor="+cursor, "")
		var page listView
		if err := json.Unmarshal([]byte(body), &page); resp.StatusCode != 200 || err != nil {
			t.Fatalf("GET = %d %s", resp.StatusCode, body)
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

// TestStreamedStatusIsTheHistorys: every event the stream sends carries
// the status it leads its copy to and its rank, and once the history has
// recorded the events so far, the greatest of them by round, attempt and
// rank (the one the page keeps) carries the status the history shows: the
// page draws the history's status, not one of its own.
func TestStreamedStatusIsTheHistorys(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	step := func(outcome retry.Outcome, round, attempt int) notification.Event {
		return notification.Event{Type: "attempt", Outcome: outcome, ID: "ntf_stream", Channel: "webhook", Queue: "webhook-queue",
			Round: round, Attempt: attempt, At: at.Add(time.Duration(10*round+attempt) * time.Second), Service: "worker"}
	}
	type frame struct {
		Outcome retry.Outcome       `json:"outcome"`
		Status  notification.Status `json:"status"`
		Rank    int                 `json:"rank"`
	}
	tests := []struct {
		name string
		ev   notification.Event
		want frame
	}{
		{"due and requeued before any attempt", step(retry.Requeued, 0, 1), frame{retry.Requeued, notification.StatusScheduled, 2}},
		{"the first attempt fails", step(retry.Failed, 0, 1), frame{retry.Failed, notification.StatusRetrying, 1}},
		{"its retry is scheduled", step(retry.Retrying, 0, 1), frame{retry.Retrying, notification.StatusRetrying, 2}},
		{"requeued for the second", step(retry.Requeued, 0, 2), frame{retry.Requeued, notification.StatusRetrying, 2}},
		{"the second is parked", step(retry.Parked, 0, 2), frame{retry.Parked, notification.StatusParked, 3}},
		{"replayed", step(retry.Replayed, 1, 0), frame{retry.Replayed, notification.StatusQueued, 0}},
		{"delivered in the new round", step(retry.Delivered, 1, 1), frame{retry.Delivered, notification.StatusDelivered, 3}},
	}
	store := historytest.Open(t, historytest.SQLite)
	if err := store.Accept(t.Context(), []notification.Accepted{{ID: "ntf_stream", CreatedAt: at, Channels: []string{"webhook"}}}); err != nil {
		t.Fatal(err)
	}
	// The greatest event streamed so far, as the page orders them.
	var top struct {
		round, attempt, rank int
		status               notification.Status
	}
	top.rank = -1
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := newUpdate(tt.ev)
			if err != nil {
				t.Fatal(err)
			}
			for name, b := range map[string][]byte{"full": u.Full, "redacted": u.Redacted} {
				var got frame
				if err := json.Unmarshal([]byte(strings.TrimSuffix(strings.TrimPrefix(string(b), "event: attempt\ndata: "), "\n\n")), &got); err != nil {
					t.Fatalf("%s frame %q: %v", name, b, err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("%s frame (-want +got):\n%s", name, diff)
				}
			}
			later := tt.ev.Round - top.round
			if later == 0 {
				later = tt.ev.Attempt - top.attempt
			}
			if later == 0 {
				later = tt.want.Rank - top.rank
			}
			if later >= 0 {
				top.round, top.attempt, top.rank, top.status = tt.ev.Round, tt.ev.Attempt, tt.want.Rank, tt.want.Status
			}
			if err := store.Record(t.Context(), []notification.Event{tt.ev}); err != nil {
				t.Fatal(err)
			}
			v, err := store.Get(t.Context(), "ntf_stream")
			if err != nil {
				t.Fatal(err)
			}
			if len(v.Copies) != 1 || v.Copies[0].Status != top.status {
				t.Errorf("the history shows %+v, the greatest event streamed said %s", v.Copies, top.status)
			}
		})
	}
}
