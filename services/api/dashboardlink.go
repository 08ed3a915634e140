package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/relay-demo/relay/internal/dashboard"
)

// DashboardLinks issues the codes of one-time links to the dashboard;
// *dashboard.Links is one.
type DashboardLinks interface {
	Issue(token string) (code string, expires time.Time, err error)
}

// dashboardLink is the answer to POST /v1/dashboard/links.
type dashboardLink struct {
	// Path is the page's path and fragment, the code in it: the client
	// puts the API's base URL before it.
	Path string `json:"path"`
	// ExpiresAt is when the code stops working; absent when the link
	// carries none (the API runs without authentication).
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// maxLinkID bounds the notification id a link may open.
const maxLinkID = 200

// handleCreateDashboardLink is POST /v1/dashboard/links: a one-time link
// that logs the dashboard in with the token the request authenticated
// with, and opens a notification's detail when the body names one
// ({"id": "ntf_…"}, optional). The link carries a code good for one use
// within minutes, never the token. Without authentication (AuthOff) the
// dashboard needs no token, and the link carries no code.
func handleCreateDashboardLink(deps Deps) http.HandlerFunc {
	return deps.serve(func(w http.ResponseWriter, r *http.Request) error {
		if deps.DashboardLinks == nil {
			return newProblem(ProblemNotFound, http.StatusNotFound, "Not found", "this API serves no dashboard")
		}
		var body struct {
			ID string `json:"id"`
		}
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<10))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil && !errors.Is(err, io.EOF) {
			return newProblem(ProblemMalformedJSON, http.StatusBadRequest, "Malformed JSON",
				fmt.Sprintf(`send {"id": "ntf_…"} to open a notification's detail, or no body: %v`, err))
		}
		if len(body.ID) > maxLinkID || !utf8.ValidString(body.ID) {
			return newProblem(ProblemMalformedJSON, http.StatusBadRequest, "Malformed JSON",
				fmt.Sprintf("id: a notification id of at most %d bytes of UTF-8", maxLinkID))
		}
		if deps.AuthOff {
			writeJSON(w, http.StatusCreated, dashboardLink{Path: dashboard.LinkPath(body.ID, "")})
			return nil
		}
		token, _ := bearer(r.Header.Get("Authorization"))
		code, expires, err := deps.DashboardLinks.Issue(token)
		if errors.Is(err, dashboard.ErrTooManyLinks) {
			return rateLimited(err.Error(), time.Minute)
		}
		if err != nil {
			return fmt.Errorf("issue a dashboard link: %w", err)
		}
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusCreated, dashboardLink{Path: dashboard.LinkPath(body.ID, code), ExpiresAt: &expires})
		return nil
	})
}
