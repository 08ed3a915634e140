package problem

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestHandle checks what a handler's return becomes: nothing more for nil,
// the problem itself, or a logged 500 that does not show the error.
func TestHandle(t *testing.T) {
	limited := New(Base+"rate-limited", http.StatusTooManyRequests, "Too many requests", "slow down")
	limited.RetryAfter = 3
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantBody   string
		wantHeader http.Header
		wantLogged bool
	}{
		{name: "no error", err: nil, wantStatus: http.StatusOK, wantBody: "ok",
			wantHeader: http.Header{"Content-Type": {"text/plain; charset=utf-8"}}},
		{name: "a problem", err: limited, wantStatus: http.StatusTooManyRequests,
			wantBody:   `{"type":"https://relay.dev/problems/rate-limited","title":"Too many requests","status":429,"detail":"slow down"}` + "\n",
			wantHeader: http.Header{"Content-Type": {ContentType}, "X-Content-Type-Options": {"nosniff"}, "Retry-After": {"3"}}},
		{name: "a wrapped problem", err: fmt.Errorf("decode: %w", New(Base+"malformed-json", http.StatusBadRequest, "Malformed request body", "")),
			wantStatus: http.StatusBadRequest,
			wantBody:   `{"type":"https://relay.dev/problems/malformed-json","title":"Malformed request body","status":400}` + "\n",
			wantHeader: http.Header{"Content-Type": {ContentType}, "X-Content-Type-Options": {"nosniff"}}},
		{name: "any other error", err: errors.New("dial tcp 10.0.0.5:5432: refused"), wantStatus: http.StatusInternalServerError,
			wantBody:   `{"type":"https://relay.dev/problems/internal-error","title":"Internal error","status":500,"detail":"the request could not be completed"}` + "\n",
			wantHeader: http.Header{"Content-Type": {ContentType}, "X-Content-Type-Options": {"nosniff"}}, wantLogged: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			h := Handle(slog.New(slog.NewTextHandler(&logs, nil)), func(w http.ResponseWriter, r *http.Request) error {
				if tt.err != nil {
					return tt.err
				}
				_, _ = w.Write([]byte("ok"))
				return nil
			})
			rec := httptest.NewRecorder()
			h(rec, httptest.NewRequest(http.MethodGet, "/v1/x", nil))
			if diff := cmp.Diff([]any{tt.wantStatus, tt.wantBody}, []any{rec.Code, rec.Body.String()}); diff != "" {
				t.Errorf("status, body (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantHeader, rec.Header()); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
			lines := strings.Count(logs.String(), "\n")
			if tt.wantLogged && (lines != 1 || !strings.Contains(logs.String(), "10.0.0.5:5432") || !strings.Contains(logs.String(), "path=/v1/x")) {
				t.Errorf("log = %q, want one line with the error and the path", logs.String())
			}
			if !tt.wantLogged && lines != 0 {
				t.Errorf("log = %q, want nothing", logs.String())
			}
		})
	}
}

// TestMembers checks a problem's extension members follow its standard
// ones, and that members all left out add nothing.
func TestMembers(t *testing.T) {
	type replayed struct {
		Replayed int `json:"replayed"`
	}
	type results struct {
		Results []string `json:"results,omitempty"`
	}
	tests := []struct {
		name    string
		members any
		want    string
	}{
		{"none", nil, `{"type":"https://relay.dev/problems/x","title":"X","status":409}`},
		{"one", replayed{2}, `{"type":"https://relay.dev/problems/x","title":"X","status":409,"replayed":2}`},
		{"all left out", results{}, `{"type":"https://relay.dev/problems/x","title":"X","status":409}`},
		{"a list", results{[]string{"a"}}, `{"type":"https://relay.dev/problems/x","title":"X","status":409,"results":["a"]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New(Base+"x", http.StatusConflict, "X", "")
			p.Members = tt.members
			rec := httptest.NewRecorder()
			Write(rec, p)
			if diff := cmp.Diff(tt.want+"\n", rec.Body.String()); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWriteKeepsAngleBrackets checks a problem reads as written: "Bearer
// <token>", not "Bearer \u003ctoken\u003e", in its members too.
func TestWriteKeepsAngleBrackets(t *testing.T) {
	p := New(Base+"unauthorized", http.StatusUnauthorized, "Missing or invalid bearer token", "send Authorization: Bearer <token> & more")
	p.Members = struct {
		Hint string `json:"hint"`
	}{"<see docs>"}
	rec := httptest.NewRecorder()
	Write(rec, p)
	want := `{"type":"https://relay.dev/problems/unauthorized","title":"Missing or invalid bearer token","status":401,` +
		`"detail":"send Authorization: Bearer <token> & more","hint":"<see docs>"}` + "\n"
	if diff := cmp.Diff(want, rec.Body.String()); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
}
