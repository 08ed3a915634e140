package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/retry"
)

type fakeStore struct {
	parked  []retry.DeadLetter
	filters []retry.Filter
	err     error
}

func (f *fakeStore) List(_ context.Context, flt retry.Filter, limit int) ([]retry.DeadLetter, error) {
	f.filters = append(f.filters, flt)
	var out []retry.DeadLetter
	for _, p := range f.parked {
		if (flt.ID == "" || p.ID == flt.ID) && (flt.Source == "" || p.Source == flt.Source) && len(out) < limit {
			out = append(out, p)
		}
	}
	return out, f.err
}

func (f *fakeStore) Replay(_ context.Context, flt retry.Filter) (int, error) {
	f.filters = append(f.filters, flt)
	n := 0
	for _, p := range f.parked {
		if (flt.ID == "" || p.ID == flt.ID) && (flt.Source == "" || p.Source == flt.Source) {
			n++
		}
	}
	return n, f.err
}

func TestDeadLetterRoutes(t *testing.T) {
	const token = "dead-letter-token-0123456789"
	tests := []struct {
		name       string
		method     string
		path       string
		body       string
		noStore    bool
		storeErr   error
		wantStatus int
		wantBody   string
		wantFilter *retry.Filter
	}{
		{"list all", "GET", "/v1/dead-letters", "", false, nil, 200, `"id":"a"`, &retry.Filter{}},
		{"list by source adds the prefix", "GET", "/v1/dead-letters?source=email-queue", "", false, nil, 200, `"source":"p.email-queue"`, &retry.Filter{Source: "p.email-queue"}},
		{"list bad limit", "GET", "/v1/dead-letters?limit=0", "", false, nil, 422, `"field":"limit"`, nil},
		{"list while disconnected", "GET", "/v1/dead-letters", "", true, nil, 503, "broker", nil},
		{"list error", "GET", "/v1/dead-letters", "", false, errors.New("boom"), 503, "boom", nil},
		{"replay one", "POST", "/v1/dead-letters/a/replay", "", false, nil, 200, `{"replayed":1}`, &retry.Filter{ID: "a"}},
		{"replay unknown id", "POST", "/v1/dead-letters/zzz/replay", "", false, nil, 404, "zzz", nil},
		{"replay by source", "POST", "/v1/dead-letters/replay", `{"source":"email-queue"}`, false, nil, 200, `{"replayed":1}`, &retry.Filter{Source: "p.email-queue"}},
		{"replay all", "POST", "/v1/dead-letters/replay", `{"all":true}`, false, nil, 200, `{"replayed":2}`, &retry.Filter{}},
		{"replay needs a filter", "POST", "/v1/dead-letters/replay", `{}`, false, nil, 422, `"field":"source"`, nil},
		{"replay into a queue that is not relay's", "POST", "/v1/dead-letters/a/replay", "", false,
			fmt.Errorf("message %q: source %q is %w: it stays parked", "a", "victim", retry.ErrNotDestination), 409, `"victim`, nil},
		{"replay bad body", "POST", "/v1/dead-letters/replay", `{"everything":1}`, false, nil, 400, "everything", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := &fakeStore{err: tt.storeErr, parked: []retry.DeadLetter{
				{ID: "a", Source: "p.email-queue", Reason: retry.ReasonMaxRetries},
				{ID: "b", Source: "p.webhook-queue", Reason: retry.ReasonPermanent}}}
			deps := Deps{Tokens: []string{token}, Topology: retry.Topology{Prefix: "p."},
				DeadLetters: func() DeadLetterStore {
					if tt.noStore {
						return nil
					}
					return store
				}}
			req := httptest.NewRequest(tt.method, tt.path, strings.NewReader(tt.body))
			req.Header.Set("Authorization", "Bearer "+token)
			rec := httptest.NewRecorder()
			NewServer(deps).ServeHTTP(rec, req)
			if rec.Code != tt.wantStatus || !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Fatalf("%s %s = %d %s, want %d containing %q", tt.method, tt.path, rec.Code, rec.Body, tt.wantStatus, tt.wantBody)
			}
			if tt.wantFilter != nil {
				if diff := cmp.Diff([]retry.Filter{*tt.wantFilter}, store.filters); diff != "" {
					t.Errorf("filters (-want +got):\n%s", diff)
				}
			}
			if rec.Code >= 400 && rec.Header().Get("Content-Type") != ProblemContentType {
				t.Errorf("error answered as %q, want a problem", rec.Header().Get("Content-Type"))
			}
		})
	}
}

func TestDeadLetterRoutesNeedAuth(t *testing.T) {
	srv := NewServer(Deps{Tokens: []string{"dead-letter-token-0123456789"}})
	for _, path := range []string{"/v1/dead-letters"} {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("GET %s without a token = %d", path, rec.Code)
		}
	}
	var body map[string]any
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/dead-letters/x/replay", nil))
	_ = json.Unmarshal(rec.Body.Bytes(), &body)
	if rec.Code != http.StatusUnauthorized || body["status"] != float64(401) {
		t.Errorf("POST replay without a token = %d %v", rec.Code, body)
	}
}
