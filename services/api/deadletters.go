package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/services/internal/notification"
)

// DeadLetterStore lists and replays parked messages; retry.DeadLetters is
// one.
type DeadLetterStore interface {
	List(ctx context.Context, f retry.Filter, limit int) ([]retry.DeadLetter, error)
	Replay(ctx context.Context, f retry.Filter) (int, error)
}

// dialedDeadLetters runs each operation on a connection of its own.
type dialedDeadLetters struct {
	urls    []string
	topo    retry.Topology
	observe func(retry.Event) // told of every replay
}

func (d dialedDeadLetters) List(ctx context.Context, f retry.Filter, limit int) ([]retry.DeadLetter, error) {
	conn, err := retry.DialAny(d.urls, "relay api dead letters")
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return retry.DeadLetters{Conn: conn, Topology: d.topo}.List(ctx, f, limit)
}

func (d dialedDeadLetters) Replay(ctx context.Context, f retry.Filter) (int, error) {
	conn, err := retry.DialAny(d.urls, "relay api dead letters")
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	return retry.DeadLetters{Conn: conn, Topology: d.topo, Observe: d.observe}.Replay(ctx, f)
}

// maxDeadLetterList bounds one listing.
const maxDeadLetterList = 1000

// deadLetterStore returns the store of the moment, or answers 503.
func deadLetterStore(deps Deps, w http.ResponseWriter) DeadLetterStore {
	var s DeadLetterStore
	if deps.DeadLetters != nil {
		s = deps.DeadLetters()
	}
	if s == nil {
		writeProblem(w, unavailable("the broker is not connected; try again shortly"))
	}
	return s
}

// sourceQueue turns the queue a client names (without the topology
// prefix) into the value of x-dead-source.
func sourceQueue(t retry.Topology, q string) string {
	if q == "" {
		return ""
	}
	return t.Name(strings.TrimPrefix(q, t.Prefix))
}

func handleListDeadLetters(deps Deps) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		limit := 50
		if v := q.Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > maxDeadLetterList {
				writeProblem(w, invalidFields(notification.Invalid{{Field: "limit", Message: "a whole number from 1 to " + strconv.Itoa(maxDeadLetterList)}}))
				return
			}
			limit = n
		}
		store := deadLetterStore(deps, w)
		if store == nil {
			return
		}
		list, err := store.List(r.Context(), retry.Filter{ID: q.Get("id"), Source: sourceQueue(deps.Topology, q.Get("source"))}, limit)
		if err != nil {
			deps.Log.Error("list dead letters", "error", err)
			writeProblem(w, unavailable("the dead-letter queue could not be read: "+err.Error()))
			return
		}
		if list == nil {
			list = []retry.DeadLetter{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"dead_letters": list})
	}
}

func handleReplayDeadLetter(deps Deps) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := chi.URLParam(r, "id")
		replay(deps, w, r, retry.Filter{ID: id}, true)
	}
}

// replayRequest is the body of POST /v1/dead-letters/replay.
type replayRequest struct {
	Source string `json:"source"`
	ID     string `json:"id"`
	All    bool   `json:"all"`
}

func handleReplayDeadLetters(deps Deps) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req replayRequest
		dec := json.NewDecoder(io.LimitReader(r.Body, 4096))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil && !errors.Is(err, io.EOF) {
			writeProblem(w, malformed("the body must be a JSON object such as {\"source\": \"email-queue\"} or {\"all\": true}: "+err.Error()))
			return
		}
		if !req.All && req.Source == "" && req.ID == "" {
			writeProblem(w, invalidFields(notification.Invalid{{Field: "source", Message: "name a source queue or an id, or set all to true"}}))
			return
		}
		replay(deps, w, r, retry.Filter{ID: req.ID, Source: sourceQueue(deps.Topology, req.Source)}, false)
	}
}

func replay(deps Deps, w http.ResponseWriter, r *http.Request, f retry.Filter, one bool) {
	store := deadLetterStore(deps, w)
	if store == nil {
		return
	}
	n, err := store.Replay(r.Context(), f)
	if errors.Is(err, retry.ErrNotDestination) {
		// A parked message that names a queue relay does not deliver to
		// stays parked: the client learns which, and that nothing moved.
		deps.Log.Warn("replay refused", "replayed", n, "error", err)
		p := newProblem(ProblemNotDestination, http.StatusConflict, "Not one of relay's work queues",
			"replayed "+strconv.Itoa(n)+"; these stay parked: "+err.Error())
		p.Replayed = &n
		writeProblem(w, p)
		return
	}
	if err != nil {
		deps.Log.Error("replay dead letters", "replayed", n, "error", err)
		writeProblem(w, unavailable("replayed "+strconv.Itoa(n)+" before an error: "+err.Error()))
		return
	}
	if one && n == 0 {
		writeProblem(w, newProblem(ProblemNotFound, http.StatusNotFound, "Not found", "no parked message has the id "+strconv.Quote(f.ID)))
		return
	}
	deps.Log.Info("replayed dead letters", "replayed", n, "id", f.ID, "source", f.Source)
	writeJSON(w, http.StatusOK, map[string]int{"replayed": n})
}
