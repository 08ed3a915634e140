package api

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/dashboard"
	"github.com/relay-demo/relay/internal/events"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/tracing"
	"github.com/relay-demo/relay/retry"
)

// DefaultMaxBody is the body limit when Deps.MaxBody is zero: 1 MiB.
const DefaultMaxBody = 1 << 20

// DefaultPublishTimeout bounds a request's publishes when
// Deps.PublishTimeout is zero.
const DefaultPublishTimeout = 10 * time.Second

// Publisher publishes a notification's messages with publisher confirms,
// all of them at once; *retry.Publisher and *retry.Publishers are ones.
type Publisher interface {
	// PublishAll publishes msgs, all at once, and waits for every
	// confirm: errs[i] is msgs[i]'s outcome, nil once the broker has it.
	PublishAll(ctx context.Context, msgs []retry.Outgoing) (errs []error)
	// User is the broker user it publishes as: the history takes accepted
	// records only from relay's own user.
	User() string
}

// Routes is a set of routes that registers itself on a router;
// *dashboard.Dashboard is one.
type Routes interface {
	Routes(r chi.Router)
}

// Deps is everything the API's handlers use. The zero value of each
// optional field gets a working default from NewServer.
type Deps struct {
	// Log receives the API's JSON log; nil discards it.
	Log *slog.Logger
	// Publisher returns the current publisher, or nil while the broker is
	// disconnected (the API then answers 503).
	Publisher func() Publisher
	// Topology names the ingress exchange notifications go to.
	Topology retry.Topology
	// Channels are the channels the API accepts, checks and publishes
	// to; Topology holds their routes. The zero Set means
	// channel.Builtin().
	Channels channel.Set
	// Tokens are the bearer tokens accepted on /v1/: the default
	// tenant's.
	Tokens []string
	// TenantTokens are the bearer tokens of named tenants: each sees only
	// its tenant's notifications, endpoints and dead letters.
	TenantTokens []TenantToken
	// OperatorTokens are the bearer tokens that see every tenant's.
	OperatorTokens []string
	// AuthOff serves /v1/ without authentication.
	AuthOff bool
	// DashboardPublic lets a request without a token read the
	// notifications (GET /v1/notifications and /v1/notifications/{id}),
	// redacted, as a public dashboard's visitor (DASHBOARD_PUBLIC); every
	// other /v1/ route still refuses it.
	DashboardPublic bool
	// MaxBody bounds a request body in bytes; zero means DefaultMaxBody.
	MaxBody int64
	// PublishTimeout bounds the confirmed publishes of one request; zero
	// means DefaultPublishTimeout.
	PublishTimeout time.Duration
	// Registry receives the API's metrics and is what /metrics serves;
	// nil means a registry of the server's own.
	Registry *prometheus.Registry
	// Ready reports why the API cannot take notifications, or nil when it
	// can. nil means ready whenever Publisher returns one.
	Ready func() error
	// DeadLetters returns the dead-letter store of the moment, or nil while
	// the broker is disconnected; nil means the dead-letter routes answer
	// 503.
	DeadLetters func() DeadLetterStore
	// DeadLetterJobs runs the dead-letter jobs; nil answers their routes
	// 503.
	DeadLetterJobs *DeadLetterJobs
	// Dashboard, when set, registers its routes on the API's router
	// ("/", /static/ and /dashboard/; see dashboard.New). It checks
	// tokens itself (see dashboardAccess): its page needs none, its data
	// does unless DASHBOARD_PUBLIC. The page reads the notifications from
	// /v1/ (see DashboardPublic).
	Dashboard Routes
	// DashboardLinks issues the codes of the dashboard's one-time links
	// (POST /v1/dashboard/links), which the dashboard redeems: the same
	// *dashboard.Links as its Deps.Links. nil answers the route 404.
	DashboardLinks DashboardLinks
	// History is the notification history: the status routes read it and
	// Idempotency-Keys are claimed in it. nil answers the status routes
	// with 503 and keeps the older behaviour for keys (the id is derived
	// from the key, and a repeat publishes again).
	History HistoryStore
	// Endpoints is where the webhook endpoints live: the endpoint routes
	// read and write them there, and a notification that names one is
	// checked against it. nil answers both with 503.
	Endpoints EndpointStore
	// Operate publishes an operational event (an endpoint enabled
	// again); nil publishes none.
	Operate func(notification.Operational)
	// EndpointRules are what the endpoint routes check besides the store.
	// The zero value rotates secrets without a grace period and allows
	// endpoints on the public internet only; see NewEndpointRules.
	EndpointRules EndpointRules
	// IdempotencyTTL is how long an Idempotency-Key is remembered; zero
	// means DefaultIdempotencyTTL.
	IdempotencyTTL time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// NewID makes the id of a notification sent without an
	// Idempotency-Key; nil means NewID.
	NewID func() string
	// MaxBatch is the most notifications POST /v1/notifications/batch
	// takes at once; zero means DefaultMaxBatch.
	MaxBatch int
	// RateLimit is how many copies a second each token may make through
	// /v1/ (each client address while AuthOff): a request that sends
	// notifications costs a token per copy, any other request one. Zero
	// means no limit.
	RateLimit float64
	// RateBurst is how many copies over the rate a token may make at
	// once, and so the most one request may make; zero means
	// DefaultBurst(RateLimit).
	RateBurst int
	// TenantRateLimit is how many copies a second each tenant may make
	// through /v1/, all its tokens together (an operator's, and every
	// request while AuthOff, count as the default tenant's); only the
	// requests that make copies pay, one token a copy. Zero means no
	// limit. A request spends from its token's bucket and its tenant's,
	// or, refused by either, from neither.
	TenantRateLimit float64
	// TenantRateBurst is how many copies over the rate a tenant may make
	// at once, and so the most one request may make; zero means
	// DefaultBurst(TenantRateLimit).
	TenantRateBurst int
	// AuthFailureRate is how many missing or wrong bearer tokens each
	// client address may send a second, to /v1/ and the dashboard
	// together; zero means DefaultAuthFailureRate. Failures are always
	// limited: over the limit, an address's requests with a token get 429
	// before the token is looked at.
	AuthFailureRate float64
	// AuthFailureBurst is how many failures over the rate an address may
	// send at once; zero means DefaultAuthFailureBurst.
	AuthFailureBurst int
	// LimiterKeys bounds the tokens and addresses the rate limits follow;
	// zero means DefaultLimiterKeys.
	LimiterKeys int
	// TracerProvider, when set, traces every request but the probes and
	// /metrics, as a server span that continues the request's W3C
	// traceparent, and every channel copy the API publishes, as a
	// producer span whose context the message carries in its headers, so
	// each attempt at the copy continues the trace. nil traces nothing.
	TracerProvider trace.TracerProvider

	request      request      // decodes a notification of Channels
	events       string       // the events exchange, for the accepted records
	perClient    *limiter     // the rate of each token (or address), nil for none
	perTenant    *limiter     // the rate of each tenant's copies, nil for none
	authFailures *limiter     // the rate of each address's failed authentications, never nil
	tracer       trace.Tracer // nil: nothing is traced
}

// NewServer builds the API's handler: every route of routes.go behind the
// security-header, tracing (with a TracerProvider), metrics and
// panic-recovery middleware.
func NewServer(deps Deps) http.Handler {
	deps = deps.withDefaults()
	m := newMetrics(deps.Registry, deps.Channels)
	r := chi.NewRouter()
	r.Use(securityHeaders)
	if deps.tracer != nil {
		r.Use(traceRequests(deps.tracer))
	}
	r.Use(m.middleware, recoverer(deps.Log))
	routes(r, deps, m)
	return r
}

// untraced reports whether no span is made for a path: the probes and the
// scrapes that come every few seconds and say nothing about a
// notification.
func untraced(path string) bool {
	switch path {
	case "/healthz", "/readyz", "/metrics":
		return true
	}
	return false
}

// traceRequests makes each request a server span, the child of the
// request's traceparent if it has one (the caller's trace goes on) and
// the root of a new trace otherwise, named by its chi route pattern.
func traceRequests(tracer trace.Tracer) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if untraced(r.URL.Path) {
				next.ServeHTTP(w, r)
				return
			}
			method := methodLabel(r.Method)
			scheme := "http"
			if r.TLS != nil {
				scheme = "https"
			}
			// The query is left out: q= searches recipients.
			ctx, span := tracer.Start(tracing.ExtractHTTP(r.Context(), propagation.HeaderCarrier(r.Header)), method,
				trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(semconv.HTTPRequestMethodKey.String(method), semconv.URLPath(r.URL.Path), semconv.URLScheme(scheme)))
			defer span.End()
			ww, ok := w.(middleware.WrapResponseWriter)
			if !ok {
				ww = middleware.NewWrapResponseWriter(w, r.ProtoMajor)
			}
			next.ServeHTTP(ww, r.WithContext(ctx))
			status := ww.Status()
			if status == 0 {
				status = http.StatusOK
			}
			if rctx := chi.RouteContext(ctx); rctx != nil && rctx.RoutePattern() != "" {
				span.SetName(method + " " + rctx.RoutePattern())
				span.SetAttributes(semconv.HTTPRoute(rctx.RoutePattern()))
			}
			span.SetAttributes(semconv.HTTPResponseStatusCode(status))
			// A 4xx is the client's error, not the server's.
			if status >= 500 {
				span.SetStatus(codes.Error, http.StatusText(status))
			}
		})
	}
}

// ContentSecurityPolicy is the Content-Security-Policy of every answer:
// the dashboard's page loads its script, style sheet and data from this
// origin only, runs no inline script or style, and cannot be framed.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// securityHeaders sets the security headers on every answer, before any
// handler runs, so errors and panics carry them too.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

// dashboardAccess returns the dashboard's check of a request's bearer
// token against creds, made as requireToken makes it: hashed, compared in
// constant time with every token. A token it accepts makes a viewer of
// its tenant, or an operator, who sees every tenant's; a request without
// one is the default tenant's visitor. With authOff, every request is an
// authenticated operator, as every /v1/ request is (see principalOf).
func dashboardAccess(creds []credential, authOff bool) func(*http.Request) dashboard.Viewer {
	match := matcher(creds)
	return func(r *http.Request) dashboard.Viewer {
		if authOff {
			return dashboard.Viewer{Access: dashboard.Authenticated, Operator: true}
		}
		if r.Header.Get("Authorization") == "" {
			return dashboard.Viewer{Access: dashboard.Anonymous}
		}
		token, ok := bearer(r.Header.Get("Authorization"))
		if !ok {
			return dashboard.Viewer{Access: dashboard.Refused}
		}
		p, ok := match(token)
		if !ok {
			return dashboard.Viewer{Access: dashboard.Refused}
		}
		return dashboard.Viewer{Access: dashboard.Authenticated, Tenant: p.tenant, Operator: p.operator}
	}
}

func (d Deps) withDefaults() Deps {
	if d.Log == nil {
		d.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if d.Channels.Len() == 0 {
		d.Channels = channel.Builtin()
	}
	d.request = newRequest(d.Channels)
	if d.Publisher == nil {
		d.Publisher = func() Publisher { return nil }
	}
	if d.MaxBody <= 0 {
		d.MaxBody = DefaultMaxBody
	}
	if d.PublishTimeout <= 0 {
		d.PublishTimeout = DefaultPublishTimeout
	}
	if d.Registry == nil {
		d.Registry = prometheus.NewRegistry()
	}
	if d.Ready == nil {
		publisher := d.Publisher
		d.Ready = func() error {
			if publisher() == nil {
				return errNotConnected
			}
			return nil
		}
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.NewID == nil {
		d.NewID = NewID
	}
	if d.IdempotencyTTL <= 0 {
		d.IdempotencyTTL = DefaultIdempotencyTTL
	}
	if d.MaxBatch <= 0 {
		d.MaxBatch = DefaultMaxBatch
	}
	if d.LimiterKeys <= 0 {
		d.LimiterKeys = DefaultLimiterKeys
	}
	if d.RateLimit > 0 {
		if d.RateBurst <= 0 {
			d.RateBurst = DefaultBurst(d.RateLimit)
		}
		d.perClient = newLimiter(d.RateLimit, d.RateBurst, d.LimiterKeys)
	}
	if d.TenantRateLimit > 0 {
		if d.TenantRateBurst <= 0 {
			d.TenantRateBurst = DefaultBurst(d.TenantRateLimit)
		}
		d.perTenant = newLimiter(d.TenantRateLimit, d.TenantRateBurst, d.LimiterKeys)
	}
	if d.AuthFailureRate <= 0 {
		d.AuthFailureRate = DefaultAuthFailureRate
	}
	if d.AuthFailureBurst <= 0 {
		d.AuthFailureBurst = DefaultAuthFailureBurst
	}
	d.authFailures = newLimiter(d.AuthFailureRate, d.AuthFailureBurst, d.LimiterKeys)
	d.events = events.ExchangeName(d.Topology)
	if d.TracerProvider != nil {
		d.tracer = d.TracerProvider.Tracer("github.com/relay-demo/relay/services/api")
	}
	return d
}

// IDPrefix starts every notification id.
const IDPrefix = "ntf_"

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// orderedEncoding is base32 with the alphabet of idEncoding's lowercase
// output (a-z, 2-7) put in byte order: an id written with it sorts as the
// bits it holds, and keeps the form clients know.
var orderedEncoding = base32.NewEncoding("234567abcdefghijklmnopqrstuvwxyz").WithPadding(base32.NoPadding)

// NewID returns a new notification id: IDPrefix and 26 lowercase base32
// characters holding 128 bits, the milliseconds since the Unix epoch in
// the first 48 and 80 random bits after them. Ids made later sort later,
// so a store's indexes take new notifications at their end, a few pages
// a batch, where random ids would land on pages all over them; 80 random
// bits keep ids of the same millisecond apart and unguessable.
func NewID() string { return NewIDAt(time.Now(), nil) }

// NewIDAt returns the id NewID would make at t, with entropy as its 80
// random bits when it holds 10 bytes (a reproducible id), else random
// ones.
func NewIDAt(t time.Time, entropy []byte) string {
	var b [16]byte
	ms := uint64(max(t.UnixMilli(), 0))
	b[0], b[1], b[2], b[3], b[4], b[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	if len(entropy) == 10 {
		copy(b[6:], entropy)
	} else {
		_, _ = rand.Read(b[6:]) // crypto/rand.Read never fails
	}
	return IDPrefix + orderedEncoding.EncodeToString(b[:])
}
