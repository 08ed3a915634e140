package api

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/query"
	"github.com/relay-demo/relay/internal/store"
)

// listView is the answer of GET /v1/notifications.
type listView struct {
	Notifications []summaryView `json:"notifications"`
	NextCursor    string        `json:"next_cursor,omitempty"`
}

// summaryView is one notification of the list: a status per channel, and
// each copy's, which the dashboard keeps up to date from the live events,
// each about one copy.
type summaryView struct {
	notification.Summary
	Copies []copyView `json:"copies"`
}

// copyView is one copy of a listed notification; with attempts=true, its
// attempts too, as the dashboard draws them on a time axis, never with an
// error text (the detail has those).
type copyView struct {
	notification.CopyStatus
	NextAttemptAt *time.Time             `json:"next_attempt_at,omitempty"`
	Attempts      []notification.Attempt `json:"attempts,omitempty"`
}

// maxWithAttempts is the largest page of the list with attempts=true,
// which reads each notification's detail.
const maxWithAttempts = 50

// detailView is the answer of GET /v1/notifications/{id}. Redacted says
// it was given to a public dashboard's visitor, without the payload and
// the error texts.
type detailView struct {
	notification.View
	Redacted bool `json:"redacted,omitempty"`
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// The redaction of what a public dashboard's visitor (see visitor) reads,
// in one place: with a token, everything; without, no payload and no
// error text, and each recipient, in every answer and every search,
// through notification.PublicRecipient.

// viewFor is n as r's caller may see it.
func viewFor(r *http.Request, n *notification.View) detailView {
	if visitor(r.Context()) {
		return detailView{View: n.Redacted(notification.PublicRecipient), Redacted: true}
	}
	return detailView{View: n.Filled()}
}

// recipientFor is how r's caller sees a recipient.
func recipientFor(r *http.Request) func(string) string {
	if visitor(r.Context()) {
		return notification.PublicRecipient
	}
	return func(s string) string { return s }
}

// noHistory answers the status routes of an API without a history store.
func noHistory() *Problem {
	return newProblem(ProblemHistoryUnavailable, http.StatusServiceUnavailable, "History unavailable",
		"this API runs without a history store")
}

// historyFailed logs why the history store failed a request and returns
// the 503 that answers it.
func historyFailed(deps Deps, err error) *Problem {
	deps.Log.Error("read the history", "error", err)
	p := newProblem(ProblemHistoryUnavailable, http.StatusServiceUnavailable, "History unavailable",
		"the history store could not be read; try again shortly")
	p.RetryAfter = 1
	return p
}

func handleGetNotification(deps Deps) http.HandlerFunc {
	return deps.serve(func(w http.ResponseWriter, r *http.Request) error {
		st := deps.History
		if st == nil {
			return noHistory()
		}
		id := chi.URLParam(r, "id")
		n, err := st.Get(r.Context(), id)
		if err == nil && !sees(r.Context(), n.Tenant) {
			err = store.ErrNotFound // another tenant's: as if there were none
		}
		switch {
		case errors.Is(err, store.ErrNotFound):
			return newProblem(ProblemNotFound, http.StatusNotFound, "Not found",
				"no notification has the id "+strconv.Quote(id)+" (or it is older than the history keeps)")
		case err != nil:
			return historyFailed(deps, err)
		default:
			w.Header().Set("Cache-Control", "no-store")
			writeJSON(w, http.StatusOK, viewFor(r, n))
		}
		return nil
	})
}

func handleListNotifications(deps Deps) http.HandlerFunc {
	return deps.serve(func(w http.ResponseWriter, r *http.Request) error {
		q, attempts, fields := listQuery(r)
		if len(fields) > 0 {
			return invalidQuery(fields)
		}
		st := deps.History
		if st == nil {
			return noHistory()
		}
		// A visitor's search looks only at what the visitor sees: were it to
		// match the rest, the notifications and the cursor it answers with
		// would tell a hidden token a character at a time.
		q.Public = visitor(r.Context())
		var p *Problem
		if q.Tenant, q.AllTenants, p = scopeList(r.Context(), q.Tenant, q.AllTenants); p != nil {
			return p
		}
		page, err := st.List(r.Context(), q)
		switch {
		case errors.Is(err, store.ErrBadCursor):
			return invalidQuery(notification.Invalid{{Field: "cursor", Message: "not a cursor this API gave out"}})
		case errors.Is(err, store.ErrBadQuery):
			return invalidQuery(notification.Invalid{{Field: "q", Message: err.Error()}})
		case err != nil:
			return historyFailed(deps, err)
		}
		see := recipientFor(r)
		out := listView{Notifications: []summaryView{}, NextCursor: page.Next}
		for _, s := range page.Items {
			recipients := make([]string, len(s.Recipients))
			for i, rc := range s.Recipients {
				recipients[i] = see(rc)
			}
			sv := summaryView{Summary: notification.Summary{ID: s.ID, Tenant: s.Tenant, CreatedAt: s.CreatedAt, DueAt: s.DueAt, Channels: nonNil(s.Channels),
				Recipients: recipients, Status: s.ChannelStatus()}, Copies: []copyView{}}
			copies := make([]notification.Copy, len(s.Copies))
			for i, c := range s.Copies {
				copies[i] = notification.Copy{Channel: c.Channel, Recipient: c.Recipient, Status: c.Status}
			}
			if attempts {
				n, err := st.Get(r.Context(), s.ID)
				switch {
				case err == nil:
					copies = n.Copies
				case !errors.Is(err, store.ErrNotFound): // else pruned since it was listed
					return historyFailed(deps, err)
				}
			}
			for _, c := range copies {
				cv := copyView{CopyStatus: notification.CopyStatus{Channel: c.Channel, Recipient: see(c.Recipient), Status: c.Status}}
				if attempts {
					cv.NextAttemptAt, cv.Attempts = c.NextAttemptAt, []notification.Attempt{}
					for _, a := range c.Attempts {
						a.Error = ""
						cv.Attempts = append(cv.Attempts, a)
					}
				}
				sv.Copies = append(sv.Copies, cv)
			}
			out.Notifications = append(out.Notifications, sv)
		}
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, out)
		return nil
	})
}

// listQuery reads the list's query parameters, naming each bad one.
func listQuery(r *http.Request) (q store.Query, attempts bool, bad notification.Invalid) {
	v, err := query.Values(r)
	if err != nil {
		bad = append(bad, notification.FieldError{Field: query.Field, Message: err.Error()})
	}
	for name := range v {
		switch name {
		case "status", "channel", "since", "until", "limit", "cursor", "q", "attempts", "tenant":
		default:
			bad = append(bad, notification.FieldError{Field: name, Message: "unknown parameter: use status, channel, since, until, q, attempts, tenant, limit or cursor"})
		}
	}
	var wrong notification.Invalid
	q.Tenant, q.AllTenants, wrong = tenantParam(v)
	bad = append(bad, wrong...)
	if s := v.Get("status"); s != "" {
		if !slices.Contains(notification.Statuses, s) {
			bad = append(bad, notification.FieldError{Field: "status", Message: "one of " + strings.Join(notification.Statuses, ", ")})
		}
		q.Status = notification.Status(s)
	}
	q.Channel = v.Get("channel")
	for _, t := range []struct {
		name string
		dst  *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		if s := v.Get(t.name); s != "" {
			at, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				bad = append(bad, notification.FieldError{Field: t.name, Message: "an RFC 3339 time such as 2026-01-02T15:04:05Z"})
			}
			*t.dst = at
		}
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > store.MaxLimit {
			bad = append(bad, notification.FieldError{Field: "limit", Message: "a whole number from 1 to " + strconv.Itoa(store.MaxLimit)})
		}
		q.Limit = n
	}
	switch v.Get("attempts") {
	case "", "false":
	case "true":
		attempts = true
		if q.Limit > maxWithAttempts {
			bad = append(bad, notification.FieldError{Field: "limit", Message: "at most " + strconv.Itoa(maxWithAttempts) + " with attempts=true"})
		}
	default:
		bad = append(bad, notification.FieldError{Field: "attempts", Message: "true or false"})
	}
	q.Cursor = v.Get("cursor")
	q.Search = v.Get("q")
	if n := utf8.RuneCountInString(q.Search); n > query.MaxSearch {
		bad = append(bad, notification.FieldError{Field: "q", Message: "at most " + strconv.Itoa(query.MaxSearch) + " characters, not " + strconv.Itoa(n)})
	}
	return q, attempts, bad
}

func invalidQuery(errs notification.Invalid) *Problem {
	p := newProblem(ProblemInvalidQuery, http.StatusUnprocessableEntity, "Invalid query",
		"the query has "+strconv.Itoa(len(errs))+" invalid parameter(s); see errors")
	p.Errors = errs
	return p
}
