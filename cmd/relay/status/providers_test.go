package status

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// providersAnswer is the fake API's answer to GET /v1/providers.
const providersAnswer = `{"providers":[
 {"channel":"email","name":"primary","position":0,"circuit":{"state":"open","since":"2026-05-03T09:59:35Z","last_error":"dial tcp 10.0.0.5:25: connect: connection refused","failing_since":"2026-05-03T09:59:30Z"},"rate":null,"seen_at":"2026-05-03T09:59:35Z"},
 {"channel":"email","name":"backup","position":1,"circuit":{"state":"closed"},"rate":{"per_second":4,"burst":2,"next_slot_ms":250,"waiting":3},"seen_at":"2026-05-03T09:00:00Z"},
 {"channel":"sms","name":"sms1","position":0,"circuit":{"state":"half-open","since":"2026-05-03T09:59:58Z","last_error":"503 Service Unavailable"},"rate":{"per_second":0.5,"burst":1,"next_slot_ms":0,"waiting":0},"seen_at":"2026-05-03T09:59:58Z"}
]}`

func providersAPI(t *testing.T, body string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/providers" || r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, `{"title":"Not found"}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestProviders(t *testing.T) {
	tests := []struct {
		name string
		body string
		args []string
		want string
	}{
		{"every provider", providersAnswer, []string{"--width", "120"}, `email
  1  primary  open       since 09:59:35 (25s ago)  no limit  dial tcp 10.0.0.5:25: connect: connection refused
  2  backup   closed     4/s, burst 2: next slot in 250ms, 3 waiting

sms
  1  sms1     half-open  since 09:59:58 (2s ago)  0.5/s, burst 1  503 Service Unavailable
`},
		{"errors cut to the width", providersAnswer, []string{"--width", "80"}, `email
  1  primary  open       since 09:59:35 (25s ago)  no limit  dial tcp 10.0.0.5:2…
  2  backup   closed     4/s, burst 2: next slot in 250ms, 3 waiting

sms
  1  sms1     half-open  since 09:59:58 (2s ago)  0.5/s, burst 1  503 Service…
`},
		{"none declared", `{"providers":[]}`, nil, "No providers yet: an email or sms worker declares its mail servers or gateways in the history store when it starts\n(with a limit, or HISTORY_DSN or DATA_DIR set).\n"},
		{"as the API answered", `{"providers":[]}`, []string{"--json"}, "{\"providers\":[]}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := providersAPI(t, tt.body)
			var out bytes.Buffer
			err := runProviders(context.Background(), append([]string{"--api", srv.URL, "--token", token}, tt.args...),
				func(string) string { return "" }, &out, clock{now: func() time.Time { return t0 }, loc: time.UTC})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, out.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProvidersErrors(t *testing.T) {
	srv := providersAPI(t, providersAnswer)
	for _, args := range [][]string{{"email"}, {"--width", "10"}} {
		var out bytes.Buffer
		err := runProviders(context.Background(), append([]string{"--api", srv.URL, "--token", token}, args...),
			func(string) string { return "" }, &out, clock{now: time.Now, loc: time.UTC})
		if err == nil {
			t.Errorf("relay providers %s: no error, want one", strings.Join(args, " "))
		}
	}
	var out bytes.Buffer
	err := runProviders(context.Background(), []string{"--api", srv.URL, "--token", "wrong-token-000000000"},
		func(string) string { return "" }, &out, clock{now: time.Now, loc: time.UTC})
	if err == nil {
		t.Error("a refused request: no error, want one")
	}
}
