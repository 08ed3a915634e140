package api

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestHeaderLimit: the API's server takes a header section of ordinary
// size and answers 431 to one far past MaxHeaderBytes, well below the
// megabyte net/http allows by default.
func TestHeaderLimit(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httpServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }),
		slog.New(slog.DiscardHandler))
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	for _, tt := range []struct {
		name string
		size int
		want int
	}{
		{"ordinary", 8 << 10, http.StatusNoContent},
		{"twice the limit", 2 * MaxHeaderBytes, http.StatusRequestHeaderFieldsTooLarge},
		{"half a megabyte", 512 << 10, http.StatusRequestHeaderFieldsTooLarge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/healthz", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Padding", strings.Repeat("a", tt.size))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("a %d-byte header: %d, want %d", tt.size, resp.StatusCode, tt.want)
			}
		})
	}
}
