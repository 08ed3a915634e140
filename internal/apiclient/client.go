// Package apiclient is a client of relay's HTTP API for the command-line
// tools (`relay send`, `relay status`): the requests they make, the types of
// the answers, their shared --api and --token flags, and the few text
// helpers they print with. It never reads the environment.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/relay-demo/relay/internal/notification"
)

// DefaultBase is the API's address when nothing else is given.
const DefaultBase = "http://localhost:8080"

// The errors a Client's calls wrap, for callers to tell them apart with
// errors.Is.
var (
	// ErrUnreachable is a request that got no answer: nothing listens at
	// the base URL, or it did not answer in time.
	ErrUnreachable = errors.New("no answer from the API")
	// ErrUnauthorized is a 401: no token, or one the API does not accept.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrNotFound is a 404: for a notification, an id the history does
	// not know (or no longer keeps).
	ErrNotFound = errors.New("not found")
)

// Client calls one relay API with one bearer token.
type Client struct {
	base, token string
	http        *http.Client
}

// New returns a client of the API at base (such as DefaultBase) that sends
// token, when not empty, as its bearer token. A nil hc means an
// http.Client with a 30-second timeout.
func New(base, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &Client{base: strings.TrimRight(base, "/"), token: token, http: hc}
}

// Base returns the API's base URL.
func (c *Client) Base() string { return c.base }

// Error is an answer other than the one a call expects.
type Error struct {
	// Status is the HTTP status code.
	Status int
	// Title and Detail come from the problem document (RFC 9457), when
	// the answer is one; Detail is otherwise the start of the body.
	Title, Detail string
	// Type is the problem type, such as
	// "https://relay.dev/problems/history-unavailable".
	Type string
	// RetryAfter is the wait the Retry-After header asks for; 0 without one.
	RetryAfter time.Duration
	// Body is the answer as it came (bounded), for a problem's members.
	Body []byte `json:"-"`
}

// Error says what the API answered.
func (e *Error) Error() string {
	msg := "API answered " + strconv.Itoa(e.Status) + " " + http.StatusText(e.Status)
	if e.Detail != "" {
		msg += ": " + e.Detail
	} else if e.Title != "" {
		msg += ": " + e.Title
	}
	return msg
}

// Is matches ErrUnauthorized for a 401 and ErrNotFound for a 404.
func (e *Error) Is(target error) bool {
	return (target == ErrUnauthorized && e.Status == http.StatusUnauthorized) ||
		(target == ErrNotFound && e.Status == http.StatusNotFound)
}

// Accepted is the API's answer to a notification it accepted.
type Accepted struct {
	// ID is the notification's id, "ntf_…".
	ID string `json:"id"`
	// Channels are the channels it goes to.
	Channels []string `json:"channels"`
	// Copies are the messages it went out as: one per channel, or one per
	// recipient for email. An older API leaves it out.
	Copies []notification.CopyRef `json:"copies,omitempty"`
	// DueAt is, for a scheduled notification, when it goes out.
	DueAt *time.Time `json:"due_at,omitempty"`
	// Rounded says why DueAt is later than the time asked for.
	Rounded string `json:"rounded,omitempty"`
}

// Cancellation is the API's answer to DELETE /v1/notifications/{id}.
type Cancellation struct {
	ID string `json:"id"`
	// Cancelled are the copies that will never be delivered.
	Cancelled []notification.CopyRef `json:"cancelled"`
	// NotCancelled are the copies that had gone out or were on their way.
	NotCancelled []notification.CopyStatus `json:"not_cancelled"`
}

// Cancel takes back what has not gone out of notification id.
func (c *Client) Cancel(ctx context.Context, id string) (Cancellation, error) {
	var res Cancellation
	raw, err := c.do(ctx, http.MethodDelete, "/v1/notifications/"+url.PathEscape(id), nil, nil, http.StatusOK)
	if err != nil {
		return res, err
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return res, fmt.Errorf("decode API answer %q: %w", raw, err)
	}
	return res, nil
}

// Post sends one notification (the JSON of body) and returns the API's
// acceptance. A non-empty key goes as its Idempotency-Key.
func (c *Client) Post(ctx context.Context, body any, key string) (Accepted, error) {
	var res Accepted
	b, err := json.Marshal(body)
	if err != nil {
		return res, fmt.Errorf("encode notification: %w", err)
	}
	h := http.Header{"Content-Type": {"application/json"}}
	if key != "" {
		h.Set("Idempotency-Key", key)
	}
	raw, err := c.do(ctx, http.MethodPost, "/v1/notifications", h, b, http.StatusAccepted)
	if err != nil {
		return res, err
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return res, fmt.Errorf("decode API answer %q: %w", raw, err)
	}
	return res, nil
}

// DashboardLink is the API's answer to POST /v1/dashboard/links.
type DashboardLink struct {
	// Path is the page's path and fragment, with the one-time code in it.
	Path string `json:"path"`
	// ExpiresAt is when the code stops working; nil when the link carries
	// none (an API without authentication).
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// DashboardLink asks for a one-time link that logs the dashboard in with
// the client's token, opening notification id's detail (none when id is
// empty). The link is URL(link.Path).
func (c *Client) DashboardLink(ctx context.Context, id string) (DashboardLink, error) {
	var res DashboardLink
	var body []byte
	if id != "" {
		body, _ = json.Marshal(map[string]string{"id": id})
	}
	raw, err := c.do(ctx, http.MethodPost, "/v1/dashboard/links", http.Header{"Content-Type": {"application/json"}}, body, http.StatusCreated)
	if err != nil {
		return res, err
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return res, fmt.Errorf("decode API answer %q: %w", raw, err)
	}
	return res, nil
}

// NotificationJSON returns the API's answer to GET
// /v1/notifications/{id} as it came.
func (c *Client) NotificationJSON(ctx context.Context, id string) (json.RawMessage, error) {
	return c.do(ctx, http.MethodGet, "/v1/notifications/"+url.PathEscape(id), nil, nil, http.StatusOK)
}

// Notification returns notification id with its copies and their
// attempts, from the API's history.
func (c *Client) Notification(ctx context.Context, id string) (*notification.View, error) {
	raw, err := c.NotificationJSON(ctx, id)
	if err != nil {
		return nil, err
	}
	var n notification.View
	if err := json.Unmarshal(raw, &n); err != nil {
		return nil, fmt.Errorf("decode notification %q: %w", id, err)
	}
	return &n, nil
}

// maxAnswer bounds how much of an answer is read: a notification's
// history with every attempt of every round fits many times over.
const maxAnswer = 8 << 20

func (c *Client) do(ctx context.Context, method, path string, h http.Header, body []byte, want int) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w at %s: %w", ErrUnreachable, c.base, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("%w at %s: read the answer to %s %s: %w", ErrUnreachable, c.base, method, path, err)
	}
	if resp.StatusCode != want {
		return nil, errorOf(resp, raw)
	}
	return raw, nil
}

// errorOf reads a problem document, or keeps the start of any other body.
func errorOf(resp *http.Response, raw []byte) *Error {
	e := &Error{Status: resp.StatusCode, Body: raw}
	var p struct {
		Type, Title, Detail string
		Errors              []struct{ Field, Message string }
	}
	if json.Unmarshal(raw, &p) == nil && (p.Title != "" || p.Detail != "") {
		e.Type, e.Title, e.Detail = p.Type, p.Title, p.Detail
		// A 422's detail says "see errors": the fields it names say more.
		if len(p.Errors) > 0 {
			fields := make([]string, len(p.Errors))
			for i, f := range p.Errors {
				fields[i] = f.Field + ": " + f.Message
			}
			e.Detail = strings.Join(fields, "; ")
		}
	} else {
		e.Detail = Clip(string(raw), 200)
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}
