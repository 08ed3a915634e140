package api

import (
	"context"
	"net/http"
	"time"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/query"
	"github.com/relay-demo/relay/internal/store"
)

// ProviderStore is what GET /v1/providers reads; *store.Store is one.
type ProviderStore interface {
	Providers(ctx context.Context, now time.Time) ([]store.Provider, error)
}

// rateView is a provider's limit and how it stands.
type rateView struct {
	PerSecond float64 `json:"per_second"`
	Burst     int     `json:"burst"`
	// NextSlotMS is how long a send asking for a slot now would wait.
	NextSlotMS int64 `json:"next_slot_ms"`
	// Waiting counts the sends deferred for a slot still ahead.
	Waiting int `json:"waiting"`
}

// providerView is a channel's provider as the workers share it. Its
// address and credentials stay in the workers' environment.
type providerView struct {
	Channel  string      `json:"channel"`
	Name     string      `json:"name"`
	Position int         `json:"position"`
	Circuit  circuitView `json:"circuit"`
	Rate     *rateView   `json:"rate"`
	SeenAt   time.Time   `json:"seen_at"`
}

// providerListView is the answer of GET /v1/providers.
type providerListView struct {
	Providers []providerView `json:"providers"`
}

func providerViewOf(p store.Provider) providerView {
	v := providerView{Channel: p.Channel, Name: p.Name, Position: p.Position, SeenAt: p.SeenAt,
		Circuit: circuitView{State: p.Circuit.State, Since: p.Circuit.Since, LastError: p.Circuit.LastError,
			FailingSince: p.Circuit.FailingSince, UpdatedAt: p.Circuit.UpdatedAt}}
	if p.Rate != nil {
		v.Rate = &rateView{PerSecond: p.Rate.Per, Burst: p.Rate.Burst, NextSlotMS: p.NextSlot.Milliseconds(), Waiting: p.Waiting}
	}
	return v
}

// handleListProviders answers GET /v1/providers: every provider the
// email and sms workers declared, by channel and position, with its
// circuit as a worker last recorded it and its limit.
func handleListProviders(deps Deps) http.HandlerFunc {
	return deps.serve(func(w http.ResponseWriter, r *http.Request) error {
		v, err := query.Values(r)
		var bad notification.Invalid
		if err != nil {
			bad = append(bad, notification.FieldError{Field: query.Field, Message: err.Error()})
		}
		for name := range v {
			bad = append(bad, notification.FieldError{Field: name, Message: "unknown parameter: this route takes none"})
		}
		if len(bad) > 0 {
			return invalidQuery(bad)
		}
		st := deps.History
		if st == nil {
			return newProblem(ProblemHistoryUnavailable, http.StatusServiceUnavailable, "History unavailable",
				"this API runs without a history store, where the workers record their providers")
		}
		ps, err := st.Providers(r.Context(), deps.Now())
		if err != nil {
			return historyFailed(deps, err)
		}
		out := providerListView{Providers: []providerView{}}
		for _, p := range ps {
			out.Providers = append(out.Providers, providerViewOf(p))
		}
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, out)
		return nil
	})
}
