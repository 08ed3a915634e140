package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/relay-demo/relay/services/internal/channel"
	"github.com/relay-demo/relay/services/internal/config"
	"github.com/relay-demo/relay/services/internal/history"
	"github.com/relay-demo/relay/services/internal/notification"
	"github.com/relay-demo/relay/services/internal/query"
	"github.com/relay-demo/relay/webhooks"
)

// DefaultRotationGrace is how long, after a secret rotation, deliveries
// are signed with the old secret as well, unless WEBHOOK_ROTATION_GRACE or
// the request says otherwise.
const DefaultRotationGrace = 24 * time.Hour

// MaxRotationGrace bounds a rotation's grace period.
const MaxRotationGrace = 30 * 24 * time.Hour

// MaxDescription bounds an endpoint's description, in bytes.
const MaxDescription = 1024

// EndpointsConfig is the environment of the endpoint routes of `relay api`.
type EndpointsConfig struct {
	// RotationGrace is how long the secret a rotation replaces stays
	// valid, unless the request gives its own.
	RotationGrace time.Duration `env:"WEBHOOK_ROTATION_GRACE" envDefault:"24h" help:"how long a rotated-out endpoint secret still signs deliveries, such as 24h; 0 for not at all; at most 720h"`
	// AllowConfig is the networks an endpoint may be registered in besides
	// the public internet, as the webhook worker reads them.
	channel.AllowConfig
}

// LoadEndpointsConfig reads and checks the endpoint routes' configuration
// from getenv.
func LoadEndpointsConfig(getenv func(string) string) (EndpointsConfig, error) {
	var cfg EndpointsConfig
	if err := config.Parse(getenv, &cfg); err != nil {
		return EndpointsConfig{}, err
	}
	if cfg.RotationGrace < 0 || cfg.RotationGrace > MaxRotationGrace {
		return EndpointsConfig{}, config.Invalid("WEBHOOK_ROTATION_GRACE", cfg.RotationGrace.String(), "a duration from 0 to 720h (30 days)")
	}
	if _, err := channel.AllowList(getenv, cfg.AllowConfig); err != nil {
		return EndpointsConfig{}, err
	}
	return cfg, nil
}

// EndpointStore is what the endpoint routes read and write; *history.Store
// is one.
type EndpointStore interface {
	CreateEndpoint(ctx context.Context, e history.Endpoint) error
	Endpoint(ctx context.Context, id string) (*history.Endpoint, error)
	ListEndpoints(ctx context.Context, q history.EndpointQuery) (history.EndpointPage, error)
	UpdateEndpoint(ctx context.Context, id string, c history.EndpointChange, now time.Time) (*history.Endpoint, error)
	DeleteEndpoint(ctx context.Context, id string) error
	RotateEndpointSecret(ctx context.Context, id string, secret history.Secret, grace time.Duration, now time.Time) (*history.Endpoint, error)
	EndpointAttempts(ctx context.Context, id string, q history.AttemptQuery) (history.AttemptPage, error)
}

// endpointSettings are what the endpoint routes need besides the store.
type endpointSettings struct {
	// grace is a rotation's grace period when the request sets none.
	grace time.Duration
	// guard judges where an endpoint's URL leads, as the worker's does.
	guard webhooks.Guard
	// lookup resolves a host name.
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)
}

func defaultEndpointSettings() endpointSettings {
	return endpointSettings{grace: DefaultRotationGrace, guard: webhooks.NewGuard(nil), lookup: func(ctx context.Context, host string) ([]netip.Addr, error) {
		return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	}}
}

// endpointHistory is the history store with the endpoint routes' settings,
// as Deps.History: the routes find both there.
type endpointHistory struct {
	*history.Store
	settings endpointSettings
}

func (h endpointHistory) endpointSettings() endpointSettings { return h.settings }

// withEndpoints returns store, to serve as Deps.History, with the endpoint
// routes' settings taken from cfg.
func withEndpoints(store *history.Store, cfg EndpointsConfig) (HistoryStore, error) {
	allow, err := webhooks.ParseAllowList(cfg.AllowCIDRs)
	if err != nil {
		return nil, config.Invalid("WEBHOOK_ALLOW_CIDRS", cfg.AllowCIDRs, "a comma-separated list of CIDRs such as 10.1.0.0/16,fd00:1::/64 ("+err.Error()+")")
	}
	s := defaultEndpointSettings()
	s.grace, s.guard = cfg.RotationGrace, webhooks.NewGuard(allow)
	return endpointHistory{Store: store, settings: s}, nil
}

// endpointsOf returns the endpoint store and settings, or answers 503
// without a store.
func endpointsOf(deps Deps, w http.ResponseWriter) (EndpointStore, endpointSettings) {
	store, ok := deps.History.(EndpointStore)
	if !ok {
		writeProblem(w, newProblem(ProblemHistoryUnavailable, http.StatusServiceUnavailable, "History unavailable",
			"this API runs without a history store, where endpoints live"))
		return nil, endpointSettings{}
	}
	settings := defaultEndpointSettings()
	if s, ok := deps.History.(interface{ endpointSettings() endpointSettings }); ok {
		settings = s.endpointSettings()
	}
	return store, settings
}

// NewEndpointID returns a random endpoint id: channel.EndpointIDPrefix and
// 26 lowercase base32 characters holding 128 random bits.
func NewEndpointID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return channel.EndpointIDPrefix + strings.ToLower(idEncoding.EncodeToString(b[:]))
}

// circuitView is an endpoint's circuit as the webhook workers last
// recorded it.
type circuitView struct {
	State        string     `json:"state"`
	Since        *time.Time `json:"since,omitempty"`
	LastError    string     `json:"last_error,omitempty"`
	FailingSince *time.Time `json:"failing_since,omitempty"`
	UpdatedAt    *time.Time `json:"updated_at,omitempty"`
}

// endpointView is an endpoint as the API shows it: never with a secret,
// except in the answer that made it (Secret).
type endpointView struct {
	ID             string      `json:"id"`
	URL            string      `json:"url"`
	Description    string      `json:"description"`
	Enabled        bool        `json:"enabled"`
	DisabledReason string      `json:"disabled_reason,omitempty"`
	DisabledAt     *time.Time  `json:"disabled_at,omitempty"`
	CreatedAt      time.Time   `json:"created_at"`
	UpdatedAt      time.Time   `json:"updated_at"`
	PreviousUntil  *time.Time  `json:"previous_secret_expires_at,omitempty"`
	Circuit        circuitView `json:"circuit"`
	// Secret is set in the answers of creation and rotation only.
	Secret string `json:"secret,omitempty"`
}

func endpointViewOf(e *history.Endpoint, now time.Time) endpointView {
	v := endpointView{ID: e.ID, URL: e.URL, Description: e.Description, Enabled: e.Enabled, DisabledReason: e.DisabledReason,
		DisabledAt: e.DisabledAt, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt,
		Circuit: circuitView{State: e.Circuit.State, Since: e.Circuit.Since, LastError: e.Circuit.LastError,
			FailingSince: e.Circuit.FailingSince, UpdatedAt: e.Circuit.UpdatedAt}}
	if len(e.Secrets(now)) > 1 {
		v.PreviousUntil = e.PreviousUntil
	}
	return v
}

// endpointListView is the answer of GET /v1/endpoints.
type endpointListView struct {
	Endpoints  []endpointView `json:"endpoints"`
	NextCursor string         `json:"next_cursor,omitempty"`
}

// endpointAttemptView is one attempt of an endpoint's delivery log: the
// notification's id, then the attempt as GET /v1/notifications/{id} shows
// it. The log does not read providers: a webhook has none.
type endpointAttemptView struct {
	NotificationID string `json:"notification_id"`
	notification.Attempt
}

// endpointAttemptsView is the answer of GET /v1/endpoints/{id}/attempts.
type endpointAttemptsView struct {
	Attempts   []endpointAttemptView `json:"attempts"`
	NextCursor string                `json:"next_cursor,omitempty"`
}

// createEndpointRequest is the body of POST /v1/endpoints.
type createEndpointRequest struct {
	URL         string `json:"url"`
	Description string `json:"description"`
}

// updateEndpointRequest is the body of PATCH /v1/endpoints/{id}: what it
// holds changes, what it leaves out stays.
type updateEndpointRequest struct {
	URL         *string `json:"url"`
	Description *string `json:"description"`
	Enabled     *bool   `json:"enabled"`
}

// rotateRequest is the optional body of POST
// /v1/endpoints/{id}/rotate-secret.
type rotateRequest struct {
	GraceSeconds *int64 `json:"grace_seconds"`
}

// ReasonDisabledByRequest is the disabled reason of an endpoint disabled
// through PATCH.
const ReasonDisabledByRequest = "disabled through the API"

func invalidEndpoint(errs notification.Invalid) *Problem {
	p := newProblem(ProblemInvalidFields, http.StatusUnprocessableEntity, "Invalid endpoint",
		"the request has "+strconv.Itoa(len(errs))+" invalid field(s); see errors")
	p.Errors = errs
	return p
}

func endpointNotFound(id string) *Problem {
	return newProblem(ProblemNotFound, http.StatusNotFound, "Not found", "no endpoint has the id "+strconv.Quote(id))
}

// decodeBody reads exactly one JSON object of the request into v, refusing
// unknown fields; holds says what the body may hold. It answers the
// request itself and returns false when the body is not one.
func decodeBody(deps Deps, w http.ResponseWriter, r *http.Request, v any, holds string) bool {
	if p := checkContentType(r.Header.Get("Content-Type")); p != nil {
		writeProblem(w, p)
		return false
	}
	if r.ContentLength > deps.MaxBody {
		writeProblem(w, tooLarge(deps.MaxBody))
		return false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, deps.MaxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeProblem(w, decodeProblem(err, dec.InputOffset(), holds))
		return false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeProblem(w, tooLarge(tooBig.Limit))
			return false
		}
		writeProblem(w, malformed(fmt.Sprintf("unexpected data after the JSON object, at byte offset %d", dec.InputOffset())))
		return false
	}
	return true
}

// checkTarget says what is wrong with an endpoint's URL, or returns "":
// its form, as the webhook channel checks it, and where its host leads
// now, as the worker's address guard judges an address when it dials.
func (s endpointSettings) checkTarget(ctx context.Context, raw string) string {
	if problem := channel.CheckEndpointURL(raw); problem != "" {
		return problem
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "not a URL"
	}
	host := u.Hostname()
	addrs := []netip.Addr{}
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = append(addrs, a)
	} else {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		addrs, err = s.lookup(ctx, host)
		if err != nil || len(addrs) == 0 {
			return fmt.Sprintf("host %q does not resolve (%s)", host, lookupFailure(err))
		}
	}
	for _, a := range addrs {
		if err := s.guard.Control("tcp", netip.AddrPortFrom(a, 0).String(), nil); err != nil {
			return fmt.Sprintf("host %q: %v: webhooks may reach only the public internet, and the networks WEBHOOK_ALLOW_CIDRS lists", host, err)
		}
	}
	return ""
}

// lookupFailure says why a host did not resolve without naming the DNS
// server that answered: a *net.DNSError's text ends "on 10.0.0.2:53", the
// address of the resolver inside relay's network, which is none of the
// client's business.
func lookupFailure(err error) string {
	var dnsErr *net.DNSError
	switch {
	case err == nil:
		return "no address"
	case errors.As(err, &dnsErr):
		return dnsErr.Err
	case errors.Is(err, context.DeadlineExceeded):
		return "the lookup timed out"
	}
	return "the lookup failed"
}

func handleCreateEndpoint(deps Deps) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		store, settings := endpointsOf(deps, w)
		if store == nil {
			return
		}
		var req createEndpointRequest
		if !decodeBody(deps, w, r, &req, "an endpoint holds url and description") {
			return
		}
		var bad notification.Invalid
		if problem := settings.checkTarget(r.Context(), req.URL); problem != "" {
			bad = append(bad, notification.FieldError{Field: "url", Message: problem})
		}
		if len(req.Description) > MaxDescription {
			bad = append(bad, notification.FieldError{Field: "description", Message: fmt.Sprintf("at most %d bytes", MaxDescription)})
		}
		if len(bad) > 0 {
			writeProblem(w, invalidEndpoint(bad))
			return
		}
		now := deps.Now().UTC()
		e := history.Endpoint{URL: req.URL, Description: req.Description, Secret: history.Secret(webhooks.NewSecret()), CreatedAt: now}
		var err error
		for range 3 { // a clash of 128 random bits: never, but not a 500
			e.ID = NewEndpointID()
			if err = store.CreateEndpoint(r.Context(), e); !errors.Is(err, history.ErrExists) {
				break
			}
		}
		if err != nil {
			historyFailed(deps, w, err)
			return
		}
		created, err := store.Endpoint(r.Context(), e.ID)
		if err != nil {
			historyFailed(deps, w, err)
			return
		}
		deps.Log.Info("endpoint created", "endpoint_id", e.ID)
		v := endpointViewOf(created, now)
		v.Secret = created.Secret.Reveal()
		w.Header().Set("Location", "/v1/endpoints/"+e.ID)
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusCreated, v)
	}
}

func handleListEndpoints(deps Deps) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q, bad := pageQuery(r)
		if len(bad) > 0 {
			writeProblem(w, invalidQuery(bad))
			return
		}
		store, _ := endpointsOf(deps, w)
		if store == nil {
			return
		}
		page, err := store.ListEndpoints(r.Context(), history.EndpointQuery{Limit: q.Limit, Cursor: q.Cursor})
		switch {
		case errors.Is(err, history.ErrBadCursor):
			writeProblem(w, invalidQuery(notification.Invalid{{Field: "cursor", Message: "not a cursor this API gave out"}}))
			return
		case err != nil:
			historyFailed(deps, w, err)
			return
		}
		now := deps.Now()
		out := endpointListView{Endpoints: []endpointView{}, NextCursor: page.Next}
		for i := range page.Items {
			out.Endpoints = append(out.Endpoints, endpointViewOf(&page.Items[i], now))
		}
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, out)
	}
}

// pageQuery reads limit and cursor, naming each bad parameter.
func pageQuery(r *http.Request) (history.EndpointQuery, notification.Invalid) {
	v, err := query.Values(r)
	var q history.EndpointQuery
	var bad notification.Invalid
	if err != nil {
		bad = append(bad, notification.FieldError{Field: query.Field, Message: err.Error()})
	}
	for name := range v {
		if name != "limit" && name != "cursor" {
			bad = append(bad, notification.FieldError{Field: name, Message: "unknown parameter: use limit or cursor"})
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
	return q, bad
}

// endpointAnswer answers with the endpoint the store returned, or with
// why there is none.
func endpointAnswer(deps Deps, w http.ResponseWriter, id string, e *history.Endpoint, err error) {
	switch {
	case errors.Is(err, history.ErrNotFound):
		writeProblem(w, endpointNotFound(id))
	case err != nil:
		historyFailed(deps, w, err)
	default:
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, endpointViewOf(e, deps.Now()))
	}
}

func handleGetEndpoint(deps Deps) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		store, _ := endpointsOf(deps, w)
		if store == nil {
			return
		}
		id := chi.URLParam(r, "id")
		e, err := store.Endpoint(r.Context(), id)
		endpointAnswer(deps, w, id, e, err)
	}
}

func handleUpdateEndpoint(deps Deps) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		store, settings := endpointsOf(deps, w)
		if store == nil {
			return
		}
		id := chi.URLParam(r, "id")
		var req updateEndpointRequest
		if !decodeBody(deps, w, r, &req, "a change holds url, description and enabled") {
			return
		}
		var bad notification.Invalid
		if req.URL != nil {
			if problem := settings.checkTarget(r.Context(), *req.URL); problem != "" {
				bad = append(bad, notification.FieldError{Field: "url", Message: problem})
			}
		}
		if req.Description != nil && len(*req.Description) > MaxDescription {
			bad = append(bad, notification.FieldError{Field: "description", Message: fmt.Sprintf("at most %d bytes", MaxDescription)})
		}
		if len(bad) > 0 {
			writeProblem(w, invalidEndpoint(bad))
			return
		}
		e, err := store.UpdateEndpoint(r.Context(), id, history.EndpointChange{URL: req.URL, Description: req.Description,
			Enabled: req.Enabled, DisabledReason: ReasonDisabledByRequest}, deps.Now().UTC())
		if err == nil && req.Enabled != nil {
			deps.Log.Info("endpoint changed", "endpoint_id", id, "enabled", *req.Enabled)
		}
		endpointAnswer(deps, w, id, e, err)
	}
}

func handleDeleteEndpoint(deps Deps) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		store, _ := endpointsOf(deps, w)
		if store == nil {
			return
		}
		id := chi.URLParam(r, "id")
		switch err := store.DeleteEndpoint(r.Context(), id); {
		case errors.Is(err, history.ErrNotFound):
			writeProblem(w, endpointNotFound(id))
		case err != nil:
			historyFailed(deps, w, err)
		default:
			deps.Log.Info("endpoint deleted", "endpoint_id", id)
			w.WriteHeader(http.StatusNoContent)
		}
	}
}

func handleRotateSecret(deps Deps) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		store, settings := endpointsOf(deps, w)
		if store == nil {
			return
		}
		id := chi.URLParam(r, "id")
		grace := settings.grace
		// The body is optional: without one, the configured grace period.
		if r.ContentLength != 0 {
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, deps.MaxBody))
			if err != nil {
				writeProblem(w, decodeProblem(err, 0, "a rotation holds grace_seconds"))
				return
			}
			if len(bytes.TrimSpace(body)) > 0 {
				r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
				var req rotateRequest
				if !decodeBody(deps, w, r, &req, "a rotation holds grace_seconds") {
					return
				}
				if req.GraceSeconds != nil {
					max := int64(MaxRotationGrace / time.Second)
					if *req.GraceSeconds < 0 || *req.GraceSeconds > max {
						writeProblem(w, invalidEndpoint(notification.Invalid{{Field: "grace_seconds", Message: fmt.Sprintf("a whole number of seconds from 0 to %d", max)}}))
						return
					}
					grace = time.Duration(*req.GraceSeconds) * time.Second
				}
			}
		}
		now := deps.Now().UTC()
		e, err := store.RotateEndpointSecret(r.Context(), id, history.Secret(webhooks.NewSecret()), grace, now)
		switch {
		case errors.Is(err, history.ErrNotFound):
			writeProblem(w, endpointNotFound(id))
			return
		case err != nil:
			historyFailed(deps, w, err)
			return
		}
		deps.Log.Info("endpoint secret rotated", "endpoint_id", id, "grace", grace.String())
		v := endpointViewOf(e, now)
		v.Secret = e.Secret.Reveal()
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, v)
	}
}

func handleEndpointAttempts(deps Deps) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q, bad := pageQuery(r)
		if len(bad) > 0 {
			writeProblem(w, invalidQuery(bad))
			return
		}
		store, _ := endpointsOf(deps, w)
		if store == nil {
			return
		}
		id := chi.URLParam(r, "id")
		if _, err := store.Endpoint(r.Context(), id); err != nil {
			endpointAnswer(deps, w, id, nil, err)
			return
		}
		page, err := store.EndpointAttempts(r.Context(), id, history.AttemptQuery{Channel: channel.Webhook.Name(), Limit: q.Limit, Cursor: q.Cursor})
		switch {
		case errors.Is(err, history.ErrBadCursor):
			writeProblem(w, invalidQuery(notification.Invalid{{Field: "cursor", Message: "not a cursor this API gave out"}}))
			return
		case err != nil:
			historyFailed(deps, w, err)
			return
		}
		out := endpointAttemptsView{Attempts: []endpointAttemptView{}, NextCursor: page.Next}
		for _, a := range page.Items {
			out.Attempts = append(out.Attempts, endpointAttemptView{NotificationID: a.NotificationID, Attempt: a.Attempt})
		}
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, out)
	}
}

// requireEndpoints refuses, before the notification routes see it, a
// request with a notification whose webhook part names an endpoint that
// does not exist or is disabled: 422 naming webhook.endpoint (in a batch,
// notifications[i].webhook.endpoint, and the batch is refused whole). It
// reads the body as the route will, and lets the route answer everything
// else: a body the route refuses for another reason passes untouched.
func requireEndpoints(deps Deps, batch bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if checkContentType(r.Header.Get("Content-Type")) != nil || r.ContentLength > deps.MaxBody {
				next.ServeHTTP(w, r)
				return
			}
			body, err := io.ReadAll(io.LimitReader(r.Body, deps.MaxBody+1))
			// The route reads the body as it was sent, whatever happens here.
			r.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
			// Only a body that names an endpoint needs decoding here; the
			// route decodes every body once anyway.
			if err != nil || int64(len(body)) > deps.MaxBody || !bytes.Contains(body, []byte(`"endpoint"`)) {
				next.ServeHTTP(w, r)
				return
			}
			items := []json.RawMessage{body}
			if batch {
				if items, err = decodeBatch(bytes.NewReader(body), deps.MaxBatch); err != nil {
					next.ServeHTTP(w, r)
					return
				}
			}
			var bad notification.Invalid
			for i, raw := range items {
				n, err := decodeRequest(bytes.NewReader(raw))
				if err != nil {
					continue
				}
				id := channel.WebhookEndpoint(n)
				if id == "" {
					continue
				}
				store, _ := deps.History.(EndpointStore)
				if store == nil {
					writeProblem(w, newProblem(ProblemHistoryUnavailable, http.StatusServiceUnavailable, "History unavailable",
						"this API runs without a history store, where endpoints live: it cannot deliver to one"))
					return
				}
				field := channel.Webhook.Name() + ".endpoint"
				if batch {
					field = fmt.Sprintf("notifications[%d].%s", i, field)
				}
				e, err := store.Endpoint(r.Context(), id)
				switch {
				case errors.Is(err, history.ErrNotFound):
					bad = append(bad, notification.FieldError{Field: field, Message: fmt.Sprintf("no endpoint has the id %q", id)})
				case err != nil:
					historyFailed(deps, w, err)
					return
				case !e.Enabled:
					bad = append(bad, notification.FieldError{Field: field, Message: fmt.Sprintf("endpoint %s is disabled (%s): PATCH /v1/endpoints/%s {\"enabled\": true} re-enables it", id, e.DisabledReason, id)})
				}
			}
			if len(bad) > 0 {
				writeProblem(w, invalidFields(bad))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}
