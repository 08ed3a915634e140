package api

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// TestDeadLetterJobRequests checks what POST /v1/dead-letters/jobs
// refuses before it stores anything.
func TestDeadLetterJobRequests(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		wantStatus int
		wantBody   string
	}{
		{"no action", `{"all":true}`, 422, `{"field":"action","message":"replay or purge"}`},
		{"an unknown action", `{"action":"delete","all":true}`, 422, `"field":"action"`},
		{"a purge without confirm", `{"action":"purge","channel":"email"}`, 422, `"field":"confirm"`},
		{"no selection", `{"action":"replay"}`, 422, `"field":"source"`},
		{"a bad filter", `{"action":"replay","reason":"bored","since":"now"}`, 422, `"field":"reason"`},
		{"a dry run is not a job", `{"action":"replay","all":true,"dry_run":true}`, 400, `unknown field \"dry_run\"`},
		{"no store for jobs", `{"action":"replay","channel":"email"}`, 503, `history store`},
		{"an unknown job without a store", ``, 503, `history store`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method, path := "POST", "/v1/dead-letters/jobs"
			if tt.body == "" {
				method, path = "GET", "/v1/dead-letters/jobs/job_x"
			}
			req := httptest.NewRequest(method, path, strings.NewReader(tt.body))
			req.Header.Set("Authorization", "Bearer "+deadLetterToken)
			rec := httptest.NewRecorder()
			deadLetterServer(&fakeStore{}, false).ServeHTTP(rec, req)
			if rec.Code != tt.wantStatus || !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Errorf("%s %s = %d %s, want %d containing %q", method, path, rec.Code, rec.Body, tt.wantStatus, tt.wantBody)
			}
		})
	}
}
