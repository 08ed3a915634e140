package dashboard

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/relay-demo/relay/internal/history"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/problem"
	"github.com/relay-demo/relay/internal/query"
)

// HistoryReader reads the notification history; *history.Store is one.
type HistoryReader interface {
	Get(ctx context.Context, id string) (*notification.View, error)
	List(ctx context.Context, q history.Query) (history.Page, error)
}

// detailView is one notification as GET /v1/notifications/{id} shows
// it. Redacted says error texts and the payload were left out.
type detailView struct {
	notification.View
	Redacted bool `json:"redacted"`
}

// summaryView is one notification of a list. Status has a channel's
// status, the most pressing of its copies' (history.Summary.ChannelStatus);
// Copies has each copy's, which the page keeps up to date from the live
// events, each about one copy.
type summaryView struct {
	notification.Summary
	Copies []notification.CopyStatus `json:"copies"`
}

// listView is one page of the list.
type listView struct {
	Notifications []summaryView `json:"notifications"`
	NextCursor    string        `json:"next_cursor,omitempty"`
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// recipientsFor is recipients as a viewer sees them: in full with a token,
// else each through notification.PublicRecipient.
func recipientsFor(recipients []string, full bool) []string {
	if full || recipients == nil {
		return nonNil(recipients)
	}
	out := make([]string, len(recipients))
	for i, r := range recipients {
		out[i] = notification.PublicRecipient(r)
	}
	return out
}

// viewOf is n as the page shows it; without full, no error text, no
// payload and no secret of a webhook URL.
func viewOf(n *notification.View, full bool) detailView {
	if full {
		return detailView{View: n.Filled()}
	}
	return detailView{View: n.Redacted(notification.PublicRecipient), Redacted: true}
}

func historyUnavailable(detail string) *problem.Problem {
	return &problem.Problem{Type: problem.Base + "history-unavailable", Title: "History unavailable",
		Status: http.StatusServiceUnavailable, Detail: detail, RetryAfter: 1}
}

// reader returns the history, or the 503 that answers without one.
func (s *server) reader() (HistoryReader, *problem.Problem) {
	if s.History == nil {
		return nil, historyUnavailable("this dashboard runs without a history store")
	}
	return s.History, nil
}

// failed is the answer to a history error the client cannot act on:
// logged here, never sent, since it may quote the store.
func (s *server) failed(err error) *problem.Problem {
	s.Log.Error("read the history", "error", err)
	return historyUnavailable("the history store could not be read; try again shortly")
}

func (s *server) detail(w http.ResponseWriter, r *http.Request) error {
	full, refusal := s.allow(r)
	if refusal != nil {
		return refusal
	}
	store, p := s.reader()
	if p != nil {
		return p
	}
	id := r.PathValue("id")
	n, err := store.Get(r.Context(), id)
	switch {
	case errors.Is(err, history.ErrNotFound):
		return &problem.Problem{Type: problem.Base + "not-found", Title: "Not found", Status: http.StatusNotFound,
			Detail: "no notification has the id " + strconv.Quote(id) + " (or it is older than the history keeps)"}
	case err != nil:
		return s.failed(err)
	default:
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, viewOf(n, full))
	}
	return nil
}

func (s *server) list(w http.ResponseWriter, r *http.Request) error {
	full, refusal := s.allow(r)
	if refusal != nil {
		return refusal
	}
	q, bad := listQuery(r)
	if len(bad) > 0 {
		return &problem.Problem{Type: problem.Base + "invalid-query", Title: "Invalid query", Status: http.StatusUnprocessableEntity,
			Detail: "the query has " + strconv.Itoa(len(bad)) + " invalid parameter(s); see errors", Errors: bad}
	}
	store, p := s.reader()
	if p != nil {
		return p
	}
	// A visitor's search looks only at what the visitor sees: were it to
	// match the rest, the notifications and the cursor it answers with
	// would tell a hidden token a character at a time.
	q.Public = !full
	page, err := store.List(r.Context(), q)
	switch {
	case errors.Is(err, history.ErrBadCursor):
		return &problem.Problem{Type: problem.Base + "invalid-query", Title: "Invalid query", Status: http.StatusUnprocessableEntity,
			Detail: "the cursor is not one this dashboard gave out", Errors: []notification.FieldError{{Field: "cursor", Message: "not a cursor this dashboard gave out"}}}
	case errors.Is(err, history.ErrBadQuery):
		// The store's own words about the query the client sent.
		return &problem.Problem{Type: problem.Base + "invalid-query", Title: "Invalid query", Status: http.StatusUnprocessableEntity,
			Detail: "the query cannot be run; see errors", Errors: []notification.FieldError{{Field: "q", Message: err.Error()}}}
	case err != nil:
		return s.failed(err)
	}
	out := listView{Notifications: []summaryView{}, NextCursor: page.Next}
	for _, n := range page.Items {
		sv := summaryView{Summary: notification.Summary{ID: n.ID, CreatedAt: n.CreatedAt, DueAt: n.DueAt, Channels: nonNil(n.Channels),
			Recipients: recipientsFor(n.Recipients, full), Status: n.ChannelStatus()}, Copies: []notification.CopyStatus{}}
		for _, c := range n.Copies {
			recipient := c.Recipient
			if !full {
				recipient = notification.PublicRecipient(recipient)
			}
			sv.Copies = append(sv.Copies, notification.CopyStatus{Channel: c.Channel, Recipient: recipient, Status: c.Status})
		}
		out.Notifications = append(out.Notifications, sv)
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
	return nil
}

// listQuery reads the list's query parameters, naming each bad one.
func listQuery(r *http.Request) (history.Query, []notification.FieldError) {
	v, err := query.Values(r)
	var q history.Query
	var bad []notification.FieldError
	if err != nil {
		bad = append(bad, notification.FieldError{Field: query.Field, Message: err.Error()})
	}
	for name := range v {
		switch name {
		case "status", "channel", "limit", "cursor", "q":
		default:
			bad = append(bad, notification.FieldError{Field: name, Message: "unknown parameter: use status, channel, q, limit or cursor"})
		}
	}
	if st := v.Get("status"); st != "" {
		if !slices.Contains(notification.Statuses, st) {
			bad = append(bad, notification.FieldError{Field: "status", Message: "one of " + strings.Join(notification.Statuses, ", ")})
		}
		q.Status = notification.Status(st)
	}
	q.Channel = v.Get("channel")
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
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
