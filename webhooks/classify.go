package webhooks

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// permanent marks a delivery that another attempt would fail the same way;
// after carries the wait a receiver asked for. Their methods are how a retry
// library tells (relay's retry package recognises both); errors.As finds
// them through any wrapping.
type (
	permanent struct{ err error }
	after     struct {
		err error
		d   time.Duration
	}
)

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent reports true: no retry can help.
func (p permanent) Permanent() bool { return true }

func (a after) Error() string { return a.err.Error() }
func (a after) Unwrap() error { return a.err }

// RetryAfter is the wait the receiver asked for before the next attempt.
func (a after) RetryAfter() time.Duration { return a.d }

// IsPermanent reports whether err, or an error it wraps, says no retry can
// help.
func IsPermanent(err error) bool {
	var p interface{ Permanent() bool }
	return errors.As(err, &p) && p.Permanent()
}

// RetryAfter returns the wait err, or an error it wraps, asks for.
func RetryAfter(err error) (time.Duration, bool) {
	var a interface{ RetryAfter() time.Duration }
	if err == nil || !errors.As(err, &a) || a.RetryAfter() <= 0 {
		return 0, false
	}
	return a.RetryAfter(), true
}

// ErrTimeout is wrapped by Send's error when the receiver did not answer
// within Config.Timeout. Such an error is transient.
var ErrTimeout = errors.New("no answer")

// StatusError is a receiver's answer other than 2xx. Send returns it
// wrapped: plain, or with the receiver's Retry-After (see RetryAfter), for
// 408, 429 and 5xx, which a later attempt may get past; marked permanent
// (see IsPermanent) for every other status.
type StatusError struct {
	// Status is the HTTP status code.
	Status int
	// URL is the endpoint, without query or credentials.
	URL string
}

// Error reads like "webhook https://example.com/hook: 503 Service Unavailable".
func (e *StatusError) Error() string {
	msg := fmt.Sprintf("webhook %s: %d", e.URL, e.Status)
	if text := http.StatusText(e.Status); text != "" {
		msg += " " + text
	}
	if e.Status >= 300 && e.Status < 400 {
		msg += " (redirects are not followed; configure the final URL)"
	}
	return msg
}

// statusError classifies a response by its status code. Retry-After is
// honoured only where a retry is due anyway: a 4xx that asks to wait stays
// a permanent failure.
func statusError(where string, status int, h http.Header, now time.Time) error {
	if status >= 200 && status < 300 {
		return nil
	}
	err := &StatusError{Status: status, URL: where}
	if status != http.StatusRequestTimeout && status != http.StatusTooManyRequests && (status < 500 || status > 599) {
		return permanent{err}
	}
	if d, ok := ParseRetryAfter(h.Get("Retry-After"), now); ok && d > 0 {
		return after{err, d}
	}
	return err
}

// transportError classifies a request that got no response. ctx is the
// request's own context, whose cause tells Send's timeout apart from the
// caller giving up.
func transportError(ctx context.Context, where string, err error, timeout time.Duration) error {
	// url.Error repeats the full URL, query and all; where says it already.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	// What the name resolved to, the resolver and the local end are the
	// sender's network, not the receiver's business.
	err = RedactAddresses(err)
	switch {
	case errors.Is(err, ErrForbiddenAddress):
		// The name resolves into the service's own network. DNS could
		// change, but not within a retry schedule, and the endpoint
		// should never have been registered.
		return permanent{fmt.Errorf("webhook %s: %w", where, err)}
	case errors.Is(context.Cause(ctx), ErrTimeout):
		return fmt.Errorf("webhook %s: %w within %s: %w", where, ErrTimeout, timeout, err)
	default:
		// Refused, reset, DNS failure, TLS handshake, caller's cancellation:
		// all may pass, so the retry schedule decides.
		return fmt.Errorf("webhook %s: %w", where, err)
	}
}

// ParseRetryAfter reads a Retry-After header value, either delta-seconds
// ("120") or an HTTP-date, which is taken relative to now. It reports false
// for an empty or malformed value, a date in the past, and a delay too
// large to represent; a receiver's garbage must not stall a message.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs > math.MaxInt64/int64(time.Second) {
			return 0, false
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d < 0 || !now.Add(d).Equal(t) {
		// In the past, or too far ahead for a Duration (Sub saturates).
		return 0, false
	}
	return d, true
}

// isDigits reports whether s is delta-seconds: ASCII digits only, so that
// a signed number ("-5") is not taken for a delay.
func isDigits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
