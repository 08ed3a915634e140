package send

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// fakeAPI accepts notifications and streams, for each, a failed attempt
// then a delivery per channel, as the real API's event stream does.
func fakeAPI(t *testing.T) (*httptest.Server, *[]string) {
	var mu sync.Mutex
	var auth []string
	ids := make(chan string, 100)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/notifications", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization")+"|"+r.Header.Get("Idempotency-Key"))
		id := fmt.Sprintf("ntf_%d", len(auth))
		mu.Unlock()
		var body map[string]json.RawMessage
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body["email"] == nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		ids <- id
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, `{"id":%q,"channels":["email","webhook"]}`, id)
	})
	mux.HandleFunc("GET /dashboard/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.(http.Flusher).Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case id := <-ids:
				for _, ch := range []string{"email", "webhook"} {
					// The worker reports the failure, the retrier the delay it chose.
					fmt.Fprintf(w, "event: attempt\ndata: {\"outcome\":\"failed\",\"id\":%q,\"channel\":%q,\"attempt\":1,\"error\":\"503\"}\n\n", id, ch)
					fmt.Fprintf(w, "event: attempt\ndata: {\"outcome\":\"retrying\",\"id\":%q,\"channel\":%q,\"attempt\":1,\"delay_ms\":1000,\"error\":\"503\"}\n\n", id, ch)
					fmt.Fprintf(w, "event: attempt\ndata: {\"outcome\":\"delivered\",\"id\":%q,\"channel\":%q,\"attempt\":2}\n\n", id, ch)
				}
				w.(http.Flusher).Flush()
			}
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, &auth
}

func TestSendAndWatch(t *testing.T) {
	srv, auth := fakeAPI(t)
	var out bytes.Buffer
	err := Run(context.Background(), []string{"--api", srv.URL, "--token", "tok", "--n", "3", "--watch",
		"--idempotency-prefix", "k"}, func(string) string { return "" }, &out)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	if got := strings.Count(out.String(), "delivered"); got != 6+1 { // six lines and the summary
		t.Errorf("output has %d 'delivered', want 7:\n%s", got, out.String())
	}
	if !strings.Contains(out.String(), "done: 6 copies delivered, 0 parked") || !strings.Contains(out.String(), "next in 1s") {
		t.Errorf("output:\n%s", out.String())
	}
	if (*auth)[0] != "Bearer tok|k-0" || (*auth)[2] != "Bearer tok|k-2" {
		t.Errorf("requests carried %v", *auth)
	}
}

func TestSendErrors(t *testing.T) {
	rejecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"title":"Unauthorized"}`, http.StatusUnauthorized)
	}))
	defer rejecting.Close()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--n", "0"}, "--n 0"},
		{[]string{"--interval", "-1s"}, "--interval"},
		{[]string{"--channels", "fax"}, "--channels"},
		{[]string{"--api", rejecting.URL}, "401"},
		{[]string{"--api", "http://127.0.0.1:1"}, "post to"},
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
