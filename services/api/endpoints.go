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

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/config"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/query"
	"github.com/relay-demo/relay/internal/store"
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

// EndpointStore is what the endpoint routes read and write; *store.Store
// is one.
type EndpointStore interface {
	CreateEndpoint(ctx context.Context, e store.Endpoint) error
	Endpoint(ctx context.Context, id string) (*store.Endpoint, error)
	ListEndpoints(ctx context.Context, q store.EndpointQuery) (store.EndpointPage, error)
	UpdateEndpoint(ctx context.Context, id string, c store.EndpointChange, now time.Time) (*store.Endpoint, error)
	DeleteEndpoint(ctx context.Context, id string) error
	RotateEndpointSecret(ctx context.Context, id string, secret store.Secret, grace time.Duration, now time.Time) (*store.Endpoint, error)
	EndpointAttempts(ctx context.Context, id string, q store.AttemptQuery) (store.AttemptPage, error)
}

// EndpointRules are what the endpoint routes check besides the store.
type EndpointRules struct {
	// Grace is a rotation's grace period when the request sets none.
	Grace time.Duration
	// Guard judges where an endpoint's URL leads, as the worker's does.
	Guard webhooks.Guard
	// Lookup resolves a host name; nil means the system resolver.
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
}

// NewEndpointRules returns the rules cfg sets.
func NewEndpointRules(cfg EndpointsConfig) (EndpointRules, error) {
	allow, err := webhooks.ParseAllowList(cfg.AllowCIDRs)
	if err != nil {
		return EndpointRules{}, config.Invalid("WEBHOOK_ALLOW_CIDRS", cfg.AllowCIDRs, "a comma-separated list of CIDRs such as 10.1.0.0/16,fd00:1::/64 ("+err.Error()+")")
	}
	return EndpointRules{Grace: cfg.RotationGrace, Guard: webhooks.NewGuard(allow)}, nil
}

// lookup resolves host with Lookup, or the system resolver.
func (s EndpointRules) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if s.Lookup != nil {
		return s.Lookup(ctx, host)
	}
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// noEndpoints answers the endpoint routes of an API without an endpoint
// store.
func noEndpoints() *Problem {
	return newProblem(ProblemHistoryUnavailable, http.StatusServiceUnavailable, "History unavailable",
		"this API runs without a history store, where endpoints live")
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
// except in the answer that made it (Secret), and with its tenant except
// for the default tenant's.
type endpointView struct {
	ID             string      `json:"id"`
	Tenant         string      `json:"tenant,omitempty"`
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

func endpointViewOf(e *store.Endpoint, now time.Time) endpointView {
	v := endpointView{ID: e.ID, Tenant: e.Tenant, URL: e.URL, Description: e.Description, Enabled: e.Enabled, DisabledReason: e.DisabledReason,
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

// visibleEndpoint returns the endpoint id if ctx's request may see it.
// Another tenant's is an error wrapping store.ErrNotFound, as an unknown
// id is, so that a tenant learns nothing of another's endpoints. An
// endpoint's tenant never changes, so a change that follows this check
// changes one the request may see.
func visibleEndpoint(ctx context.Context, st EndpointStore, id string) (*store.Endpoint, error) {
	e, err := st.Endpoint(ctx, id)
	if err == nil && !sees(ctx, e.Tenant) {
		return nil, fmt.Errorf("endpoint %q: %w", id, store.ErrNotFound)
	}
	return e, err
}

// decodeBody reads exactly one JSON object of the request into v, refusing
// unknown fields; holds says what the body may hold. It returns the
// problem that refuses the body when it is not one.
func decodeBody(deps Deps, w http.ResponseWriter, r *http.Request, v any, holds string) *Problem {
	if p := checkContentType(r.Header.Get("Content-Type")); p != nil {
		return p
	}
	if r.ContentLength > deps.MaxBody {
		return tooLarge(deps.MaxBody)
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, deps.MaxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeProblem(err, dec.InputOffset(), holds)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return tooLarge(tooBig.Limit)
		}
		return malformed(fmt.Sprintf("unexpected data after the JSON object, at byte offset %d", dec.InputOffset()))
	}
	return nil
}

// checkTarget says what is wrong with an endpoint's URL, or returns "":
// its form, as the webhook channel checks it, and where its host leads
// now, as the worker's address guard judges an address when it dials.
func (s EndpointRules) checkTarget(ctx context.Context, raw string) string {
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
		if err := s.Guard.Control("tcp", netip.AddrPortFrom(a, 0).String(), nil); err != nil {
			// Which address inside the network the name leads to is not
			// the client's business: the worker's errors never say it.
			return fmt.Sprintf("host %q: %v: webhooks may reach only the public internet, and the networks WEBHOOK_ALLOW_CIDRS lists", host, webhooks.RedactAddresses(err))
		}
	}
	return ""
}

// lookupFailure says why a host did not resolve: a *net.DNSError's
// reason alone, without the name the client gave again or the DNS server
// that answered (webhooks.RedactAddresses says why that one stays out).
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
	return deps.serve(func(w http.ResponseWriter, r *http.Request) error {
		st := deps.Endpoints
		if st == nil {
			return noEndpoints()
		}
		var req createEndpointRequest
		if p := decodeBody(deps, w, r, &req, "an endpoint holds url and description"); p != nil {
			return p
		}
		var bad notification.Invalid
		if problem := deps.EndpointRules.checkTarget(r.Context(), req.URL); problem != "" {
			bad = append(bad, notification.FieldError{Field: "url", Message: problem})
		}
		if len(req.Description) > MaxDescription {
			bad = append(bad, notification.FieldError{Field: "description", Message: fmt.Sprintf("at most %d bytes", MaxDescription)})
		}
		if len(bad) > 0 {
			return invalidEndpoint(bad)
		}
		now := deps.Now().UTC()
		e := store.Endpoint{Tenant: tenantOf(r.Context()), URL: req.URL, Description: req.Description, Secret: store.Secret(webhooks.NewSecret()), CreatedAt: now}
		var err error
		for range 3 { // a clash of 128 random bits: never, but not a 500
			e.ID = NewEndpointID()
			if err = st.CreateEndpoint(r.Context(), e); !errors.Is(err, store.ErrExists) {
				break
			}
		}
		if err != nil {
			return historyFailed(deps, err)
		}
		created, err := st.Endpoint(r.Context(), e.ID)
		if err != nil {
			return historyFailed(deps, err)
		}
		deps.Log.Info("endpoint created", "endpoint_id", e.ID)
		v := endpointViewOf(created, now)
		v.Secret = created.Secret.Reveal()
		w.Header().Set("Location", "/v1/endpoints/"+e.ID)
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusCreated, v)
		return nil
	})
}

func handleListEndpoints(deps Deps) http.HandlerFunc {
	return deps.serve(func(w http.ResponseWriter, r *http.Request) error {
		q, bad := pageQuery(r, true)
		if len(bad) > 0 {
			return invalidQuery(bad)
		}
		st := deps.Endpoints
		if st == nil {
			return noEndpoints()
		}
		var p *Problem
		if q.Tenant, q.AllTenants, p = scopeList(r.Context(), q.Tenant, q.AllTenants); p != nil {
			return p
		}
		page, err := st.ListEndpoints(r.Context(), q)
		switch {
		case errors.Is(err, store.ErrBadCursor):
			return invalidQuery(notification.Invalid{{Field: "cursor", Message: "not a cursor this API gave out"}})
		case err != nil:
			return historyFailed(deps, err)
		}
		now := deps.Now()
		out := endpointListView{Endpoints: []endpointView{}, NextCursor: page.Next}
		for i := range page.Items {
			out.Endpoints = append(out.Endpoints, endpointViewOf(&page.Items[i], now))
		}
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, out)
		return nil
	})
}

// pageQuery reads limit and cursor and, where tenants is true, tenant,
// naming each bad parameter. Without tenant= the query holds every
// tenant's endpoints, as an operator's list does; with it one tenant's
// ("default" names the default tenant).
func pageQuery(r *http.Request, tenants bool) (store.EndpointQuery, notification.Invalid) {
	v, err := query.Values(r)
	var q store.EndpointQuery
	var bad notification.Invalid
	if err != nil {
		bad = append(bad, notification.FieldError{Field: query.Field, Message: err.Error()})
	}
	use := "unknown parameter: use limit or cursor"
	if tenants {
		use = "unknown parameter: use tenant, limit or cursor"
	}
	for name := range v {
		if name != "limit" && name != "cursor" && (name != "tenant" || !tenants) {
			bad = append(bad, notification.FieldError{Field: name, Message: use})
		}
	}
	if tenants {
		var wrong notification.Invalid
		q.Tenant, q.AllTenants, wrong = tenantParam(v)
		bad = append(bad, wrong...)
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > store.MaxLimit {
			bad = append(bad, notification.FieldError{Field: "limit", Message: "a whole number from 1 to " + strconv.Itoa(store.MaxLimit)})
		}
		q.Limit = n
	}
	q.Cursor = v.Get("cursor")
	return q, bad
}

// endpointAnswer answers with the endpoint the store returned, or returns
// why there is none.
func endpointAnswer(deps Deps, w http.ResponseWriter, id string, e *store.Endpoint, err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return endpointNotFound(id)
	case err != nil:
		return historyFailed(deps, err)
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, endpointViewOf(e, deps.Now()))
	return nil
}

func handleGetEndpoint(deps Deps) http.HandlerFunc {
	return deps.serve(func(w http.ResponseWriter, r *http.Request) error {
		st := deps.Endpoints
		if st == nil {
			return noEndpoints()
		}
		id := chi.URLParam(r, "id")
		e, err := visibleEndpoint(r.Context(), st, id)
		return endpointAnswer(deps, w, id, e, err)
	})
}

func handleUpdateEndpoint(deps Deps) http.HandlerFunc {
	return deps.serve(func(w http.ResponseWriter, r *http.Request) error {
		st := deps.Endpoints
		if st == nil {
			return noEndpoints()
		}
		id := chi.URLParam(r, "id")
		var req updateEndpointRequest
		if p := decodeBody(deps, w, r, &req, "a change holds url, description and enabled"); p != nil {
			return p
		}
		var bad notification.Invalid
		if req.URL != nil {
			if problem := deps.EndpointRules.checkTarget(r.Context(), *req.URL); problem != "" {
				bad = append(bad, notification.FieldError{Field: "url", Message: problem})
			}
		}
		if req.Description != nil && len(*req.Description) > MaxDescription {
			bad = append(bad, notification.FieldError{Field: "description", Message: fmt.Sprintf("at most %d bytes", MaxDescription)})
		}
		if len(bad) > 0 {
			return invalidEndpoint(bad)
		}
		if _, err := visibleEndpoint(r.Context(), st, id); err != nil {
			return endpointAnswer(deps, w, id, nil, err)
		}
		e, err := st.UpdateEndpoint(r.Context(), id, store.EndpointChange{URL: req.URL, Description: req.Description,
			Enabled: req.Enabled, DisabledReason: ReasonDisabledByRequest}, deps.Now().UTC())
		if err == nil && req.Enabled != nil {
			deps.Log.Info("endpoint changed", "endpoint_id", id, "enabled", *req.Enabled)
		}
		// Enabling a disabled endpoint is an operational event, enabling
		// an enabled one is none (the store tells which, atomically).
		if err == nil && e.Reenabled && deps.Operate != nil {
			deps.Operate(notification.Operational{Type: notification.OpEndpointEnabled, Timestamp: deps.Now().UTC(),
				Data: notification.OpData{EndpointID: id, URL: e.URL, Tenant: e.Tenant, Reason: "enabled through the API"}})
		}
		return endpointAnswer(deps, w, id, e, err)
	})
}

func handleDeleteEndpoint(deps Deps) http.HandlerFunc {
	return deps.serve(func(w http.ResponseWriter, r *http.Request) error {
		st := deps.Endpoints
		if st == nil {
			return noEndpoints()
		}
		id := chi.URLParam(r, "id")
		if _, err := visibleEndpoint(r.Context(), st, id); err != nil {
			return endpointAnswer(deps, w, id, nil, err)
		}
		switch err := st.DeleteEndpoint(r.Context(), id); {
		case errors.Is(err, store.ErrNotFound):
			return endpointNotFound(id)
		case err != nil:
			return historyFailed(deps, err)
		default:
			deps.Log.Info("endpoint deleted", "endpoint_id", id)
			w.WriteHeader(http.StatusNoContent)
		}
		return nil
	})
}

func handleRotateSecret(deps Deps) http.HandlerFunc {
	return deps.serve(func(w http.ResponseWriter, r *http.Request) error {
		st := deps.Endpoints
		if st == nil {
			return noEndpoints()
		}
		id := chi.URLParam(r, "id")
		grace := deps.EndpointRules.Grace
		// The body is optional: without one, the configured grace period.
		if r.ContentLength != 0 {
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, deps.MaxBody))
			if err != nil {
				return decodeProblem(err, 0, "a rotation holds grace_seconds")
			}
			if len(bytes.TrimSpace(body)) > 0 {
				r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
				var req rotateRequest
				if p := decodeBody(deps, w, r, &req, "a rotation holds grace_seconds"); p != nil {
					return p
				}
				if req.GraceSeconds != nil {
					max := int64(MaxRotationGrace / time.Second)
					if *req.GraceSeconds < 0 || *req.GraceSeconds > max {
						return invalidEndpoint(notification.Invalid{{Field: "grace_seconds", Message: fmt.Sprintf("a whole number of seconds from 0 to %d", max)}})
					}
					grace = time.Duration(*req.GraceSeconds) * time.Second
				}
			}
		}
		if _, err := visibleEndpoint(r.Context(), st, id); err != nil {
			return endpointAnswer(deps, w, id, nil, err)
		}
		now := deps.Now().UTC()
		e, err := st.RotateEndpointSecret(r.Context(), id, store.Secret(webhooks.NewSecret()), grace, now)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return endpointNotFound(id)
		case err != nil:
			return historyFailed(deps, err)
		}
		deps.Log.Info("endpoint secret rotated", "endpoint_id", id, "grace", grace.String())
		v := endpointViewOf(e, now)
		v.Secret = e.Secret.Reveal()
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, v)
		return nil
	})
}

func handleEndpointAttempts(deps Deps) http.HandlerFunc {
	return deps.serve(func(w http.ResponseWriter, r *http.Request) error {
		q, bad := pageQuery(r, false)
		if len(bad) > 0 {
			return invalidQuery(bad)
		}
		st := deps.Endpoints
		if st == nil {
			return noEndpoints()
		}
		id := chi.URLParam(r, "id")
		if _, err := visibleEndpoint(r.Context(), st, id); err != nil {
			return endpointAnswer(deps, w, id, nil, err)
		}
		page, err := st.EndpointAttempts(r.Context(), id, store.AttemptQuery{Channel: channel.Webhook.Name(), Limit: q.Limit, Cursor: q.Cursor})
		switch {
		case errors.Is(err, store.ErrBadCursor):
			return invalidQuery(notification.Invalid{{Field: "cursor", Message: "not a cursor this API gave out"}})
		case err != nil:
			return historyFailed(deps, err)
		}
		out := endpointAttemptsView{Attempts: []endpointAttemptView{}, NextCursor: page.Next}
		for _, a := range page.Items {
			out.Attempts = append(out.Attempts, endpointAttemptView{NotificationID: a.NotificationID, Attempt: a.Attempt})
		}
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, out)
		return nil
	})
}

// requireEndpoints refuses, before the notification routes see it, a
// request with a notification whose webhook part names an endpoint that
// does not exist, is another tenant's, or is disabled: 422 naming webhook.endpoint (in a batch,
// notifications[i].webhook.endpoint, and the batch is refused whole). It
// reads the body as the route will, and lets the route answer everything
// else: a body the route refuses for another reason passes untouched.
func requireEndpoints(deps Deps, batch bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return deps.serve(func(w http.ResponseWriter, r *http.Request) error {
			if checkContentType(r.Header.Get("Content-Type")) != nil || r.ContentLength > deps.MaxBody {
				next.ServeHTTP(w, r)
				return nil
			}
			body, err := io.ReadAll(io.LimitReader(r.Body, deps.MaxBody+1))
			// The route reads the body as it was sent, whatever happens here.
			r.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
			// Every body is decoded here, not only one holding the bytes
			// "endpoint": the decoder matches keys ignoring case and reads
			// escapes, so "ENDPOINT" and "endp\u006fint" name an endpoint too.
			if err != nil || int64(len(body)) > deps.MaxBody {
				next.ServeHTTP(w, r)
				return nil
			}
			items := []json.RawMessage{body}
			if batch {
				if items, err = decodeBatch(bytes.NewReader(body), deps.MaxBatch); err != nil {
					next.ServeHTTP(w, r)
					return nil
				}
			}
			var bad notification.Invalid
			for i, raw := range items {
				n, err := deps.request.decodeRequest(bytes.NewReader(raw))
				if err != nil {
					continue
				}
				id := channel.WebhookEndpoint(n)
				if id == "" {
					continue
				}
				st := deps.Endpoints
				if st == nil {
					return newProblem(ProblemHistoryUnavailable, http.StatusServiceUnavailable, "History unavailable",
						"this API runs without a history store, where endpoints live: it cannot deliver to one")
				}
				field := channel.Webhook.Name() + ".endpoint"
				if batch {
					field = fmt.Sprintf("notifications[%d].%s", i, field)
				}
				// Another tenant's endpoint is refused as an unknown one.
				e, err := visibleEndpoint(r.Context(), st, id)
				switch {
				case errors.Is(err, store.ErrNotFound):
					bad = append(bad, notification.FieldError{Field: field, Message: fmt.Sprintf("no endpoint has the id %q", id)})
				case err != nil:
					return historyFailed(deps, err)
				case !e.Enabled:
					bad = append(bad, notification.FieldError{Field: field, Message: fmt.Sprintf("endpoint %s is disabled (%s): PATCH /v1/endpoints/%s {\"enabled\": true} re-enables it", id, e.DisabledReason, id)})
				}
			}
			if len(bad) > 0 {
				return invalidFields(bad)
			}
			next.ServeHTTP(w, r)
			return nil
		})
	}
}
