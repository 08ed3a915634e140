package api

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/problem"
)

// ProblemBase is the URI every problem type of the API starts with.
const ProblemBase = problem.Base

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
	ProblemInternal             = problem.Internal
	ProblemNotDestination       = ProblemBase + "not-a-work-queue"
	ProblemKeyReused            = ProblemBase + "idempotency-key-reused"
	ProblemKeyInFlight          = ProblemBase + "idempotency-key-in-flight"
	ProblemHistoryUnavailable   = ProblemBase + "history-unavailable"
	ProblemInvalidQuery         = ProblemBase + "invalid-query"
	ProblemInvalidBatch         = ProblemBase + "invalid-batch"
	ProblemRateLimited          = ProblemBase + "rate-limited"
	ProblemTooManyCopies        = ProblemBase + "too-many-copies"
	ProblemNothingToCancel      = ProblemBase + "nothing-to-cancel"
	ProblemJobEnded             = ProblemBase + "job-ended"
)

// ProblemContentType is the media type of every error answer (RFC 9457).
const ProblemContentType = problem.ContentType

// Problem is an RFC 9457 problem detail, the body of every error answer;
// the dashboard answers with the same.
type Problem = problem.Problem

func newProblem(typ string, status int, title, detail string) *Problem {
	return problem.New(typ, status, title, detail)
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
	p.Authenticate = challenge
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
	p.RetryAfter = max(1, int(math.Ceil(wait.Seconds())))
	return p
}

// tooManyCopies refuses a request that makes more copies than its rate
// limit lets a client send at once: waiting does not help, splitting it
// does.
func tooManyCopies(detail string) *Problem {
	return newProblem(ProblemTooManyCopies, http.StatusRequestEntityTooLarge, "Too many copies", detail)
}

func unavailable(detail string) *Problem {
	p := newProblem(ProblemBrokerUnavailable, http.StatusServiceUnavailable, "Broker unavailable", detail)
	p.RetryAfter = 1
	return p
}

// serve adapts h to net/http, with the one mapping of its failure to an
// answer (see problem.Handle).
func (d Deps) serve(h problem.HandlerFunc) http.HandlerFunc {
	return problem.Handle(d.Log, h)
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		problem.Write(w, newProblem(ProblemInternal, http.StatusInternalServerError, "Internal error", "the answer could not be encoded"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
