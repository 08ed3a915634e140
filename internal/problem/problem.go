// Package problem is the one error answer of relay's HTTP routes, the
// API's and the dashboard's: an RFC 9457 problem detail, written by Write,
// and Handle, which lets a handler return its failure instead of writing
// it.
package problem

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/relay-demo/relay/internal/notification"
)

// Base is the URI every problem type starts with.
const Base = "https://relay.dev/problems/"

// ContentType is the media type of every problem.
const ContentType = "application/problem+json"

// Internal is the type of a failure of relay itself.
const Internal = Base + "internal-error"

// Problem is an RFC 9457 problem detail, the body of every error answer.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Errors lists every invalid field or parameter of a 422 answer.
	Errors []notification.FieldError `json:"errors,omitempty"`
	// Members, when set, is a struct whose JSON fields follow the ones
	// above: the extension members of one kind of problem.
	Members any `json:"-"`
	// RetryAfter, in seconds, becomes a Retry-After header when set.
	RetryAfter int `json:"-"`
	// Authenticate becomes a WWW-Authenticate header when set.
	Authenticate string `json:"-"`
}

// New returns a problem of type typ.
func New(typ string, status int, title, detail string) *Problem {
	return &Problem{Type: typ, Title: title, Status: status, Detail: detail}
}

// Error makes a Problem usable as an error on its way to the answer.
func (p *Problem) Error() string {
	if p.Detail == "" {
		return p.Title
	}
	return p.Title + ": " + p.Detail
}

// MarshalJSON writes the standard members, then those of Members.
func (p *Problem) MarshalJSON() ([]byte, error) {
	type plain Problem // without this method
	body, err := marshal((*plain)(p))
	if err != nil || p.Members == nil {
		return body, err
	}
	more, err := marshal(p.Members)
	if err != nil {
		return nil, err
	}
	if len(more) <= 2 { // {}
		return body, nil
	}
	return append(append(body[:len(body)-1], ','), more[1:]...), nil
}

// marshal is json.Marshal without its HTML escaping: a problem is read by
// people and programs, never run as HTML (Write sends it with nosniff),
// and "Bearer <token>" should read as such, not as Bearer \u003ctoken\u003e.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Write answers with p and the headers it calls for.
func Write(w http.ResponseWriter, p *Problem) {
	h := w.Header()
	h.Set("Content-Type", ContentType)
	h.Set("X-Content-Type-Options", "nosniff")
	if p.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(p.RetryAfter))
	}
	if p.Authenticate != "" {
		h.Set("WWW-Authenticate", p.Authenticate)
	}
	body, err := marshal(p)
	if err != nil {
		// A Problem's members are strings and numbers; this cannot happen.
		body = []byte(`{"type":"` + Internal + `","title":"Internal error","status":500}`)
	}
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}

// HandlerFunc is a handler that returns why it failed rather than
// answering it: a *Problem, or any other error, which becomes a 500.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// Handle adapts h to net/http: the one place a handler's failure becomes
// its answer. A *Problem is answered as it is; any other error is logged
// to log and answered with a 500 that does not show it.
func Handle(log *slog.Logger, h HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		err := h(w, r)
		if err == nil {
			return
		}
		var p *Problem
		if !errors.As(err, &p) {
			log.Error("serve request", "method", r.Method, "path", r.URL.Path, "error", err.Error())
			p = New(Internal, http.StatusInternalServerError, "Internal error", "the request could not be completed")
		}
		Write(w, p)
	}
}
