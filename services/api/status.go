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

	"github.com/relay-demo/relay/internal/history"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/query"
)

// listView is the answer of GET /v1/notifications.
type listView struct {
	Notifications []notification.Summary `json:"notifications"`
	NextCursor    string                 `json:"next_cursor,omitempty"`
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// viewOf is the answer of GET /v1/notifications/{id}: n, with empty
// lists rather than null.
func viewOf(n *notification.View) notification.View { return n.Filled() }

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
		store := deps.History
		if store == nil {
			return noHistory()
		}
		id := chi.URLParam(r, "id")
		n, err := store.Get(r.Context(), id)
		switch {
		case errors.Is(err, history.ErrNotFound):
			return newProblem(ProblemNotFound, http.StatusNotFound, "Not found",
				"no notification has the id "+strconv.Quote(id)+" (or it is older than the history keeps)")
		case err != nil:
			return historyFailed(deps, err)
		default:
			w.Header().Set("Cache-Control", "no-store")
			writeJSON(w, http.StatusOK, viewOf(n))
		}
		return nil
	})
}

func handleListNotifications(deps Deps) http.HandlerFunc {
	return deps.serve(func(w http.ResponseWriter, r *http.Request) error {
		q, fields := listQuery(r)
		if len(fields) > 0 {
			return invalidQuery(fields)
		}
		store := deps.History
		if store == nil {
			return noHistory()
		}
		page, err := store.List(r.Context(), q)
		switch {
		case errors.Is(err, history.ErrBadCursor):
			return invalidQuery(notification.Invalid{{Field: "cursor", Message: "not a cursor this API gave out"}})
		case errors.Is(err, history.ErrBadQuery):
			return invalidQuery(notification.Invalid{{Field: "q", Message: err.Error()}})
		case err != nil:
			return historyFailed(deps, err)
		}
		out := listView{Notifications: []notification.Summary{}, NextCursor: page.Next}
		for _, s := range page.Items {
			sv := notification.Summary{ID: s.ID, CreatedAt: s.CreatedAt, DueAt: s.DueAt, Channels: nonNil(s.Channels), Recipients: nonNil(s.Recipients),
				Status: s.ChannelStatus()}
			out.Notifications = append(out.Notifications, sv)
		}
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, out)
		return nil
	})
}

// listQuery reads the list's query parameters, naming each bad one.
func listQuery(r *http.Request) (history.Query, notification.Invalid) {
	v, err := query.Values(r)
	var q history.Query
	var bad notification.Invalid
	if err != nil {
		bad = append(bad, notification.FieldError{Field: query.Field, Message: err.Error()})
	}
	for name := range v {
		switch name {
		case "status", "channel", "since", "until", "limit", "cursor", "q":
		default:
			bad = append(bad, notification.FieldError{Field: name, Message: "unknown parameter: use status, channel, since, until, q, limit or cursor"})
		}
	}
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
		if err != nil || n < 1 || n > history.MaxLimit {
			bad = append(bad, notification.FieldError{Field: "limit", Message: "a whole number from 1 to " + strconv.Itoa(history.MaxLimit)})
		}
		q.Limit = n
	}
	q.Cursor = v.Get("cursor")
	q.Search = v.Get("q")
	if n := utf8.RuneCountInString(q.Search); n > query.MaxSearch {
		bad = append(bad, notification.FieldError{Field: "q", Message: "at most " + strconv.Itoa(query.MaxSearch) + " characters, not " + strconv.Itoa(n)})
	}
	return q, bad
}

func invalidQuery(errs notification.Invalid) *Problem {
	p := newProblem(ProblemInvalidQuery, http.StatusUnprocessableEntity, "Invalid query",
		"the query has "+strconv.Itoa(len(errs))+" invalid parameter(s); see errors")
	p.Errors = errs
	return p
}
