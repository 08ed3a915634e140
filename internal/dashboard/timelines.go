package dashboard

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/relay-demo/relay/internal/history"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/problem"
	"github.com/relay-demo/relay/retry"
)

// maxTimelines is how many notifications one GET /dashboard/timelines
// reads: a page of the list.
const maxTimelines = 50

// timelineView is one copy's attempts as the list draws them: times and
// outcomes, never an error text.
type timelineView struct {
	Channel       string              `json:"channel"`
	Recipient     string              `json:"recipient,omitempty"`
	Status        notification.Status `json:"status"`
	NextAttemptAt *time.Time          `json:"next_attempt_at,omitempty"`
	Attempts      []timelineMark      `json:"attempts"`
}

// timelineMark is one attempt (or the replay that started a round).
type timelineMark struct {
	N       int           `json:"n"`
	Round   int           `json:"round"`
	At      time.Time     `json:"at"`
	Outcome retry.Outcome `json:"outcome"`
	Reason  string        `json:"reason,omitempty"`
	DelayMS *int64        `json:"delay_ms,omitempty"`
}

// timelines answers GET /dashboard/timelines?id=…&id=…: for each
// notification of a page of the list, each copy's attempts on its time
// axis, {"timelines": {"ntf_…": [copy, …]}}. An id the history does not
// know is left out.
func (s *server) timelines(w http.ResponseWriter, r *http.Request) error {
	full, refusal := s.allow(r)
	if refusal != nil {
		return refusal
	}
	v := r.URL.Query()
	var bad []notification.FieldError
	for name := range v {
		if name != "id" {
			bad = append(bad, notification.FieldError{Field: name, Message: "unknown parameter: use id"})
		}
	}
	ids := v["id"]
	if len(ids) == 0 || len(ids) > maxTimelines {
		bad = append(bad, notification.FieldError{Field: "id", Message: "from 1 to " + strconv.Itoa(maxTimelines) + " notification ids"})
	}
	if len(bad) > 0 {
		return &problem.Problem{Type: problem.Base + "invalid-query", Title: "Invalid query", Status: http.StatusUnprocessableEntity,
			Detail: "the query has " + strconv.Itoa(len(bad)) + " invalid parameter(s); see errors", Errors: bad}
	}
	store, p := s.reader()
	if p != nil {
		return p
	}
	out := map[string][]timelineView{}
	for _, id := range ids {
		if _, done := out[id]; done {
			continue
		}
		n, err := store.Get(r.Context(), id)
		if errors.Is(err, history.ErrNotFound) {
			continue
		}
		if err != nil {
			return s.failed(err)
		}
		copies := []timelineView{}
		for _, c := range n.Copies {
			recipient := c.Recipient
			if !full {
				recipient = notification.PublicRecipient(recipient)
			}
			tv := timelineView{Channel: c.Channel, Recipient: recipient, Status: c.Status, NextAttemptAt: c.NextAttemptAt, Attempts: []timelineMark{}}
			for _, a := range c.Attempts {
				tv.Attempts = append(tv.Attempts, timelineMark{N: a.N, Round: a.Round, At: a.At, Outcome: a.Outcome, Reason: a.Reason, DelayMS: a.DelayMS})
			}
			copies = append(copies, tv)
		}
		out[id] = copies
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]any{"timelines": out})
	return nil
}
