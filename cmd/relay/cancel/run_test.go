package cancel

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestCancel(t *testing.T) {
	const token = "cancel-test-token-0001"
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodDelete || r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "wrong request", http.StatusBadRequest)
			return
		}
		switch r.URL.Path {
		case "/v1/notifications/ntf_later":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"id":"ntf_later","cancelled":[{"channel":"email","recipient":"ada@example.com"}],` +
				`"not_cancelled":[{"channel":"webhook","status":"delivered"}]}`))
		case "/v1/notifications/ntf_gone":
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"type":"https://relay.dev/problems/nothing-to-cancel","title":"Nothing to cancel","status":409}`))
		default:
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"type":"https://relay.dev/problems/not-found","title":"Not found","status":404}`))
		}
	}))
	defer api.Close()
	getenv := func(k string) string {
		return map[string]string{"RELAY_API": api.URL, "API_TOKENS": token}[k]
	}
	tests := []struct {
		args    []string
		want    string
		wantErr string
	}{
		{args: []string{"ntf_later"}, want: "ntf_later\temail ada@example.com\tcancelled\nntf_later\twebhook\tdelivered, not cancelled\n"},
		{args: []string{"ntf_gone"}, wantErr: "nothing left to cancel of ntf_gone"},
		{args: []string{"ntf_unknown"}, wantErr: "no notification ntf_unknown"},
		{args: []string{"ntf_a", "ntf_b"}, wantErr: "one notification id, not 2"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out bytes.Buffer
			err := Run(context.Background(), tt.args, getenv, &out)
			switch {
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			case tt.wantErr == "" && err != nil:
				t.Errorf("err = %v", err)
			case out.String() != tt.want:
				t.Errorf("output:\n%s\nwant:\n%s", out.String(), tt.want)
			}
		})
	}
}
