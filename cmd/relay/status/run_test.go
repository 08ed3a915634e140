package status

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/apiclient"
	"github.com/relay-demo/relay/internal/notification"
)

const token = "status-test-token-0001"

var t0 = time.Date(2026, 5, 3, 10, 0, 0, 0, time.UTC)

// at is t0 plus ms milliseconds.
func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func ms(v int64) *int64 { return &v }

func ptr(t time.Time) *time.Time { return &t }

const (
	busy = `send email ntf_a: closing SMTP DATA writer: 451 4.3.0 mailbox busy, try again later`
	gone = `post webhook https://hooks.example/orders/7f3a9c: 410 Gone: {"error":"this endpoint was deleted by its owner on 2026-04-30; register a new one"}`
)

const longAddress = "a.very.long.mailbox.name.indeed@mail.example.com"

// notifications are what the fake API's history holds.
var notifications = map[string]notification.View{
	"ntf_delivered": {
		ID: "ntf_delivered", CreatedAt: at(0), Accepted: true, Channels: []string{"email", "webhook"},
		Recipients: []string{"ada@example.com", "https://hooks.example/a"},
		Copies: []notification.Copy{
			{Channel: "email", Status: "delivered", AttemptCount: 3, LastError: busy, UpdatedAt: at(4200), Attempts: []notification.Attempt{
				{N: 1, At: at(1000), Outcome: "failed", Error: busy, DelayMS: ms(1000), DurationMS: ms(12)},
				{N: 2, At: at(2100), Outcome: "failed", Error: busy, DelayMS: ms(2000), WaitedMS: ms(1050), DurationMS: ms(11)},
				{N: 3, At: at(4200), Outcome: "delivered", WaitedMS: ms(2050), DurationMS: ms(9)},
			}},
			{Channel: "webhook", Status: "delivered", AttemptCount: 1, UpdatedAt: at(900), Attempts: []notification.Attempt{
				{N: 1, At: at(900), Outcome: "delivered", DurationMS: ms(30)},
			}},
		},
	},
	"ntf_parked": {
		ID: "ntf_parked", CreatedAt: at(0), Accepted: true, Channels: []string{"webhook"},
		Recipients: []string{"https://hooks.example/orders/7f3a9c"},
		Copies: []notification.Copy{
			{Channel: "webhook", Status: "parked", Reason: "permanent", AttemptCount: 2, LastError: gone, UpdatedAt: at(2500), Attempts: []notification.Attempt{
				{N: 1, At: at(1000), Outcome: "failed", Error: "503 Service Unavailable", DelayMS: ms(1500)},
				{N: 2, At: at(2500), Outcome: "parked", Reason: "permanent", Error: gone, WaitedMS: ms(1500)},
			}},
		},
	},
	"ntf_scheduled": {
		ID: "ntf_scheduled", CreatedAt: at(0), Accepted: true, Channels: []string{"email", "webhook"},
		Recipients: []string{"ada@example.com", "https://hooks.example/a"},
		Copies: []notification.Copy{
			{Channel: "email", Status: "scheduled", UpdatedAt: at(0), NextAttemptAt: ptr(at(92000)), Attempts: []notification.Attempt{}},
			{Channel: "webhook", Status: "cancelled", AttemptCount: 1, UpdatedAt: at(1000), Attempts: []notification.Attempt{
				{N: 1, At: at(1000), Outcome: "cancelled", Reason: "cancelled by the client"},
			}},
		},
	},
	"ntf_retrying": {
		ID: "ntf_retrying", CreatedAt: at(0), Accepted: true, Channels: []string{"email", "webhook"},
		Recipients: []string{"ada@example.com", "https://hooks.example/a"},
		Copies: []notification.Copy{
			// The retry stage decided: 4 s, after the worker's failure.
			{Channel: "email", Status: "retrying", AttemptCount: 1, LastError: busy, UpdatedAt: at(1005), NextAttemptAt: ptr(at(5000)), Attempts: []notification.Attempt{
				{N: 1, At: at(1000), Outcome: "failed", Error: busy, DelayMS: ms(4000)},
			}},
			// Only the worker reported: its delay is no decision.
			{Channel: "webhook", Status: "retrying", AttemptCount: 1, LastError: "503", UpdatedAt: at(1500), NextAttemptAt: ptr(at(1500)), Attempts: []notification.Attempt{
				{N: 1, At: at(1500), Outcome: "failed", Error: "503 Service Unavailable", DelayMS: ms(0)},
			}},
		},
	},
	"ntf_replayed": {
		ID: "ntf_replayed", CreatedAt: at(0), Accepted: true, Channels: []string{"email"},
		Recipients: []string{"ada@example.com"},
		Copies: []notification.Copy{
			{Channel: "email", Status: "delivered", Round: 1, AttemptCount: 3, LastError: busy, UpdatedAt: at(86_400_000 + 2000), Attempts: []notification.Attempt{
				{N: 1, At: at(1000), Outcome: "failed", Error: busy, DelayMS: ms(1000)},
				{N: 2, At: at(2000), Outcome: "parked", Reason: "max-retries", Error: busy, WaitedMS: ms(1000)},
				{N: 0, Round: 1, At: at(86_400_000), Outcome: "replayed"},
				{N: 1, Round: 1, At: at(86_400_000 + 2000), Outcome: "delivered"},
			}},
		},
	},
	// One email copy per recipient, and a webhook copy.
	"ntf_split": {
		ID: "ntf_split", CreatedAt: at(0), Accepted: true, Channels: []string{"email", "webhook"},
		Recipients: []string{"ok1@example.com", "reject@example.com", "https://hooks.example/a"},
		Copies: []notification.Copy{
			{Channel: "email", Recipient: "ok1@example.com", Status: "delivered", AttemptCount: 1, UpdatedAt: at(800), Attempts: []notification.Attempt{
				{N: 1, At: at(800), Outcome: "delivered", DurationMS: ms(40)},
			}},
			{Channel: "email", Recipient: "reject@example.com", Status: "parked", Reason: "permanent", AttemptCount: 1, LastError: "550 5.1.1 no such user",
				UpdatedAt: at(700), Attempts: []notification.Attempt{
					{N: 1, At: at(700), Outcome: "parked", Reason: "permanent", Error: "550 5.1.1 no such user", DurationMS: ms(35)},
				}},
			{Channel: "webhook", Status: "delivered", AttemptCount: 1, UpdatedAt: at(900), Attempts: []notification.Attempt{
				{N: 1, At: at(900), Outcome: "delivered", DurationMS: ms(30)},
			}},
		},
	},
	// A recipient too long to line the others up with.
	"ntf_long": {
		ID: "ntf_long", CreatedAt: at(0), Accepted: true, Channels: []string{"email"},
		Recipients: []string{"ada@example.com", longAddress},
		Copies: []notification.Copy{
			{Channel: "email", Recipient: "ada@example.com", Status: "queued", UpdatedAt: at(0), Attempts: []notification.Attempt{}},
			{Channel: "email", Recipient: longAddress, Status: "queued", UpdatedAt: at(0), Attempts: []notification.Attempt{}},
		},
	},
	// What a hostile downstream or publisher can put in an error text and
	// a recipient: a title change, a colour, a carriage return and a
	// bidirectional override.
	"ntf_hostile": {
		ID: "ntf_hostile", CreatedAt: at(0), Accepted: true, Channels: []string{"email"},
		Recipients: []string{"ada@example.com\x1b]0;owned\x07"},
		Copies: []notification.Copy{
			{Channel: "email", Recipient: "ada@example.com\x1b]0;owned\x07", Status: "parked", Reason: "permanent", AttemptCount: 1,
				LastError: "550 \x1b[31mno\u202e", UpdatedAt: at(700), Attempts: []notification.Attempt{
					{N: 1, At: at(700), Outcome: "parked", Reason: "permanent", Error: "550 \x1b[2K\rdelivered \u009b\u202eok", DurationMS: ms(35)},
				}},
		},
	},
	// An email the backup mail server's rate limit held back: a deferral,
	// then a failure, then delivered.
	"ntf_deferred": {
		ID: "ntf_deferred", CreatedAt: at(0), Accepted: true, Channels: []string{"email"}, Recipients: []string{"ada@example.com"},
		Copies: []notification.Copy{
			{Channel: "email", Recipient: "ada@example.com", Status: "delivered", AttemptCount: 3, UpdatedAt: at(2500), Attempts: []notification.Attempt{
				{N: 1, At: at(1000), Outcome: "failed", Deferred: true, DelayMS: ms(229), Provider: "backup", Error: "email provider backup: rate limit 4/s (burst 2)"},
				{N: 2, At: at(1300), Outcome: "failed", DelayMS: ms(1000), WaitedMS: ms(300), Provider: "flaky", Error: "451 mailbox busy"},
				{N: 3, At: at(2500), Outcome: "delivered", WaitedMS: ms(1200), Provider: "flaky"},
			}},
		},
	},
	"ntf_queued": {
		ID: "ntf_queued", CreatedAt: at(0), Accepted: false, Channels: []string{}, Recipients: []string{},
		Copies: []notification.Copy{{Channel: "sms", Status: "queued", UpdatedAt: at(0), Attempts: []notification.Attempt{}}},
	},
}

// fakeAPI serves GET /v1/notifications/{id} from notifications, behind
// the bearer token, as the real API does.
func fakeAPI(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/notifications/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"type":"https://relay.dev/problems/unauthorized","title":"Unauthorized","status":401,"detail":"the bearer token is not one the API accepts"}`))
			return
		}
		n, ok := notifications[r.PathValue("id")]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"type":"https://relay.dev/problems/not-found","title":"Not found","status":404,"detail":"no notification has the id"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(n)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestStatus(t *testing.T) {
	srv := fakeAPI(t)
	tests := []struct {
		name    string
		args    []string
		want    string
		wantErr string
	}{
		{
			name: "delivered after two failures",
			args: []string{"ntf_delivered"},
			want: `ntf_delivered
  created     2026-05-03 10:00:00.000 UTC
  channels    email, webhook
  recipients  ada@example.com, https://hooks.example/a

email    delivered
  10:00:01.000  attempt 1  failed     next in 1s  send email ntf_a: closing SMTP DATA writer: 451…
  10:00:02.100  attempt 2  failed     waited 1.1s  next in 2s  send email ntf_a: closing SMTP DATA…
  10:00:04.200  attempt 3  delivered  waited 2.1s

webhook  delivered
  10:00:00.900  attempt 1  delivered
`,
		},
		{
			name: "a deferral reads deferred",
			args: []string{"ntf_deferred"},
			want: `ntf_deferred
  created     2026-05-03 10:00:00.000 UTC
  channels    email
  recipients  ada@example.com

email ada@example.com  delivered
  10:00:01.000  attempt 1  deferred   via backup  next in 229ms  email provider backup: rate limit…
  10:00:01.300  attempt 2  failed     via flaky  waited 300ms  next in 1s  451 mailbox busy
  10:00:02.500  attempt 3  delivered  via flaky  waited 1.2s
`,
		},
		{
			name: "parked",
			args: []string{"ntf_parked"},
			want: `ntf_parked
  created     2026-05-03 10:00:00.000 UTC
  channels    webhook
  recipients  https://hooks.example/orders/7f3a9c

webhook  parked  reason permanent
  10:00:01.000  attempt 1  failed     next in 1.5s  503 Service Unavailable
  10:00:02.500  attempt 2  parked     reason permanent  waited 1.5s  post webhook https://hooks.exa…
`,
		},
		{
			name: "parked, errors in full",
			args: []string{"--full", "ntf_parked"},
			want: `ntf_parked
  created     2026-05-03 10:00:00.000 UTC
  channels    webhook
  recipients  https://hooks.example/orders/7f3a9c

webhook  parked  reason permanent
  10:00:01.000  attempt 1  failed     next in 1.5s  503 Service Unavailable
  10:00:02.500  attempt 2  parked     reason permanent  waited 1.5s  ` + gone + `
`,
		},
		{
			name: "retrying, decided and not yet",
			args: []string{"ntf_retrying", "--width", "80"},
			want: `ntf_retrying
  created     2026-05-03 10:00:00.000 UTC
  channels    email, webhook
  recipients  ada@example.com, https://hooks.example/a

email    retrying  attempt 2 due 10:00:05.000 (in 3s)
  10:00:01.000  attempt 1  failed     next in 4s  send email ntf_a: closing…

webhook  retrying  the retry stage has not scheduled the next attempt yet
  10:00:01.500  attempt 1  failed  503 Service Unavailable
`,
		},
		{
			name: "scheduled, with its countdown, and cancelled",
			args: []string{"ntf_scheduled"},
			want: `ntf_scheduled
  created     2026-05-03 10:00:00.000 UTC
  channels    email, webhook
  recipients  ada@example.com, https://hooks.example/a

email    scheduled  due 2026-05-03 10:01:32.000 (in 1m30s)

webhook  cancelled
  10:00:01.000  before attempt 1  cancelled
`,
		},
		{
			name: "replayed round",
			args: []string{"ntf_replayed", "--width", "60"},
			want: `ntf_replayed
  created     2026-05-03 10:00:00.000 UTC
  channels    email
  recipients  ada@example.com

email    delivered
  10:00:01.000  attempt 1           failed     next in 1s  send email ntf_a…
  10:00:02.000  attempt 2           parked     reason max-retries  waited 1s  send email ntf_a…
  2026-05-04 10:00:00.000  round 1             replayed
  10:00:02.000  attempt 1, round 1  delivered
`,
		},
		{
			name: "queued, not accepted yet",
			args: []string{"ntf_queued"},
			want: `ntf_queued  (known only from its attempts so far)
  created     2026-05-03 10:00:00.000 UTC
  channels    -
  recipients  -

sms      queued  not attempted yet
`,
		},
		{
			name: "a copy per recipient",
			args: []string{"ntf_split"},
			want: `ntf_split
  created     2026-05-03 10:00:00.000 UTC
  channels    email, webhook
  recipients  ok1@example.com, reject@example.com, https://hooks.example/a

email ok1@example.com     delivered
  10:00:00.800  attempt 1  delivered

email reject@example.com  parked  reason permanent
  10:00:00.700  attempt 1  parked     reason permanent  550 5.1.1 no such user

webhook                   delivered
  10:00:00.900  attempt 1  delivered
`,
		},
		{
			name: "a recipient too long to line up with",
			args: []string{"ntf_long"},
			want: `ntf_long
  created     2026-05-03 10:00:00.000 UTC
  channels    email
  recipients  ada@example.com, ` + longAddress + `

email ada@example.com  queued  not attempted yet

email ` + longAddress + `  queued  not attempted yet
`,
		},
		{
			name:    "unknown id",
			args:    []string{"ntf_nope"},
			wantErr: "no notification ntf_nope (or it is older than the history keeps)",
		},
		{
			name:    "unauthorized",
			args:    []string{"--token", "wrong-token-000000001", "ntf_delivered"},
			wantErr: "API answered 401 Unauthorized: the bearer token is not one the API accepts; pass a token the API at " + srv.URL + " accepts with --token (or API_TOKENS)",
		},
		{
			name:    "no token",
			args:    []string{"--token", "", "ntf_delivered"},
			wantErr: "--token (or API_TOKENS)",
		},
		{
			name:    "API unreachable",
			args:    []string{"--api", "http://127.0.0.1:1", "ntf_delivered"},
			wantErr: "no answer from the API at http://127.0.0.1:1: ",
		},
		{name: "no id", args: []string{}, wantErr: "want one notification id"},
		{name: "two ids", args: []string{"ntf_a", "ntf_b"}, wantErr: "got 2"},
		{name: "narrow", args: []string{"--width", "20", "ntf_a"}, wantErr: "--width 20"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			args := append([]string{"--api", srv.URL, "--token", token}, tt.args...)
			err := run(context.Background(), args, func(string) string { return "" }, &out,
				clock{now: func() time.Time { return at(2000) }, loc: time.UTC})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("run = %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if diff := cmp.Diff(tt.want, out.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
			for _, line := range strings.Split(out.String(), "\n") {
				if n := len([]rune(line)); n > 100 && !strings.Contains(strings.Join(tt.args, " "), "--full") {
					t.Errorf("line of %d columns, over 100: %q", n, line)
				}
			}
		})
	}
}

// TestStatusJSON checks that --json prints the API's answer untouched.
func TestStatusJSON(t *testing.T) {
	srv := fakeAPI(t)
	want, err := apiclient.New(srv.URL, token, nil).NotificationJSON(context.Background(), "ntf_parked")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = Run(context.Background(), []string{"ntf_parked", "--json"}, func(k string) string {
		return map[string]string{"RELAY_API": srv.URL, "API_TOKENS": token}[k]
	}, &out)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if diff := cmp.Diff(string(want)+"\n", out.String()); diff != "" {
		t.Errorf("--json output (-want +got):\n%s", diff)
	}
}

// TestStatusEscapes: nothing a downstream or a publisher wrote reaches the
// terminal as a control sequence, as text or as --json.
func TestStatusEscapes(t *testing.T) {
	srv := fakeAPI(t)
	for _, args := range [][]string{{"ntf_hostile"}, {"--full", "ntf_hostile"}, {"--json", "ntf_hostile"}} {
		var out bytes.Buffer
		err := run(context.Background(), append([]string{"--api", srv.URL, "--token", token}, args...), func(string) string { return "" }, &out,
			clock{now: func() time.Time { return at(2000) }, loc: time.UTC})
		if err != nil {
			t.Fatalf("run %v: %v", args, err)
		}
		if strings.ContainsAny(out.String(), "\x1b\x07\r\u009b\u202e") {
			t.Errorf("run %v printed a control character:\n%q", args, out.String())
		}
		if args[0] != "--json" && !strings.Contains(out.String(), `\u001b]0;owned\u0007`) {
			t.Errorf("run %v does not show the escaped recipient:\n%s", args, out.String())
		}
	}
}
