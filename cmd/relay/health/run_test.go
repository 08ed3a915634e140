package health

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/relay-demo/relay/internal/testenv"
)

func TestRun(t *testing.T) {
	ready := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/readyz":
			io.WriteString(w, "ready")
		case "/slow":
			<-r.Context().Done()
		default:
			http.Error(w, "not connected to the broker", http.StatusServiceUnavailable)
		}
	}))
	defer ready.Close()
	closed := "http://" + testenv.RefusedAddr(t) + "/readyz"

	tests := []struct {
		name    string
		args    []string
		wantErr string // "" for healthy
	}{
		{name: "2xx is healthy", args: []string{ready.URL + "/readyz"}},
		{name: "503 is unhealthy, with the answer", args: []string{ready.URL + "/down"}, wantErr: "not connected to the broker"},
		{name: "nothing listening", args: []string{closed}, wantErr: "unhealthy"},
		{name: "no answer in time", args: []string{"--timeout", "100ms", ready.URL + "/slow"}, wantErr: "unhealthy"},
		{name: "no URL", args: nil, wantErr: "one URL"},
		{name: "not http", args: []string{"localhost:8080"}, wantErr: "http://"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := Run(ctx, tt.args, func(string) string { return "" }, &out)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Run = %v, want healthy", err)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("Run = nil (%q), want an error with %q", out.String(), tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("Run = %q, want %q in it", err, tt.wantErr)
			}
		})
	}
}
