// Package dashboard is relay's live page: every notification's attempts,
// waits, deliveries and parkings drawn as they happen, with the depth of
// each queue. The page is plain HTML, CSS and JavaScript embedded in the
// binary, so it needs no build step and works offline.
//
// The API serves it at "/"; the page reads the pipeline's events as
// Server-Sent Events from /dashboard/events and queue depths from
// /dashboard/queues.
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

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/services/events"
)

//go:embed static
var static embed.FS

// pingInterval is how often an idle event stream gets a comment, so
// proxies and the browser keep the connection open.
const pingInterval = 15 * time.Second

// queuesTimeout bounds one look-up of the queue depths.
const queuesTimeout = 3 * time.Second

// Deps is what the dashboard needs.
type Deps struct {
	// Hub supplies the events; nil makes /dashboard/events answer 503.
	Hub *Hub
	// Queues returns the ready-message depth of each queue, by name; nil
	// makes /dashboard/queues list none. See QueueDepths.
	Queues func(ctx context.Context) (map[string]int, error)
	// Log receives errors; nil discards.
	Log *slog.Logger
}

type server struct {
	Deps
	ping time.Duration
}

// New returns the dashboard's handler:
//
//   - GET /: the page;
//   - GET /static/...: its script and style sheet;
//   - GET /dashboard/events: Server-Sent Events, the recent events then
//     live ones, each as "event: attempt" with the JSON of an
//     events.Event as data, and a ": ping" comment every 15s;
//   - GET /dashboard/queues: {"queues": {"email-queue": 3, ...}}, or a
//     503 with {"error": "..."} when the depths cannot be read.
func New(d Deps) http.Handler {
	return newServer(d, pingInterval)
}

func newServer(d Deps, ping time.Duration) http.Handler {
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	s := &server{Deps: d, ping: ping}
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded directory is part of the binary
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeFileFS(w, r, files, "index.html")
	})
	mux.Handle("GET /static/", noCache(http.StripPrefix("/static/", http.FileServerFS(files))))
	mux.HandleFunc("GET /dashboard/events", s.events)
	mux.HandleFunc("GET /dashboard/queues", s.queues)
	return mux
}

// noCache makes browsers revalidate the page's files, so a new binary's
// page is never mixed with an old script.
func noCache(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		h.ServeHTTP(w, r)
	})
}

func (s *server) events(w http.ResponseWriter, r *http.Request) {
	if s.Hub == nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "no event source"})
		return
	}
	rc := http.NewResponseController(w)
	// An event stream outlives any write timeout the server has.
	if err := rc.SetWriteDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.Log.Warn("clear write deadline for event stream", "error", err)
	}
	ch, recent, cancel := s.Hub.Subscribe()
	defer cancel()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // no proxy buffering
	w.WriteHeader(http.StatusOK)
	// The browser reconnects by itself after a lost stream; 2s between
	// tries keeps it prompt without hammering a restarting API.
	if _, err := fmt.Fprint(w, "retry: 2000\n\n"); err != nil {
		return
	}
	for _, ev := range recent {
		if err := writeEvent(w, ev); err != nil {
			return
		}
	}
	if err := rc.Flush(); err != nil {
		return
	}
	ping := time.NewTicker(s.ping)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case ev, ok := <-ch:
			if !ok {
				return
			}
			if err := writeEvent(w, ev); err != nil {
				return
			}
			// Send what else is waiting in the same flush.
			for more := true; more; {
				select {
				case ev, ok := <-ch:
					if !ok {
						return
					}
					if err := writeEvent(w, ev); err != nil {
						return
					}
				default:
					more = false
				}
			}
		case <-ping.C:
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil {
				return
			}
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

// writeEvent writes ev as one Server-Sent Event. JSON has no raw newlines,
// so the data fits one data line.
func writeEvent(w http.ResponseWriter, ev events.Event) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", events.TypeAttempt, b)
	return err
}

func (s *server) queues(w http.ResponseWriter, r *http.Request) {
	depths := map[string]int{}
	if s.Queues != nil {
		ctx, cancel := context.WithTimeout(r.Context(), queuesTimeout)
		defer cancel()
		d, err := s.Queues(ctx)
		if err != nil {
			s.Log.Warn("read queue depths", "error", err)
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "queue depths unavailable: " + err.Error()})
			return
		}
		if d != nil {
			depths = d
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]any{"queues": depths})
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
