package query

import (
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestValues(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		want    url.Values
		wantErr string // in the error; "" for none
	}{
		{name: "empty", raw: "", want: url.Values{}},
		{name: "pairs", raw: "source=email-queue&limit=5", want: url.Values{"source": {"email-queue"}, "limit": {"5"}}},
		{name: "an escaped semicolon", raw: "q=a%3Bb", want: url.Values{"q": {"a;b"}}},
		{name: "a semicolon after a value", raw: "source=email-queue;", want: url.Values{}, wantErr: "';'"},
		{name: "a semicolon between pairs", raw: "id=a;source=b&limit=1", want: url.Values{"limit": {"1"}}, wantErr: "';'"},
		{name: "a bad escape", raw: "recipient=%zz", want: url.Values{}, wantErr: "%-escape"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/x?"+tt.raw, nil)
			got, err := Values(r)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("values (-want +got):\n%s", diff)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}
