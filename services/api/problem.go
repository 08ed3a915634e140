package api

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/relay-demo/relay/services/internal/notification"
)

// ProblemBase is the URI every problem type of the API starts with.
const ProblemBase = "https://relay.dev/problems/"

// The problem types the API answers with, one per kind of failure. They are
// stable: clients may switch on them.
const (
	ProblemMalformedJSON        = ProblemBase + "malformed-json"
	ProblemUnknownField         = ProblemBase + "unknown-field"
	ProblemInvalidHeader        = ProblemBase + "invalid-header"
	ProblemUnauthorized         = ProblemBase + "unauthorized"
	ProblemNotFound             = ProblemBase + "not-found"
	ProblemMethodNotAllowed     = ProblemBase + "method-not-allowed"
	ProblemBodyTooLarge         = ProblemBase + "body-too-large"
	ProblemUnsupportedMediaType = ProblemBase + "unsupported-media-type"
	ProblemInvalidFields        = ProblemBase + "invalid-fields"
	ProblemBrokerUnavailable    = ProblemBase + "broker-unavailable"
	ProblemNotReady             = ProblemBase + "not-ready"
	ProblemInternal             = ProblemBase + "internal-error"
	ProblemNotDestination       = ProblemBase + "not-a-work-queue"
	ProblemKeyReused            = ProblemBase + "idempotency-key-reused"
	ProblemKeyInFlight          = ProblemBase + "idempotency-key-in-flight"
	ProblemHistoryUnavailable   = ProblemBase + "history-unavailable"
	ProblemInvalidQuery         = ProblemBase + "invalid-query"
	ProblemInvalidBatch         = ProblemBase + "invalid-batch"
	ProblemRateLimited          = ProblemBase + "rate-limited"
	ProblemNothingToCancel      = ProblemBase + "nothing-to-cancel"
)

// ProblemContentType is the media type of every error answer (RFC 9457).
const ProblemContentType = "application/problem+json"

// Problem is an RFC 9457 problem detail, the body of every error answer.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Errors lists every invalid field of a 422 answer.
	Errors []notification.FieldError `json:"errors,omitempty"`
	// Replayed is how many parked messages a refused replay did move.
	Replayed *int `json:"replayed,omitempty"`
	// Results is each item's refusal when no item of a batch was valid.
	Results []itemResult `json:"results,omitempty"`
	// NotCancelled are, on a 409 to a cancellation, the copies that had
	// gone out or were on their way, with their status.
	NotCancelled []notification.CopyStatus `json:"not_cancelled,omitempty"`

	// retryAfter, in seconds, becomes a Retry-After header when set.
	retryAfter int
	// authenticate becomes a WWW-Authenticate header when set.
	authenticate string
}

// Error makes a Problem usable as an error on its way to the answer.
func (p *Problem) Error() string {
	if p.Detail == "" {
		return p.Title
	}
	return p.Title + ": " + p.Detail
}

func newProblem(typ string, status int, title, detail string) *Problem {
	return &Problem{Type: typ, Title: title, Status: status, Detail: detail}
}

func malformed(detail string) *Problem {
	return newProblem(ProblemMalformedJSON, http.StatusBadRequest, "Malformed request body", detail)
}

func unknownField(detail string) *Problem {
	return newProblem(ProblemUnknownField, http.StatusBadRequest, "Unknown field in request body", detail)
}

func invalidHeader(detail string) *Problem {
	return newProblem(ProblemInvalidHeader, http.StatusBadRequest, "Invalid request header", detail)
}

func unauthorized(detail, challenge string) *Problem {
	p := newProblem(ProblemUnauthorized, http.StatusUnauthorized, "Missing or invalid bearer token", detail)
	p.authenticate = challenge
	return p
}

func tooLarge(limit int64) *Problem {
	return newProblem(ProblemBodyTooLarge, http.StatusRequestEntityTooLarge, "Request body too large",
		"the body may hold at most "+strconv.FormatInt(limit, 10)+" bytes")
}

func unsupportedMediaType(detail string) *Problem {
	return newProblem(ProblemUnsupportedMediaType, http.StatusUnsupportedMediaType, "Unsupported media type", detail)
}

func invalidFields(errs notification.Invalid) *Problem {
	p := newProblem(ProblemInvalidFields, http.StatusUnprocessableEntity, "Invalid notification",
		"the notification has "+strconv.Itoa(len(errs))+" invalid field(s); see errors")
	p.Errors = errs
	return p
}

// invalidBatch refuses a batch as a whole: it holds no notification, or
// more than a batch may.
func invalidBatch(detail string) *Problem {
	p := newProblem(ProblemInvalidBatch, http.StatusUnprocessableEntity, "Invalid batch", detail)
	p.Errors = notification.Invalid{{Field: "notifications", Message: detail}}
	return p
}

// rateLimited refuses a request over its rate; the client may try again
// after wait, rounded up to whole seconds, at least 1.
func rateLimited(detail string, wait time.Duration) *Problem {
	p := newProblem(ProblemRateLimited, http.StatusTooManyRequests, "Too many requests", detail)
	p.retryAfter = max(1, int(math.Ceil(wait.Seconds())))
	return p
}

func unavailable(detail string) *Problem {
	p := newProblem(ProblemBrokerUnavailable, http.StatusServiceUnavailable, "Broker unavailable", detail)
	p.retryAfter = 1
	return p
}

// writeProblem answers with p and the headers it calls for.
func writeProblem(w http.ResponseWriter, p *Problem) {
	h := w.Header()
	h.Set("Content-Type", ProblemContentType)
	h.Set("X-Content-Type-Options", "nosniff")
	if p.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(p.retryAfter))
	}
	if p.authenticate != "" {
		h.Set("WWW-Authenticate", p.authenticate)
	}
	body, err := json.Marshal(p)
	if err != nil {
		// A Problem holds only strings and numbers; this cannot happen.
		body = []byte(`{"type":"` + ProblemInternal + `","title":"Internal error","status":500}`)
	}
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeProblem(w, newProblem(ProblemInternal, http.StatusInternalServerError, "Internal error", "the answer could not be encoded"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
