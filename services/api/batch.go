package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

// DefaultMaxBatch is the most notifications a batch may hold when
// Deps.MaxBatch is zero.
const DefaultMaxBatch = 500

// itemResult is one item's answer in a batch: accepted, or the problem
// that refused it.
type itemResult struct {
	accepted *accepted
	problem  *Problem
}

// MarshalJSON writes the accepted item, or its problem.
func (r itemResult) MarshalJSON() ([]byte, error) {
	if r.problem != nil {
		return json.Marshal(r.problem)
	}
	return json.Marshal(r.accepted)
}

// batchAnswer is the body of a batch's 202 or 207 answer.
type batchAnswer struct {
	Results []itemResult `json:"results"`
}

// handleCreateBatch takes up to deps.MaxBatch notifications in one body.
// Each item is decoded and checked as POST /v1/notifications checks its
// body, and gets an id of its own. The valid items are published at once,
// their confirms awaited together within one publish timeout, and the
// answer gives each item's result in request order: 202 when every item
// was accepted, 207 when some were refused or not confirmed, 422 when none
// was valid (nothing is published then).
func handleCreateBatch(deps Deps, m *metrics) http.HandlerFunc {
	ingress := deps.Topology.Ingress()
	return deps.serve(func(w http.ResponseWriter, r *http.Request) error {
		start := time.Now()
		if p := checkContentType(r.Header.Get("Content-Type")); p != nil {
			return p
		}
		// A key would have to stand for every item, and for a partial
		// failure's retry: refused rather than ignored, so no client
		// believes a batch is safe to resend.
		if _, present := r.Header[http.CanonicalHeaderKey("Idempotency-Key")]; present {
			return invalidHeader("Idempotency-Key is not supported on POST /v1/notifications/batch: " +
				"send the batch without it, or send each notification to POST /v1/notifications with a key of its own")
		}
		if r.ContentLength > deps.MaxBody {
			return tooLarge(deps.MaxBody)
		}
		items, err := decodeBatch(http.MaxBytesReader(w, r.Body, deps.MaxBody), deps.MaxBatch)
		if err != nil {
			return asProblem(err)
		}
		results := make([]itemResult, len(items))
		valid := make([]*notification.Notification, len(items)) // nil where refused
		rounded := make([]string, len(items))
		refused := 0
		now := deps.Now()
		for i, raw := range items {
			n, timing, err := deps.request.decodeTimed(bytes.NewReader(raw))
			if err != nil {
				results[i].problem = asProblem(err)
				refused++
				continue
			}
			if p := checkType(deps.Topology, n); p != nil {
				results[i].problem = p
				refused++
				continue
			}
			sched, p := schedule(deps.Topology, timing, now)
			if p != nil {
				results[i].problem = p
				refused++
				continue
			}
			n.DueAt, rounded[i] = sched.due, sched.rounded
			valid[i] = n
		}
		if refused == len(items) {
			p := invalidBatch(fmt.Sprintf("none of the %d notification(s) is valid; see results", len(items)))
			p.Members = struct {
				Results []itemResult `json:"results,omitempty"`
			}{results}
			return p
		}
		pub := deps.Publisher()
		if pub == nil {
			return unavailable("the API is not connected to the broker")
		}
		createdAt := deps.Now().UTC()
		channels := make([][]string, len(items))
		copies := 0
		for i, n := range valid {
			if n != nil {
				n.ID, n.CreatedAt, n.Tenant = deps.NewID(), createdAt, tenantOf(r.Context())
				channels[i] = n.Channels()
				copies += len(copyRefs(deps.Channels, n, channels[i]))
			}
		}
		// The whole batch or nothing: a client told to wait resends it as
		// it was.
		if p := deps.chargeCopies(r, copies); p != nil {
			return p
		}
		// The whole batch is one flow of its client in the producer's
		// window: a request beside it takes its turns with it, not after
		// it.
		errs := publishBatch(retry.NewFlow(r.Context(), identity(r.Context())), deps, m, pub, ingress, valid, channels)
		failed := 0
		for i, n := range valid {
			if n == nil {
				continue
			}
			if errs[i] != nil {
				failed++
				deps.Log.Warn("notification not accepted", "id", n.ID, "channels", channels[i], "batch_index", i, "error", errs[i].Error())
				results[i].problem = publishProblem(errs[i], ingress, deps.PublishTimeout)
				continue
			}
			results[i].accepted = acceptedOf(deps.Channels, n, channels[i])
			results[i].accepted.Rounded = rounded[i]
			deps.Log.Info("notification accepted", "id", n.ID, "channels", channels[i], "batch_index", i)
		}
		status := http.StatusAccepted
		if refused+failed > 0 {
			status = http.StatusMultiStatus
		}
		deps.Log.Info("batch answered", "status", status, "items", len(items), "accepted", len(items)-refused-failed,
			"refused", refused, "failed", failed, "duration_ms", time.Since(start).Milliseconds())
		writeJSON(w, status, batchAnswer{Results: results})
		return nil
	})
}

// publishBatch publishes every notification of ns that is not nil, each as
// publish does, all at once, and waits for every confirm together, within
// one publish timeout: a batch costs one wait, not one round trip per item.
// errs[i] says why ns[i] was not taken; it is nil for a taken or nil item.
func publishBatch(ctx context.Context, deps Deps, m *metrics, pub Publisher, ingress string, ns []*notification.Notification, channels [][]string) (errs []error) {
	ctx, cancel := context.WithTimeout(ctx, deps.PublishTimeout)
	defer cancel()
	var wg sync.WaitGroup
	outcomes := make([]func() error, len(ns))
	for i, n := range ns {
		if n == nil {
			continue
		}
		outcomes[i] = send(ctx, deps, m, pub, ingress, n, channels[i], &wg)
	}
	wg.Wait()
	errs = make([]error, len(ns))
	for i, outcome := range outcomes {
		if outcome != nil {
			errs[i] = outcome()
		}
	}
	return errs
}
