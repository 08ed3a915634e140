package link

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

const token = "link-test-token-0001"

func TestDashboard(t *testing.T) {
	var bodies []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/dashboard/links" {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"type":"https://relay.dev/problems/unauthorized","title":"Unauthorized","status":401,"detail":"the bearer token is not one the API accepts"}`)
			return
		}
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		var req struct{ ID string }
		json.Unmarshal(b, &req)
		path := "/#?code=c0de"
		if req.ID != "" {
			path = "/#/n/" + req.ID + "?code=c0de"
		}
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]any{"path": path, "expires_at": time.Now().Add(2 * time.Minute)})
	}))
	t.Cleanup(api.Close)

	tests := []struct {
		name      string
		args      []string
		wantFirst string
		wantBody  string
		wantErr   string
	}{
		{name: "the list", args: []string{"--token", token}, wantFirst: api.URL + "/#?code=c0de"},
		{name: "a notification", args: []string{"--token", token, "--id", "ntf_abc"}, wantFirst: api.URL + "/#/n/ntf_abc?code=c0de", wantBody: `{"id":"ntf_abc"}`},
		{name: "no token", args: nil, wantErr: "pass one of the API's API_TOKENS with --token"},
		{name: "a wrong token", args: []string{"--token", "wrong"}, wantErr: "pass a token the API at"},
		{name: "an argument", args: []string{"--token", token, "ntf_abc"}, wantErr: "relay dashboard --id ntf_"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bodies = nil
			var out bytes.Buffer
			err := Run(context.Background(), append([]string{"--api", api.URL}, tt.args...), func(string) string { return "" }, &out)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to say %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if lines[0] != tt.wantFirst {
				t.Errorf("first line %q, want the link %q", lines[0], tt.wantFirst)
			}
			if len(lines) != 2 || !strings.Contains(lines[1], "once") || strings.Contains(out.String(), token) {
				t.Errorf("output %q: want the link, a line that says it works once, and never the token", out.String())
			}
			if len(bodies) != 1 || strings.TrimSpace(bodies[0]) != tt.wantBody {
				t.Errorf("request bodies %q, want %q", bodies, tt.wantBody)
			}
		})
	}
}
