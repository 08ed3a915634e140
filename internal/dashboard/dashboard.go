// Package dashboard is relay's page: every notification from the history,
// searched by id or recipient, filtered by status and channel, a page at
// a time; each copy's attempts with their full error texts, and a replay
// button on parked copies; live updates as the pipeline decides; the
// depth of each queue; the pipeline drawn from its declared topology, with
// each box's depth and each arrow's rate (Pipeline); each copy's attempts
// on a time axis; and, with a token, each webhook endpoint's circuit,
// read from the API's GET /v1/endpoints, and each mail server's and SMS
// gateway's circuit and limit, from GET /v1/providers, and the dead
// letters a filter selects, counted, listed, and replayed or purged as a
// job. The page is plain HTML, CSS and JavaScript embedded in the binary,
// so it needs no build step and works offline.
//
// The API serves it at "/". The page asks for one of the API's tokens,
// keeps it in the browser tab's session storage and sends it as a bearer
// token on every request. The dashboard's own routes serve the live
// events, the queue depths and the pipeline; the page reads the history
// from the API's /v1/notifications (the list with attempts=true for each
// row's time axis), and replays, counts, lists and runs bulk jobs through
// its /v1/dead-letters routes. A public dashboard (DASHBOARD_PUBLIC=true)
// shows visitors without a token the list, the details and the live
// events, but never the dead-letters panel, an error text, a payload, a
// message's headers or what a webhook URL holds after its host
// (notification.PublicRecipient): the API redacts what it answers them.
package dashboard

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/problem"
	"github.com/relay-demo/relay/retry"
)

//go:embed static
var static embed.FS

// The caps on event streams when Deps leaves them at zero.
const (
	// DefaultMaxStreams caps the event streams open at once.
	DefaultMaxStreams = 2000
	// DefaultMaxStreamsPerClient caps the event streams open at once from
	// one client address.
	DefaultMaxStreamsPerClient = 20
)

// pingInterval is how often an idle event stream gets a comment, so
// proxies and the browser keep the connection open.
const pingInterval = 15 * time.Second

// writeTimeout bounds each write to an event stream: a client that does
// not take an event within it is dropped.
const writeTimeout = 10 * time.Second

// queuesTimeout bounds one look-up of the queue depths.
const queuesTimeout = 3 * time.Second

// Deps is what the dashboard needs.
type Deps struct {
	// Hub supplies the live events; nil makes /dashboard/events answer
	// 503.
	Hub *Hub
	// Queues returns the ready-message depth of each queue, by name; nil
	// makes /dashboard/queues list none. See QueueDepths.
	Queues func(ctx context.Context) (map[string]int, error)
	// Pipeline is the picture of the pipeline's topology and traffic;
	// nil makes /dashboard/pipeline answer 503.
	Pipeline *Pipeline
	// Authenticate says what a request's bearer token allows and whose
	// notifications it sees; nil treats every request as Anonymous.
	Authenticate func(*http.Request) Viewer
	// Public lets Anonymous requests read the dashboard without error
	// texts, payloads and headers (DASHBOARD_PUBLIC).
	Public bool
	// Links are the one-time links the page logs in by (relay
	// dashboard); nil makes POST /dashboard/link answer 404.
	Links *Links
	// MaxStreams caps the event streams open at once; zero means
	// DefaultMaxStreams.
	MaxStreams int
	// MaxStreamsPerClient caps the event streams open at once from one
	// client address (peer.Addr: an IPv6 address with its /64); zero
	// means DefaultMaxStreamsPerClient.
	MaxStreamsPerClient int
	// Log receives errors; nil discards.
	Log *slog.Logger
}

// timing holds the stream's intervals, shortened by tests.
type timing struct {
	ping, write time.Duration
}

type server struct {
	Deps
	timing
	streams *limiter
	router  chi.Router
}

// Dashboard is the dashboard's routes: a handler of their own, or mounted
// on a larger router (see Routes).
type Dashboard struct {
	s *server
}

// New returns the dashboard. The page and its files need no
// token; every other route answers 401 without a valid one, unless the
// dashboard is public, where a request without a token gets the same
// answers with error texts, payloads and headers left out:
//
//   - GET /: the page; GET /static/...: its script and style sheet;
//   - GET /dashboard/session: {"public": bool, "authenticated": bool},
//     what the page shows (a 401 for a token the API does not accept);
//   - GET /dashboard/events: Server-Sent Events, each "event: attempt"
//     with the JSON of a Streamed as data (a notification.Event with the
//     status it leads its copy to and its rank), from the moment the
//     stream opens, of the notifications of the viewer's tenant (every
//     tenant's for an operator, the default tenant's for a public
//     dashboard's visitor), and a ": ping" comment every 15s; a 429
//     beyond the caps;
//   - GET /dashboard/queues: {"queues": {"email-queue": 3, ...}}, or a
//     503 problem when the depths cannot be read; with the
//     Pipeline, also "backlog_seconds" by work queue and, with a token,
//     "endpoint_backlog_seconds" by endpoint id, of the endpoints the
//     viewer's tenant's copies went to (see Pipeline.Backlog);
//   - GET /dashboard/pipeline: the topology as boxes and arrows, with
//     each box's depth and each arrow's rate over the last seconds (see
//     Pipeline);
//   - POST /dashboard/link: {"code": "…"}, a one-time link's code (see
//     Links), answered once with {"token": "…"}; a 401 for a code
//     unknown, used or expired. It needs no token.
func New(d Deps) *Dashboard {
	return &Dashboard{s: newServer(d, timing{ping: pingInterval, write: writeTimeout})}
}

// ServeHTTP serves the dashboard's routes, and a 404 for any other path.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.s.ServeHTTP(w, r)
}

// Routes registers the dashboard's routes on r, which serves them
// alongside its own: the API mounts them this way.
func (d *Dashboard) Routes(r chi.Router) {
	d.s.routes(r)
}

func newServer(d Deps, t timing) *server {
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Authenticate == nil {
		d.Authenticate = func(*http.Request) Viewer { return Viewer{Access: Anonymous} }
	}
	if d.MaxStreams <= 0 {
		d.MaxStreams = DefaultMaxStreams
	}
	if d.MaxStreamsPerClient <= 0 {
		d.MaxStreamsPerClient = DefaultMaxStreamsPerClient
	}
	s := &server{Deps: d, timing: t, streams: newLimiter(d.MaxStreams, d.MaxStreamsPerClient)}
	s.router = chi.NewRouter()
	s.routes(s.router)
	return s
}

// ServeHTTP routes a request to the page, its files or a data route.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.router.ServeHTTP(w, r)
}

// routes registers every route of the dashboard on r, for GET and HEAD.
func (s *server) routes(r chi.Router) {
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded directory is part of the binary
	}
	get := func(pattern string, h http.HandlerFunc) {
		r.Get(pattern, h)
		r.Head(pattern, h)
	}
	get("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeFileFS(w, r, files, "index.html")
	})
	get("/static/*", noCache(http.StripPrefix("/static/", http.FileServerFS(files))).ServeHTTP)
	get("/dashboard/session", s.handle(s.session))
	get("/dashboard/events", s.handle(s.events))
	get("/dashboard/queues", s.handle(s.queues))
	get("/dashboard/pipeline", s.handle(s.pipeline))
	r.Post("/dashboard/link", s.handle(s.redeem))
}

// noCache makes browsers revalidate the page's files, so a new binary's
// page is never mixed with an old script.
func noCache(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		h.ServeHTTP(w, r)
	})
}

// session tells the page whether it may show data without a token, and
// whether the token it sent is good.
func (s *server) session(w http.ResponseWriter, r *http.Request) error {
	access := s.Authenticate(r).Access
	if access == Refused {
		_, refusal := s.allow(r)
		return refusal
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]bool{"public": s.Public, "authenticated": access == Authenticated})
	return nil
}

func (s *server) queues(w http.ResponseWriter, r *http.Request) error {
	v, refusal := s.allow(r)
	if refusal != nil {
		return refusal
	}
	full := v.full()
	w.Header().Set("Cache-Control", "no-store")
	depths := map[string]int{}
	if s.Queues != nil {
		ctx, cancel := context.WithTimeout(r.Context(), queuesTimeout)
		defer cancel()
		d, err := s.Queues(ctx)
		if err != nil {
			s.Log.Warn("read queue depths", "error", err)
			msg := "queue depths unavailable"
			if full {
				msg += ": " + err.Error()
			}
			return &problem.Problem{Type: problem.Base + "queue-depths-unavailable", Title: "Queue depths unavailable",
				Status: http.StatusServiceUnavailable, Detail: msg}
		}
		if d != nil {
			depths = d
		}
	}
	out := map[string]any{"queues": depths}
	if s.Pipeline != nil {
		queues, endpoints := s.Pipeline.Backlog(v.Sees)
		out["backlog_seconds"] = queues
		if full {
			// Endpoint ids are for those who may list the endpoints;
			// a tenant's viewer gets the figures of its tenant's copies.
			out["endpoint_backlog_seconds"] = endpoints
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// QueueDepths returns a Queues function that reads, on conn, the number of
// ready messages in every queue of t (work, error, requeue, wait and
// dead-letter queues), keyed by name without t's prefix. A queue that does
// not exist is left out. Each look-up uses a channel of its own, since the
// broker closes the channel of a failed passive declare.
func QueueDepths(conn *amqp.Connection, t retry.Topology) func(ctx context.Context) (map[string]int, error) {
	return func(ctx context.Context) (map[string]int, error) {
		out := map[string]int{}
		for _, q := range t.Plan().Queues {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			n, found, err := depth(conn, q.Name)
			if err != nil {
				return nil, err
			}
			if found {
				out[strings.TrimPrefix(q.Name, t.Prefix)] = n
			}
		}
		return out, nil
	}
}

func depth(conn *amqp.Connection, name string) (n int, found bool, err error) {
	ch, err := conn.Channel()
	if err != nil {
		return 0, false, fmt.Errorf("open channel: %w", err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(name,
		true,  // durable
		false, // autoDelete
		false, // exclusive
		false, // noWait
		nil)
	var aerr *amqp.Error
	switch {
	case errors.As(err, &aerr) && aerr.Code == amqp.NotFound:
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("inspect queue %q: %w", name, err)
	}
	return q.Messages, true, nil
}
