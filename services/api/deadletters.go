package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/query"
	"github.com/relay-demo/relay/retry"
)

// DeadLetterStore lists, shows, replays and purges parked messages;
// retry.DeadLetters is one. Get, Replay and Purge answer
// retry.ErrNotParked for an id that matches nothing.
type DeadLetterStore interface {
	List(ctx context.Context, f retry.Filter, limit int) ([]retry.DeadLetter, error)
	Get(ctx context.Context, f retry.Filter) ([]retry.DeadLetter, error)
	Replay(ctx context.Context, f retry.Filter) (int, error)
	Purge(ctx context.Context, f retry.Filter) (int, error)
	// Count is a dry run: how many parked messages f selects.
	Count(ctx context.Context, f retry.Filter) (int, error)
}

// dialedDeadLetters runs each operation on a connection of its own.
type dialedDeadLetters struct {
	urls    []string
	topo    retry.Topology
	observe func(retry.Event) // told of every replay
}

// open dials the broker for one operation; done ends the connection.
func (d dialedDeadLetters) open() (dl retry.DeadLetters, done func(), err error) {
	conn, err := retry.DialAny(d.urls, "relay api dead letters")
	if err != nil {
		return retry.DeadLetters{}, nil, err
	}
	return retry.DeadLetters{Conn: conn, Topology: d.topo, Observe: d.observe}, func() { conn.Close() }, nil
}

func (d dialedDeadLetters) List(ctx context.Context, f retry.Filter, limit int) ([]retry.DeadLetter, error) {
	dl, done, err := d.open()
	if err != nil {
		return nil, err
	}
	defer done()
	return dl.List(ctx, f, limit)
}

func (d dialedDeadLetters) Get(ctx context.Context, f retry.Filter) ([]retry.DeadLetter, error) {
	dl, done, err := d.open()
	if err != nil {
		return nil, err
	}
	defer done()
	return dl.Get(ctx, f)
}

func (d dialedDeadLetters) Replay(ctx context.Context, f retry.Filter) (int, error) {
	dl, done, err := d.open()
	if err != nil {
		return 0, err
	}
	defer done()
	return dl.Replay(ctx, f)
}

func (d dialedDeadLetters) Count(ctx context.Context, f retry.Filter) (int, error) {
	dl, done, err := d.open()
	if err != nil {
		return 0, err
	}
	defer done()
	return dl.Count(ctx, f)
}

func (d dialedDeadLetters) Purge(ctx context.Context, f retry.Filter) (int, error) {
	dl, done, err := d.open()
	if err != nil {
		return 0, err
	}
	defer done()
	return dl.Purge(ctx, f)
}

// DefaultDeadLetterLimit is how many parked messages a listing shows when
// it names no limit; `relay dead list` shows as many. A limit of 0 shows
// every one, on both.
const DefaultDeadLetterLimit = notification.DeadLetterLimit

// deadLetterStore returns the store of the moment, or the 503 that
// answers without one.
func deadLetterStore(deps Deps) (DeadLetterStore, *Problem) {
	var s DeadLetterStore
	if deps.DeadLetters != nil {
		s = deps.DeadLetters()
	}
	if s == nil {
		return nil, unavailable("the broker is not connected; try again shortly")
	}
	return s, nil
}

// sourceQueue turns the queue a client names (without the topology
// prefix) into the value of x-dead-source.
func sourceQueue(t retry.Topology, q string) string {
	if q == "" {
		return ""
	}
	return t.Name(strings.TrimPrefix(q, t.Prefix))
}

// deadLetterQuery reads the query parameters of a dead-letter route, which
// takes those in allowed (of limit and the fields of a selection), naming
// each bad one. The filter it returns holds the caller's tenant scope.
// Without a limit parameter, limit is DefaultDeadLetterLimit.
func deadLetterQuery(r *http.Request, t retry.Topology, allowed ...string) (f retry.Filter, limit int, bad notification.Invalid) {
	v, err := query.Values(r)
	if err != nil {
		bad = append(bad, notification.FieldError{Field: query.Field, Message: err.Error()})
	}
	names := make([]string, 0, len(v))
	for name := range v {
		names = append(names, name)
	}
	slices.Sort(names) // the errors in a stable order
	for _, name := range names {
		switch {
		case !slices.Contains(allowed, name):
			bad = append(bad, notification.FieldError{Field: name, Message: "unknown parameter: this route takes " + orList(allowed)})
		case len(v[name]) > 1:
			bad = append(bad, notification.FieldError{Field: name, Message: "given " + strconv.Itoa(len(v[name])) + " times: give it once"})
		}
	}
	sel := selectionFromQuery(v.Get)
	if !slices.Contains(allowed, "tenant") {
		sel.Tenant = "" // refused above as a parameter the route does not take
	}
	f, invalid := sel.filter(t)
	bad = append(bad, invalid...)
	// Every route reads the caller's tenant's copies only, unless the
	// caller is an operator: another tenant's id is as unknown.
	sc, invalid := scopeOf(r.Context(), sel)
	bad = append(bad, invalid...)
	f = sc.narrow(f)
	limit = DefaultDeadLetterLimit
	if s := v.Get("limit"); s != "" && slices.Contains(allowed, "limit") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			bad = append(bad, notification.FieldError{Field: "limit", Message: "a whole number, 0 or more (0: every parked message; default " +
				strconv.Itoa(DefaultDeadLetterLimit) + ")"})
		}
		limit = n
	}
	return f, limit, bad
}

// orList joins names as "a", "a or b", "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// invalidRequest refuses a dead-letter request body with invalid fields.
func invalidRequest(errs notification.Invalid) *Problem {
	p := newProblem(ProblemInvalidFields, http.StatusUnprocessableEntity, "Invalid request",
		"the request has "+strconv.Itoa(len(errs))+" invalid field(s); see errors")
	p.Errors = errs
	return p
}

// deadLetterFailed is the answer to an error of the store: 404 for an id
// nothing matches, 409 for a replay refused into a queue that is not
// relay's, 503 otherwise. what is "read", "replayed" or "purged"; done says how many
// messages were replayed or purged before the error.
func deadLetterFailed(deps Deps, what string, done int, err error) *Problem {
	switch {
	case errors.Is(err, retry.ErrNotParked):
		return newProblem(ProblemNotFound, http.StatusNotFound, "Not found", err.Error())
	case errors.Is(err, retry.ErrNotDestination):
		// A parked message that names a queue relay does not deliver to
		// stays parked: the client learns which, and that nothing moved.
		deps.Log.Warn("replay refused", "replayed", done, "error", err)
		p := newProblem(ProblemNotDestination, http.StatusConflict, "Not one of relay's work queues",
			"replayed "+strconv.Itoa(done)+"; these stay parked: "+err.Error())
		p.Members = struct {
			Replayed int `json:"replayed"`
		}{done}
		return p
	case what == "read":
		deps.Log.Error("read dead letters", "error", err)
		return unavailable("the dead-letter queue could not be read: " + err.Error())
	default:
		verb := map[string]string{"replayed": "replay", "purged": "purge"}[what]
		deps.Log.Error(verb+" dead letters", what, done, "error", err)
		return unavailable(what + " " + strconv.Itoa(done) + " before an error: " + err.Error())
	}
}

func handleListDeadLetters(deps Deps) http.HandlerFunc {
	return deps.serve(func(w http.ResponseWriter, r *http.Request) error {
		f, limit, bad := deadLetterQuery(r, deps.Topology, "channel", "endpoint", "error", "id", "limit", "reason", "recipient", "since", "source", "tenant", "until")
		if len(bad) > 0 {
			return invalidQuery(bad)
		}
		store, p := deadLetterStore(deps)
		if p != nil {
			return p
		}
		list, err := store.List(r.Context(), f, limit)
		if err != nil {
			deps.Log.Error("list dead letters", "error", err)
			return unavailable("the dead-letter queue could not be read: " + err.Error())
		}
		views := make([]notification.DeadLetter, len(list))
		for i, p := range list {
			views[i] = notification.NewDeadLetter(p)
		}
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, map[string]any{"dead_letters": views})
		return nil
	})
}

// idFilter reads the {id} of a dead-letter route and its recipient and
// source parameters, or returns the 422 that refuses them.
func idFilter(deps Deps, r *http.Request) (retry.Filter, *Problem) {
	f, _, bad := deadLetterQuery(r, deps.Topology, "recipient", "source")
	if len(bad) > 0 {
		return f, invalidQuery(bad)
	}
	f.ID = chi.URLParam(r, "id")
	return f, nil
}

// deadLetterView is the answer of GET /v1/dead-letters/{id}.
type deadLetterView struct {
	ID string `json:"id"`
	// DeadLetters holds each parked copy of the notification: one per
	// channel, and for email one per recipient. They share its id.
	DeadLetters []notification.DeadLetterDetail `json:"dead_letters"`
}

func handleGetDeadLetter(deps Deps) http.HandlerFunc {
	return deps.serve(func(w http.ResponseWriter, r *http.Request) error {
		f, p := idFilter(deps, r)
		if p != nil {
			return p
		}
		store, p := deadLetterStore(deps)
		if p != nil {
			return p
		}
		list, err := store.Get(r.Context(), f)
		if err != nil {
			return deadLetterFailed(deps, "read", 0, err)
		}
		view := deadLetterView{ID: f.ID, DeadLetters: make([]notification.DeadLetterDetail, len(list))}
		for i, p := range list {
			view.DeadLetters[i] = notification.NewDeadLetterDetail(p)
		}
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, view)
		return nil
	})
}

func handleDeleteDeadLetter(deps Deps) http.HandlerFunc {
	return deps.serve(func(w http.ResponseWriter, r *http.Request) error {
		f, p := idFilter(deps, r)
		if p != nil {
			return p
		}
		return purge(deps, w, r, f)
	})
}

func handleReplayDeadLetter(deps Deps) http.HandlerFunc {
	return deps.serve(func(w http.ResponseWriter, r *http.Request) error {
		f, p := idFilter(deps, r)
		if p != nil {
			return p
		}
		return replay(deps, w, r, f)
	})
}

// replayRequest is the body of POST /v1/dead-letters/replay: which parked
// messages, and whether only to count them.
type replayRequest struct {
	selection
	// DryRun answers how many parked messages the selection holds now,
	// and touches none.
	DryRun bool `json:"dry_run"`
}

// purgeRequest is the body of POST /v1/dead-letters/purge.
type purgeRequest struct {
	replayRequest
	// Confirm must be true: a purge cannot be undone.
	Confirm bool `json:"confirm"`
}

// decodeSelection decodes the JSON body of a replay or purge into v, or
// returns the 400 (not JSON, or a field the request does not have: takes
// lists those it has) or 422 (a field of the wrong type, named). An empty
// body is an empty object.
func decodeSelection(r *http.Request, v any, takes string) *Problem {
	dec := json.NewDecoder(io.LimitReader(r.Body, 4096))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil, errors.Is(err, io.EOF):
		return nil
	case errors.As(err, &typeErr) && typeErr.Field != "":
		want := "a string"
		if typeErr.Type.Kind() == reflect.Bool {
			want = "true or false"
		}
		// The path names the embedded struct too (selection.recipient):
		// the body is flat, so its last part is the field.
		field := typeErr.Field[strings.LastIndex(typeErr.Field, ".")+1:]
		return invalidRequest(notification.Invalid{{Field: field, Message: want + ", not a JSON " + typeErr.Value}})
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return unknownField(strings.TrimPrefix(err.Error(), "json: ") + ": the request takes " + takes)
	default:
		return malformed("the body must be a JSON object such as {\"source\": \"email-queue\"} or {\"all\": true}: " + err.Error())
	}
}

func handleReplayDeadLetters(deps Deps) http.HandlerFunc {
	return deps.serve(func(w http.ResponseWriter, r *http.Request) error {
		var req replayRequest
		if p := decodeSelection(r, &req, orList(append(selectionFields, "all"))+", and dry_run"); p != nil {
			return p
		}
		f, bad := req.filter(deps.Topology)
		sc, invalid := scopeOf(r.Context(), req.selection)
		if bad = append(append(req.checkSelected(), bad...), invalid...); len(bad) > 0 {
			return invalidRequest(bad)
		}
		f = sc.narrow(f)
		if req.DryRun {
			return dryRun(deps, w, r, f)
		}
		return replay(deps, w, r, f)
	})
}

func handlePurgeDeadLetters(deps Deps) http.HandlerFunc {
	return deps.serve(func(w http.ResponseWriter, r *http.Request) error {
		var req purgeRequest
		if p := decodeSelection(r, &req, orList(append(selectionFields, "all"))+", and confirm or dry_run"); p != nil {
			return p
		}
		f, bad := req.filter(deps.Topology)
		sc, invalid := scopeOf(r.Context(), req.selection)
		bad = append(append(req.checkSelected(), bad...), invalid...)
		if !req.Confirm && !req.DryRun {
			bad = append(bad, notification.FieldError{Field: "confirm", Message: "must be true: a purge deletes parked messages for good (or set dry_run to count them)"})
		}
		if len(bad) > 0 {
			return invalidRequest(bad)
		}
		// A tenant's purge of all is its own tenant's copies: narrow
		// gives the filter the tenant's header, so the purge selects
		// rather than empties the queue.
		f = sc.narrow(f)
		if req.DryRun {
			return dryRun(deps, w, r, f)
		}
		return purge(deps, w, r, f)
	})
}

// dryRun answers how many parked messages f selects, touching none.
func dryRun(deps Deps, w http.ResponseWriter, r *http.Request, f retry.Filter) error {
	store, p := deadLetterStore(deps)
	if p != nil {
		return p
	}
	n, err := store.Count(r.Context(), f)
	if err != nil {
		return deadLetterFailed(deps, "read", 0, err)
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]any{"matched": n, "dry_run": true})
	return nil
}

func replay(deps Deps, w http.ResponseWriter, r *http.Request, f retry.Filter) error {
	store, p := deadLetterStore(deps)
	if p != nil {
		return p
	}
	n, err := store.Replay(r.Context(), f)
	if err != nil {
		return deadLetterFailed(deps, "replayed", n, err)
	}
	// No email address goes into the log: by_recipient only says the
	// selection named one.
	deps.Log.Info("replayed dead letters", "replayed", n, "id", f.ID, "source", f.Source, "channel", f.Route, "reason", f.Reason, "by_recipient", f.Copy != "", "tenant", logTenant(f))
	writeJSON(w, http.StatusOK, map[string]int{"replayed": n})
	return nil
}

func purge(deps Deps, w http.ResponseWriter, r *http.Request, f retry.Filter) error {
	store, p := deadLetterStore(deps)
	if p != nil {
		return p
	}
	n, err := store.Purge(r.Context(), f)
	if err != nil {
		return deadLetterFailed(deps, "purged", n, err)
	}
	deps.Log.Info("purged dead letters", "purged", n, "id", f.ID, "source", f.Source, "channel", f.Route, "reason", f.Reason, "by_recipient", f.Copy != "", "tenant", logTenant(f))
	writeJSON(w, http.StatusOK, map[string]int{"purged": n})
	return nil
}

// logTenant names the tenant f is narrowed to in logs, as
// tenantScope.String does: a tenant, "default" or "all".
func logTenant(f retry.Filter) string {
	t, ok := f.Headers[notification.HeaderTenant]
	return tenantScope{tenant: t, all: !ok}.String()
}
