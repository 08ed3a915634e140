package send

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/apiclient"
	"github.com/relay-demo/relay/internal/notification"
)

// t0 is in the local zone, which --watch prints its times in, so that the
// expected output can say 10:00:01.000.
var t0 = time.Date(2026, 5, 3, 10, 0, 0, 0, time.Local)

// at is t0 plus ms milliseconds.
func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func ms(v int64) *int64 { return &v }

// failed is an attempt as the worker reports it, before the retry stage
// decides: the copy's last decision is the failure itself.
func failed(n, atMS int, err string, guess int64) notification.Attempt {
	return notification.Attempt{N: n, At: at(atMS), Outcome: "failed", Error: err, DelayMS: ms(guess)}
}

// cp is a copy whose latest decision was made at updated.
func cp(channel string, status notification.Status, updated int, attempts ...notification.Attempt) notification.Copy {
	return notification.Copy{Channel: channel, Status: status, UpdatedAt: at(updated), Attempts: attempts, AttemptCount: len(attempts)}
}

// to is c as the copy for one recipient.
func to(recipient string, c notification.Copy) notification.Copy {
	c.Recipient = recipient
	return c
}

// step is what the fake history shows for one notification at one poll;
// nil is a 404, as before the history recorded it.
type step []notification.Copy

const busy = "451 4.3.0 mailbox busy"

// long is an error longer than any line.
const long = `send email ntf_1: closing SMTP DATA writer: 451 4.3.0 The recipient's mailbox is temporarily unavailable because it is being moved to another server; please retry later`

// fake is an API that accepts notifications and serves each one's history
// from a script, one step further at every GET, the last step from then on.
type fake struct {
	t        *testing.T
	channels []string
	copies   []notification.CopyRef // the 202's copies; none like an older API
	script   func(id string) []step

	mu       sync.Mutex
	requests []string       // Authorization|Idempotency-Key of each POST
	gets     map[string]int // GETs per id
	times    []time.Time    // start of every GET
	inFlight int            // GETs being answered
	problems []string       // what the watcher did wrong
	noStore  bool           // answer like an API without a history
}

func newFake(t *testing.T, channels []string, script func(id string) []step) (*fake, *httptest.Server) {
	f := &fake{t: t, channels: channels, script: script, gets: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/notifications", f.post)
	mux.HandleFunc("GET /v1/notifications/{id}", f.get)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *fake) post(w http.ResponseWriter, r *http.Request) {
	var body map[string]json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body[f.channels[0]] == nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, r.Header.Get("Authorization")+"|"+r.Header.Get("Idempotency-Key"))
	id := fmt.Sprintf("ntf_%d", len(f.requests))
	f.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
	json.NewEncoder(w).Encode(apiclient.Accepted{ID: id, Channels: f.channels, Copies: f.copies})
}

func (f *fake) get(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	f.mu.Lock()
	f.times = append(f.times, time.Now())
	if f.inFlight++; f.inFlight > 1 {
		f.problems = append(f.problems, "two requests to the history at once")
	}
	steps := f.script(id)
	k := f.gets[id]
	f.gets[id]++
	if k >= len(steps) {
		// Every script ends with each copy delivered or parked.
		f.problems = append(f.problems, fmt.Sprintf("GET %s after it was finished", id))
		k = len(steps) - 1
	}
	f.inFlight--
	noStore := f.noStore
	f.mu.Unlock()
	if noStore {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"type":"https://relay.dev/problems/history-unavailable","title":"History unavailable","status":503,"detail":"this API runs without a history store"}`)
		return
	}
	if steps[k] == nil {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"type":"https://relay.dev/problems/not-found","title":"Not found","status":404,"detail":"no notification has the id %q"}`, id)
		return
	}
	json.NewEncoder(w).Encode(notification.View{ID: id, CreatedAt: t0, Accepted: true, Channels: f.channels, Copies: steps[k]})
}

func TestWatch(t *testing.T) {
	tests := []struct {
		name     string
		channels []string
		copies   []notification.CopyRef
		n        int
		args     []string
		script   func(id string) []step
		want     string
	}{
		{
			// The worker reports the failure (with no delay of its own),
			// then the retry stage the delay it chose: one line, once
			// decided, with the retry stage's delay.
			name:     "delivered after a failure: one line per attempt, the retry stage's delay",
			channels: []string{"email"},
			script: func(string) []step {
				return []step{
					nil, // not in the history yet
					{cp("email", "queued", 0)},
					{cp("email", "retrying", 1000, failed(1, 1000, busy, 0))},
					{cp("email", "retrying", 1004, failed(1, 1000, busy, 1000))},
					{cp("email", "retrying", 2000, failed(1, 1000, busy, 1000))}, // requeued: nothing new to print
					{cp("email", "delivered", 2500, failed(1, 1000, busy, 1000),
						notification.Attempt{N: 2, At: at(2500), Outcome: "delivered", WaitedMS: ms(1400)})},
				}
			},
			want: `ntf_1	email
10:00:01.000  ntf_1 email   attempt 1  failed  451 4.3.0 mailbox busy  next in 1s
10:00:02.500  ntf_1 email   attempt 2  delivered
done: 1 copy delivered, 0 parked
`,
		},
		{
			// The worker's guess of 8 s shows before the retry stage parks
			// the copy, out of retries: no "next in" on that attempt.
			name:     "parked after the last retry: no next in on the parked attempt",
			channels: []string{"webhook"},
			script: func(string) []step {
				a1 := failed(1, 1000, "503 Service Unavailable", 1000)
				a2 := failed(2, 2100, "503 Service Unavailable", 2000)
				return []step{
					{cp("webhook", "retrying", 1002, a1)},
					{cp("webhook", "retrying", 2102, a1, a2)},
					{cp("webhook", "retrying", 4200, a1, a2, failed(3, 4200, "503 Service Unavailable", 8000))},
					{cp("webhook", "parked", 4203, a1, a2, notification.Attempt{N: 3, At: at(4200), Outcome: "parked",
						Reason: "max-retries", Error: "503 Service Unavailable"})},
				}
			},
			want: `ntf_1	webhook
10:00:01.000  ntf_1 webhook attempt 1  failed  503 Service Unavailable  next in 1s
10:00:02.100  ntf_1 webhook attempt 2  failed  503 Service Unavailable  next in 2s
10:00:04.200  ntf_1 webhook attempt 3  parked  reason max-retries  503 Service Unavailable
done: 0 copies delivered, 1 parked
`,
		},
		{
			// The history records events as they arrive: attempt 2 can
			// show a poll before attempt 1 does.
			name:     "an attempt recorded before the one it follows: printed after it",
			channels: []string{"email"},
			script: func(string) []step {
				a2 := notification.Attempt{N: 2, At: at(1600), Outcome: "delivered"}
				return []step{
					{cp("email", "delivered", 1600, a2)},
					{cp("email", "delivered", 1600, failed(1, 1000, busy, 500), a2)},
				}
			},
			want: `ntf_1	email
10:00:01.000  ntf_1 email   attempt 1  failed  451 4.3.0 mailbox busy  next in 500ms
10:00:01.600  ntf_1 email   attempt 2  delivered
done: 1 copy delivered, 0 parked
`,
		},
		{
			name:     "two copies: each attempt once, in time order",
			channels: []string{"email", "webhook"},
			script: func(string) []step {
				e1 := failed(1, 1000, busy, 1000)
				w1 := failed(1, 1200, "503 Service Unavailable", 1000)
				e2 := notification.Attempt{N: 2, At: at(2000), Outcome: "delivered"}
				w2 := notification.Attempt{N: 2, At: at(2200), Outcome: "delivered"}
				return []step{
					{cp("email", "retrying", 1001, e1), cp("webhook", "retrying", 1201, w1)},
					{cp("email", "retrying", 1001, e1), cp("webhook", "retrying", 1201, w1)},
					{cp("email", "delivered", 2000, e1, e2), cp("webhook", "delivered", 2200, w1, w2)},
				}
			},
			want: `ntf_1	email,webhook
10:00:01.000  ntf_1 email   attempt 1  failed  451 4.3.0 mailbox busy  next in 1s
10:00:01.200  ntf_1 webhook attempt 1  failed  503 Service Unavailable  next in 1s
10:00:02.000  ntf_1 email   attempt 2  delivered
10:00:02.200  ntf_1 webhook attempt 2  delivered
done: 2 copies delivered, 0 parked
`,
		},
		{
			// An email to two recipients is two copies: each followed,
			// and named, on its own.
			name:     "one copy per recipient: each followed on its own",
			channels: []string{"email"},
			copies:   []notification.CopyRef{{Channel: "email", Recipient: "ok@example.com"}, {Channel: "email", Recipient: "no@example.com"}},
			script: func(string) []step {
				ok := notification.Attempt{N: 1, At: at(1000), Outcome: "delivered"}
				no := notification.Attempt{N: 1, At: at(1100), Outcome: "parked", Reason: "permanent", Error: "550 5.1.1 unknown"}
				return []step{
					{to("ok@example.com", cp("email", "delivered", 1000, ok))},
					{to("ok@example.com", cp("email", "delivered", 1000, ok)), to("no@example.com", cp("email", "parked", 1100, no))},
				}
			},
			want: `ntf_1	email
10:00:01.000  ntf_1 email ok@example.com attempt 1  delivered
10:00:01.100  ntf_1 email no@example.com attempt 1  parked  reason permanent  550 5.1.1 unknown
done: 1 copy delivered, 1 parked
`,
		},
		{
			name:     "long error cut at a word boundary, next in kept",
			channels: []string{"email"},
			script: func(string) []step {
				return []step{{cp("email", "delivered", 2000, failed(1, 1000, long, 1000),
					notification.Attempt{N: 2, At: at(2000), Outcome: "delivered"})}}
			},
			want: `ntf_1	email
10:00:01.000  ntf_1 email   attempt 1  failed  send email ntf_1: closing SMTP DATA…  next in 1s
10:00:02.000  ntf_1 email   attempt 2  delivered
done: 1 copy delivered, 0 parked
`,
		},
		{
			// A rate limit's slot and a Retry-After wait without spending
			// a retry: deferred, not failed, with the wait they asked for.
			name:     "a deferral reads deferred, a retry failed",
			channels: []string{"email"},
			script: func(string) []step {
				d1 := failed(1, 1000, "email provider backup: rate limit 4/s (burst 2): its slot is in 479ms; deferred 229ms", 229)
				d1.Deferred = true
				return []step{{cp("email", "delivered", 3000, d1, failed(2, 1300, busy, 1000),
					notification.Attempt{N: 3, At: at(2400), Outcome: "delivered"})}}
			},
			want: `ntf_1	email
10:00:01.000  ntf_1 email   attempt 1  deferred  email provider backup: rate limit…  next in 229ms
10:00:01.300  ntf_1 email   attempt 2  failed  451 4.3.0 mailbox busy  next in 1s
10:00:02.400  ntf_1 email   attempt 3  delivered
done: 1 copy delivered, 0 parked
`,
		},
		{
			// Where the line leaves the error too little room, it goes on
			// a line of its own rather than be cut to a word, with the
			// wait when that does not fit above either.
			name:     "a narrow terminal: the error below its attempt",
			channels: []string{"email"},
			copies:   []notification.CopyRef{{Channel: "email", Recipient: "demo@example.com"}},
			args:     []string{"--width", "64"},
			script: func(string) []step {
				return []step{{to("demo@example.com", cp("email", "delivered", 2000, failed(1, 1000, long, 1000),
					notification.Attempt{N: 2, At: at(2000), Outcome: "delivered"}))}}
			},
			want: `ntf_1	email
10:00:01.000  ntf_1 email demo@example.com attempt 1  failed
    next in 1s  send email ntf_1: closing SMTP DATA writer: 451…
10:00:02.000  ntf_1 email demo@example.com attempt 2  delivered
done: 1 copy delivered, 0 parked
`,
		},
		{
			// A copy cancelled before its first attempt sent nothing: its
			// line stands before the attempt it stopped.
			name:     "a copy cancelled before it was attempted",
			channels: []string{"email", "webhook"},
			script: func(string) []step {
				return []step{{
					cp("email", "cancelled", 1000, notification.Attempt{N: 1, At: at(1000), Outcome: "cancelled", Reason: "cancelled by the client"}),
					cp("webhook", "delivered", 900, notification.Attempt{N: 1, At: at(900), Outcome: "delivered"}),
				}}
			},
			want: `ntf_1	email,webhook
10:00:00.900  ntf_1 webhook attempt 1  delivered
10:00:01.000  ntf_1 email   before attempt 1  cancelled
done: 1 copy delivered, 0 parked, 1 cancelled
`,
		},
		{
			name:     "long error in full",
			channels: []string{"email"},
			args:     []string{"--full"},
			script: func(string) []step {
				return []step{{cp("email", "delivered", 2000, failed(1, 1000, long, 1000),
					notification.Attempt{N: 2, At: at(2000), Outcome: "delivered"})}}
			},
			want: "ntf_1\temail\n10:00:01.000  ntf_1 email   attempt 1  failed  " + long + "  next in 1s\n" +
				"10:00:02.000  ntf_1 email   attempt 2  delivered\ndone: 1 copy delivered, 0 parked\n",
		},
		{
			name:     "several notifications: finished ones no longer polled",
			channels: []string{"webhook"},
			n:        3,
			script: func(id string) []step {
				done := step{cp("webhook", "delivered", 900, notification.Attempt{N: 1, At: at(900), Outcome: "delivered"})}
				if id != "ntf_2" {
					return []step{done}
				}
				return []step{nil, {cp("webhook", "queued", 0)}, done}
			},
			want: `ntf_1	webhook
ntf_2	webhook
ntf_3	webhook
10:00:00.900  ntf_1 webhook attempt 1  delivered
10:00:00.900  ntf_3 webhook attempt 1  delivered
10:00:00.900  ntf_2 webhook attempt 1  delivered
done: 3 copies delivered, 0 parked
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, srv := newFake(t, tt.channels, tt.script)
			f.copies = tt.copies
			n := max(tt.n, 1)
			const poll = 5 * time.Millisecond
			args := append([]string{"--api", srv.URL, "--token", "tok", "--n", fmt.Sprint(n), "--watch",
				"--channels", strings.Join(tt.channels, ","), "--poll", poll.String(), "--timeout", "10s"}, tt.args...)
			var out bytes.Buffer
			if err := Run(context.Background(), args, func(string) string { return "" }, &out); err != nil {
				t.Fatalf("Run: %v\n%s", err, out.String())
			}
			if diff := cmp.Diff(tt.want, out.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
			if !slices.Contains(tt.args, "--full") {
				width := 100
				if i := slices.Index(tt.args, "--width"); i >= 0 {
					width, _ = strconv.Atoi(tt.args[i+1])
				}
				for _, line := range strings.Split(out.String(), "\n") {
					if n := len([]rune(line)); n > width {
						t.Errorf("line of %d columns, over --width %d: %q", n, width, line)
					}
				}
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			for _, p := range f.problems {
				t.Error(p)
			}
			for i := range n {
				id := fmt.Sprintf("ntf_%d", i+1)
				if got, want := f.gets[id], len(tt.script(id)); got != want {
					t.Errorf("%s: %d GETs, want %d: one per step until finished", id, got, want)
				}
			}
			// One request at a time, --poll apart, whatever the number of
			// notifications.
			for i := 1; i < len(f.times); i++ {
				if gap := f.times[i].Sub(f.times[i-1]); gap < poll {
					t.Errorf("GETs %d and %d %s apart, want --poll %s or more", i-1, i, gap, poll)
				}
			}
		})
	}
}

func TestSendHeaders(t *testing.T) {
	f, srv := newFake(t, []string{"email", "webhook"}, nil)
	var out bytes.Buffer
	err := Run(context.Background(), []string{"--n", "3", "--idempotency-prefix", "k"},
		func(k string) string { return map[string]string{"RELAY_API": srv.URL, "API_TOKENS": "tok"}[k] }, &out)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := []string{"Bearer tok|k-0", "Bearer tok|k-1", "Bearer tok|k-2"}
	if diff := cmp.Diff(want, f.requests); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("ntf_1\temail,webhook\nntf_2\temail,webhook\nntf_3\temail,webhook\n", out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}

func TestSendErrors(t *testing.T) {
	rejecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"title":"Unauthorized","status":401,"detail":"send Authorization: Bearer <token>"}`)
	}))
	defer rejecting.Close()
	never := func(string) []step {
		return []step{{cp("email", "retrying", 1000, failed(1, 1000, busy, 0))}}
	}
	_, stuck := newFake(t, []string{"email"}, never)
	noStore, noStoreSrv := newFake(t, []string{"email"}, never)
	noStore.noStore = true
	watch := []string{"--channels", "email", "--watch", "--poll", "1ms"}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--n", "0"}, "--n 0"},
		{[]string{"--interval", "-1s"}, "--interval"},
		{[]string{"--channels", "fax"}, "--channels"},
		{[]string{"--poll", "0s"}, "--poll 0s"},
		{[]string{"--width", "10"}, "--width 10"},
		{[]string{"ntf_1"}, `unexpected "ntf_1"`},
		{[]string{"--api", rejecting.URL, "--token", ""}, "API answered 401 Unauthorized: send Authorization: Bearer <token>; the API wants a bearer token: pass one of its API_TOKENS with --token"},
		{[]string{"--api", "http://127.0.0.1:1"}, "notification 1 of 10: no answer from the API at http://127.0.0.1:1: "},
		{[]string{"--api", "http://127.0.0.1:1"}, "--api (or RELAY_API)"},
		{append([]string{"--api", stuck.URL, "--n", "1", "--timeout", "50ms"}, watch...), "1 of 1 copies still in flight after 50ms: ntf_1 email"},
		{append([]string{"--api", noStoreSrv.URL, "--n", "1"}, watch...), "--watch follows notifications in the API's history: API answered 503 Service Unavailable: this API runs without a history store"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			err := Run(context.Background(), tt.args, func(string) string { return "" }, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run(%v) = %v, want an error containing %q", tt.args, err, tt.want)
			}
		})
	}
}

// TestSendWaits checks that a 503 or 429 is waited out as its Retry-After
// says, and that any other refusal, or a --wait of 0, ends the run.
func TestSendWaits(t *testing.T) {
	tests := []struct {
		name      string
		refusals  []int // the status of each POST before the API accepts
		wait      string
		wantPosts int
		wantErr   string
	}{
		{name: "503 then accepted", refusals: []int{503}, wait: "1m", wantPosts: 2},
		{name: "429 twice then accepted", refusals: []int{429, 429}, wait: "1m", wantPosts: 3},
		{name: "503 with --wait 0", refusals: []int{503}, wait: "0s", wantPosts: 1, wantErr: "503"},
		{name: "400 is not waited out", refusals: []int{400}, wait: "1m", wantPosts: 1, wantErr: "400"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var posts []time.Time
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				posts = append(posts, time.Now())
				n := len(posts)
				mu.Unlock()
				if n <= len(tt.refusals) {
					w.Header().Set("Retry-After", "1")
					w.Header().Set("Content-Type", "application/problem+json")
					w.WriteHeader(tt.refusals[n-1])
					fmt.Fprintf(w, `{"title":"Not now","status":%d,"detail":"not connected to the broker"}`, tt.refusals[n-1])
					return
				}
				w.WriteHeader(http.StatusAccepted)
				json.NewEncoder(w).Encode(apiclient.Accepted{ID: "ntf_1", Channels: []string{"webhook"}})
			}))
			defer srv.Close()
			var out bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := Run(ctx, []string{"--api", srv.URL, "--token", "t", "--n", "1", "--channels", "webhook", "--wait", tt.wait}, func(string) string { return "" }, &out)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Run = %v, want nil; output:\n%s", err, out.String())
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Run = %v, want an error with %q", err, tt.wantErr)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(posts) != tt.wantPosts {
				t.Fatalf("%d POSTs, want %d", len(posts), tt.wantPosts)
			}
			for i := 1; i < len(posts); i++ {
				if gap := posts[i].Sub(posts[i-1]); gap < time.Second {
					t.Errorf("POST %d came %s after the one before, before the Retry-After of 1s", i+1, gap)
				}
			}
			if tt.wantErr == "" && !strings.Contains(out.String(), "ntf_1") {
				t.Errorf("output %q does not list the accepted id", out.String())
			}
		})
	}
}

// TestSendDown checks that --down sends the last notifications' webhooks
// to the flaky receiver's endpoint that is always down, beside
// --webhook-url, and the others where --webhook-url says.
func TestSendDown(t *testing.T) {
	var mu sync.Mutex
	var hooks []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Webhook struct{ URL string } `json:"webhook"`
			Delay   string               `json:"delay"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		hooks = append(hooks, body.Webhook.URL+" "+body.Delay)
		id := fmt.Sprintf("ntf_%d", len(hooks))
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		json.NewEncoder(w).Encode(apiclient.Accepted{ID: id, Channels: []string{"webhook"}})
	}))
	defer srv.Close()
	args := []string{"--api", srv.URL, "--channels", "webhook", "--n", "3", "--down", "1", "--in", "1s",
		"--webhook-url", "http://127.0.0.1:9191/webhooks/demo?x=1"}
	if err := Run(context.Background(), args, func(string) string { return "" }, &bytes.Buffer{}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := []string{"http://127.0.0.1:9191/webhooks/demo?x=1 1s", "http://127.0.0.1:9191/webhooks/demo?x=1 1s", "http://127.0.0.1:9191/webhooks/down 1s"}
	if diff := cmp.Diff(want, hooks); diff != "" {
		t.Errorf("webhook targets (-want +got):\n%s", diff)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--n", "2", "--down", "3"}, "--down 3: want 0 to --n (2)"},
		{[]string{"--channels", "email", "--down", "1"}, "add webhook to --channels"},
	} {
		err := Run(context.Background(), append([]string{"--api", srv.URL}, tt.args...), func(string) string { return "" }, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Run(%v) = %v, want %q", tt.args, err, tt.want)
		}
	}
}
