package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/relay-demo/relay/internal/testenv"
	"github.com/relay-demo/relay/retry"
)

// outcome is how the retry pipeline sees one error.
type outcome struct {
	Err       string // with the server's URL replaced by "URL"
	Permanent bool
	After     time.Duration // 0 when the error carries no wait
	Status    int           // from a StatusError in the chain, else 0
}

func outcomeOf(err error, srvURL string) outcome {
	if err == nil {
		return outcome{}
	}
	o := outcome{Err: strings.ReplaceAll(err.Error(), srvURL, "URL"), Permanent: retry.IsPermanent(err)}
	o.After, _ = retry.RetryAfter(err)
	var se *StatusError
	if errors.As(err, &se) {
		o.Status = se.Status
	}
	return o
}

func TestSendClassifiesStatus(t *testing.T) {
	date := func(d time.Duration) string { return fixedNow().Add(d).Format(http.TimeFormat) }
	tests := []struct {
		name       string
		status     int
		retryAfter string
		want       outcome
	}{
		{"200", 200, "", outcome{}},
		{"201", 201, "", outcome{}},
		{"202", 202, "", outcome{}},
		{"204", 204, "", outcome{}},
		{"299", 299, "", outcome{}},
		{"2xx ignores Retry-After", 200, "60", outcome{}},

		{"301", 301, "", outcome{"webhook URL/hook: 301 Moved Permanently (redirects are not followed; configure the final URL)", true, 0, 301}},
		{"304", 304, "", outcome{"webhook URL/hook: 304 Not Modified (redirects are not followed; configure the final URL)", true, 0, 304}},
		{"308", 308, "", outcome{"webhook URL/hook: 308 Permanent Redirect (redirects are not followed; configure the final URL)", true, 0, 308}},

		{"400", 400, "", outcome{"webhook URL/hook: 400 Bad Request", true, 0, 400}},
		{"401", 401, "", outcome{"webhook URL/hook: 401 Unauthorized", true, 0, 401}},
		{"403", 403, "", outcome{"webhook URL/hook: 403 Forbidden", true, 0, 403}},
		{"404", 404, "", outcome{"webhook URL/hook: 404 Not Found", true, 0, 404}},
		{"410", 410, "", outcome{"webhook URL/hook: 410 Gone", true, 0, 410}},
		{"422", 422, "", outcome{"webhook URL/hook: 422 Unprocessable Entity", true, 0, 422}},
		{"499 without text", 499, "", outcome{"webhook URL/hook: 499", true, 0, 499}},
		{"4xx stays permanent despite Retry-After", 400, "30", outcome{"webhook URL/hook: 400 Bad Request", true, 0, 400}},

		{"408", 408, "", outcome{"webhook URL/hook: 408 Request Timeout", false, 0, 408}},
		{"429", 429, "", outcome{"webhook URL/hook: 429 Too Many Requests", false, 0, 429}},
		{"429 with delta-seconds", 429, "120", outcome{"webhook URL/hook: 429 Too Many Requests", false, 120 * time.Second, 429}},
		{"408 with delta-seconds", 408, "5", outcome{"webhook URL/hook: 408 Request Timeout", false, 5 * time.Second, 408}},
		{"500", 500, "", outcome{"webhook URL/hook: 500 Internal Server Error", false, 0, 500}},
		{"501", 501, "", outcome{"webhook URL/hook: 501 Not Implemented", false, 0, 501}},
		{"502", 502, "", outcome{"webhook URL/hook: 502 Bad Gateway", false, 0, 502}},
		{"503", 503, "", outcome{"webhook URL/hook: 503 Service Unavailable", false, 0, 503}},
		{"504", 504, "", outcome{"webhook URL/hook: 504 Gateway Timeout", false, 0, 504}},
		{"599 without text", 599, "", outcome{"webhook URL/hook: 599", false, 0, 599}},
		{"503 with HTTP-date", 503, date(90 * time.Second), outcome{"webhook URL/hook: 503 Service Unavailable", false, 90 * time.Second, 503}},
		{"503 with garbage Retry-After", 503, "soon", outcome{"webhook URL/hook: 503 Service Unavailable", false, 0, 503}},
		{"503 with negative Retry-After", 503, "-5", outcome{"webhook URL/hook: 503 Service Unavailable", false, 0, 503}},
		{"503 with past HTTP-date", 503, date(-time.Minute), outcome{"webhook URL/hook: 503 Service Unavailable", false, 0, 503}},
		{"503 with zero Retry-After", 503, "0", outcome{"webhook URL/hook: 503 Service Unavailable", false, 0, 503}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.retryAfter != "" {
					w.Header().Set("Retry-After", tt.retryAfter)
				}
				w.WriteHeader(tt.status)
			}))
			t.Cleanup(srv.Close)

			s := newTestSender(t, Config{}, mustSigner(t, specSecret))
			resp, err := s.Send(context.Background(), Request{URL: srv.URL + "/hook", ID: "m", Payload: json.RawMessage(`{}`)})
			if diff := cmp.Diff(tt.want, outcomeOf(err, srv.URL)); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
			if resp.Status != tt.status {
				t.Errorf("Status = %d, want %d", resp.Status, tt.status)
			}
		})
	}
}

func TestSendTimeoutIsTransient(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Answer nothing until the client gives up and hangs up.
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs before srv.Close

	s := newTestSender(t, Config{Timeout: 50 * time.Millisecond}, mustSigner(t, specSecret))
	resp, err := s.Send(context.Background(), Request{URL: srv.URL + "/slow", ID: "m", Payload: json.RawMessage(`{}`)})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("Send error = %v, want ErrTimeout", err)
	}
	if retry.IsPermanent(err) {
		t.Errorf("timeout is permanent: %v", err)
	}
	if want := "webhook " + srv.URL + "/slow: no answer within 50ms: "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error = %q, want prefix %q", err, want)
	}
	if resp.Status != 0 || resp.Duration < 50*time.Millisecond {
		t.Errorf("Response = %+v, want no status and at least the timeout", resp)
	}
}

func TestSendTransportFailuresAreTransient(t *testing.T) {
	refused := "http://" + testenv.RefusedAddr(t) + "/hook"

	srv, _ := newReceiver(t)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	tests := []struct {
		name       string
		ctx        context.Context
		url        string
		wantPrefix string
		wantIs     error
	}{
		{"connection refused", context.Background(), refused, "webhook " + refused + ": dial tcp ", nil},
		{"caller cancelled", cancelled, srv.URL, "webhook " + srv.URL + ": ", context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestSender(t, Config{}, mustSigner(t, specSecret))
			_, err := s.Send(tt.ctx, Request{URL: tt.url, ID: "m", Payload: json.RawMessage(`{}`)})
			if err == nil {
				t.Fatal("Send succeeded")
			}
			if retry.IsPermanent(err) || errors.Is(err, ErrTimeout) {
				t.Errorf("error = %v, want transient and not a timeout", err)
			}
			if _, ok := retry.RetryAfter(err); ok {
				t.Errorf("error = %v carries a Retry-After", err)
			}
			if !strings.HasPrefix(err.Error(), tt.wantPrefix) {
				t.Errorf("error = %q, want prefix %q", err, tt.wantPrefix)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("error = %v, want it to wrap %v", err, tt.wantIs)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	at := func(d time.Duration, layout string) string {
		return strings.Replace(fixedNow().Add(d).Format(layout), "UTC", "GMT", 1)
	}
	tests := []struct {
		name   string
		value  string
		want   time.Duration
		wantOK bool
	}{
		{"delta-seconds", "120", 120 * time.Second, true},
		{"zero", "0", 0, true},
		{"surrounding space", " 7 ", 7 * time.Second, true},
		{"leading zeros", "007", 7 * time.Second, true},
		{"largest representable", "9223372036", 9223372036 * time.Second, true},
		{"too large to represent", "9223372037", 0, false},
		{"overflows int64", "99999999999999999999", 0, false},
		{"empty", "", 0, false},
		{"negative", "-5", 0, false},
		{"plus sign", "+5", 0, false},
		{"fraction", "1.5", 0, false},
		{"unit", "5s", 0, false},
		{"garbage", "soon", 0, false},
		{"IMF-fixdate", at(90*time.Second, http.TimeFormat), 90 * time.Second, true},
		{"RFC 850 date", at(time.Hour, time.RFC850), time.Hour, true},
		{"asctime date", at(2*time.Minute, time.ANSIC), 2 * time.Minute, true},
		{"date equal to now", at(0, http.TimeFormat), 0, true},
		{"date in the past", at(-time.Second, http.TimeFormat), 0, false},
		{"date long past", "Wed, 21 Oct 2015 07:28:00 GMT", 0, false},
		{"date without zone", "Sun, 01 Mar 2026 12:01:30", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseRetryAfter(tt.value, fixedNow())
			if diff := cmp.Diff(struct {
				D  time.Duration
				OK bool
			}{tt.want, tt.wantOK}, struct {
				D  time.Duration
				OK bool
			}{got, ok}); diff != "" {
				t.Errorf("ParseRetryAfter(%q) (-want +got):\n%s", tt.value, diff)
			}
		})
	}
}

func TestStatusErrorMessage(t *testing.T) {
	tests := []struct {
		name string
		err  StatusError
		want string
	}{
		{"server error", StatusError{503, "https://x/y"}, "webhook https://x/y: 503 Service Unavailable"},
		{"client error", StatusError{410, "https://x/y"}, "webhook https://x/y: 410 Gone"},
		{"redirect", StatusError{307, "https://x/y"}, "webhook https://x/y: 307 Temporary Redirect (redirects are not followed; configure the final URL)"},
		{"unknown code", StatusError{542, "https://x/y"}, "webhook https://x/y: 542"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}
