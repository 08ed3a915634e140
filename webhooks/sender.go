package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"time"
)

// DefaultTimeout bounds one delivery when Config.Timeout is not set.
const DefaultTimeout = 10 * time.Second

// DefaultUserAgent is sent when Config.UserAgent is empty, so receivers can
// tell relay's deliveries apart in their access logs.
const DefaultUserAgent = "relay-webhooks"

// maxResponseBody is how much of a response Send reads. Receivers answer
// with a status; draining a short body lets the connection be reused, and
// the cap stops a hostile receiver from streaming into the worker.
const maxResponseBody = 64 << 10

// Config tunes a Sender.
type Config struct {
	// Timeout bounds one delivery, from dial to the end of the response
	// body. Zero or less means DefaultTimeout.
	Timeout time.Duration
	// Allow lists networks webhooks may reach even though the address
	// guard refuses them, such as 10.1.0.0/16 for receivers inside the
	// deployment's own network, or 127.0.0.0/8 and ::1/128 in tests.
	// Empty means only globally reachable addresses.
	Allow []netip.Prefix
	// UserAgent is the User-Agent header; empty means DefaultUserAgent.
	UserAgent string
}

// Request is one webhook delivery.
type Request struct {
	// URL is the receiver's endpoint, http or https.
	URL string
	// ID is the message id, sent as webhook-id. Receivers deduplicate on
	// it, so every attempt at the same message must reuse it.
	ID string
	// Payload is the JSON body, sent as it is.
	Payload json.RawMessage
	// Timestamp is signed and sent as webhook-timestamp; zero means now.
	// Leave it zero on retries: receivers refuse timestamps older than a
	// few minutes.
	Timestamp time.Time
	// Signers, when not empty, sign this request instead of the Sender's
	// signer: an endpoint's own secret, or during a secret rotation the new
	// and the old, whose signatures webhook-signature then lists
	// space-separated so that a receiver holding either accepts.
	Signers []*Signer
}

// Response is what Send learned from the receiver.
type Response struct {
	// Status is the HTTP status code, or 0 if no response arrived.
	Status int
	// Duration is the time from sending the request to the end of the
	// response body.
	Duration time.Duration
}

// Sender delivers signed webhooks over HTTP. It is safe for concurrent use
// and keeps connections alive between deliveries, so build one per process,
// not one per message.
type Sender struct {
	client    *http.Client
	signer    *Signer
	timeout   time.Duration
	userAgent string
	now       func() time.Time // replaced in tests for fixed timestamps and Retry-After dates
}

// NewSender returns a Sender that signs with signer. A nil signer sends
// webhook-id and webhook-timestamp but no webhook-signature, for receivers
// that do not verify.
//
// Every connection goes through the Control of NewGuard(cfg.Allow), which
// refuses addresses that are not globally reachable unless cfg.Allow lets
// them through. The client uses no proxy, since a proxy would be the only
// address the guard saw, and it follows no redirects: a redirect could
// point anywhere, and a receiver that moved should be reconfigured.
func NewSender(cfg Config, signer *Signer) *Sender {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = DefaultUserAgent
	}
	dialer := &net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second, Control: NewGuard(cfg.Allow).Control}
	transport := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true, // a custom DialContext turns HTTP/2 off otherwise
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   16, // the default of 2 throttles a busy receiver to two connections' reuse
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   cfg.Timeout,
		ExpectContinueTimeout: time.Second,
	}
	return &Sender{
		client: &http.Client{
			Transport: transport,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				// Hand the 3xx back to Send, which reports it.
				return http.ErrUseLastResponse
			},
		},
		signer:    signer,
		timeout:   cfg.Timeout,
		userAgent: cfg.UserAgent,
		now:       time.Now,
	}
}

// Send POSTs r.Payload to r.URL with the signature headers and waits for
// the answer, at most the configured timeout. A 2xx answer returns a nil
// error. Any other outcome returns an error ready for the retry pipeline:
// marked permanent (IsPermanent) when no retry can help (a bad request, a
// 4xx other than 408 and 429, a redirect, a forbidden address), carrying
// the receiver's Retry-After (RetryAfter) when it sent a usable one, and
// plain otherwise. The Response is filled in whenever a request was made.
func (s *Sender) Send(ctx context.Context, r Request) (Response, error) {
	u, err := checkRequest(r)
	if err != nil {
		return Response{}, permanent{err}
	}
	where := logURL(u)
	ts := r.Timestamp
	if ts.IsZero() {
		ts = s.now()
	}

	ctx, cancel := context.WithTimeoutCause(ctx, s.timeout, ErrTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(r.Payload))
	if err != nil {
		return Response{}, permanent{fmt.Errorf("webhook %s: %w", where, err)}
	}
	switch {
	case len(r.Signers) > 0:
		req.Header = Headers(r.ID, ts, r.Payload, r.Signers...)
	case s.signer != nil:
		req.Header = s.signer.Headers(r.ID, ts, r.Payload)
	default:
		req.Header.Set(HeaderID, r.ID)
		req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", s.userAgent)

	start := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		return Response{Duration: time.Since(start)}, transportError(ctx, where, err, s.timeout)
	}
	// The status is the answer; a body that breaks off halfway changes
	// nothing about it, so the read error is ignored.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBody))
	resp.Body.Close()
	out := Response{Status: resp.StatusCode, Duration: time.Since(start)}
	return out, statusError(where, resp.StatusCode, resp.Header, s.now())
}

// checkRequest refuses requests that no retry could make deliverable.
func checkRequest(r Request) (*url.URL, error) {
	if r.URL == "" {
		return nil, errors.New("webhook: no url")
	}
	u, err := url.Parse(r.URL)
	if err != nil {
		// url.Error repeats the URL, which may hold credentials.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("webhook: bad url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("webhook %s: bad url: scheme %q, want http or https", logURL(u), u.Scheme)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("webhook %s: bad url: no host", logURL(u))
	}
	if r.ID == "" {
		return nil, fmt.Errorf("webhook %s: request has no id", logURL(u))
	}
	if !json.Valid(r.Payload) {
		return nil, fmt.Errorf("webhook %s %s: payload is not valid JSON", logURL(u), r.ID)
	}
	return u, nil
}

// logURL renders u for error messages. Receivers often put access tokens in
// the query or the userinfo, and these errors end up in logs and in
// dead-lettered messages, so both are left out.
func logURL(u *url.URL) string {
	c := *u
	c.User = nil
	c.RawQuery = ""
	c.ForceQuery = false
	c.Fragment = ""
	c.RawFragment = ""
	return c.String()
}
