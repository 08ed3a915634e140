package dashboard

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/relay-demo/relay/internal/diagram"
	"github.com/relay-demo/relay/internal/events"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/problem"
	"github.com/relay-demo/relay/retry"
)

// RateWindow is how far back the pipeline's arrow rates look.
const RateWindow = 10 * time.Second

// waitGrace is how long past its due time a copy still counts as waiting:
// after it, the copy is in a queue (whose depth shows it), or its next
// event was missed.
const waitGrace = 2 * time.Second

// maxWaiting bounds the copies the pipeline follows as waiting.
const maxWaiting = 100_000

// Pipeline is the picture of the pipeline the dashboard draws: the
// topology the pipeline declared (diagram.Of), and, from the live events,
// how many messages a second took each arrow in the last RateWindow and
// how many copies wait for their next attempt. Feed it with Follow.
type Pipeline struct {
	topo  retry.Topology
	graph diagram.Graph
	now   func() time.Time

	// backlog follows how far behind each work queue and endpoint is,
	// as the metrics do.
	backlog *events.Backlog

	mu      sync.Mutex
	counts  map[string]*[rateSlots]slot // edge id -> per-second counts
	waiting map[string]waiting          // copy -> its wait
}

// rateSlots is RateWindow in seconds.
const rateSlots = int(RateWindow / time.Second)

// slot is the count of one second.
type slot struct {
	sec int64
	n   int
}

// waiting is one copy's scheduled wait.
type waiting struct {
	queue string // the work queue, without prefix
	due   time.Time
}

// NewPipeline returns the picture of topology t, with no traffic yet.
func NewPipeline(t retry.Topology) *Pipeline {
	return &Pipeline{topo: t, graph: diagram.Of(t), now: time.Now, backlog: events.NewBacklog(events.BacklogIdle),
		counts: map[string]*[rateSlots]slot{}, waiting: map[string]waiting{}}
}

// Follow observes every event from in and passes it on, in order, on the
// channel it returns, which is closed when in is closed or ctx is done.
func (p *Pipeline) Follow(ctx context.Context, in <-chan notification.Event) <-chan notification.Event {
	out := make(chan notification.Event)
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-in:
				if !ok {
					return
				}
				p.Observe(ev)
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

// Observe counts ev on the arrows the message took, follows the wait it
// scheduled, and the backlog a worker found.
func (p *Pipeline) Observe(ev notification.Event) {
	q := strings.TrimPrefix(ev.Queue, p.topo.Prefix)
	if q == "" {
		return
	}
	p.backlog.Observe(ev)
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range p.arrows(ev, q) {
		if _, ok := p.graph.Edge(splitEdge(id)); !ok {
			continue
		}
		c := p.counts[id]
		if c == nil {
			c = &[rateSlots]slot{}
			p.counts[id] = c
		}
		sec := now.Unix()
		s := &c[sec%int64(rateSlots)]
		if s.sec != sec {
			*s = slot{sec: sec}
		}
		s.n++
	}
	key := ev.ID + "\x00" + q + "\x00" + ev.Recipient
	switch ev.Outcome {
	case retry.Retrying, retry.Waiting:
		if len(p.waiting) >= maxWaiting {
			p.expire(now)
		}
		if len(p.waiting) < maxWaiting {
			p.waiting[key] = waiting{queue: q, due: ev.At.Add(time.Duration(ev.DelayMS) * time.Millisecond)}
		}
	default:
		delete(p.waiting, key)
	}
}

func splitEdge(id string) (from, to string) {
	from, to, _ = strings.Cut(id, ">")
	return from, to
}

// byWorker reports whether a parked event was decided by the worker
// rather than the error stage: a permanent failure always is; on the
// native backend or with a direct hand-off, every park is.
func (p *Pipeline) byWorker(ev notification.Event) bool {
	if ev.Reason == retry.ReasonPermanent || ev.Reason == retry.ReasonTooLarge {
		return true
	}
	return p.topo.WaitsInQueue() || p.topo.Handoff == retry.Direct
}

// arrows are the edges a message took for ev to be decided about it, in
// work queue q: ingress to q for the first attempt, then to its
// downstream, the error stage, the wait, the requeue stage or the
// dead-letter queue.
func (p *Pipeline) arrows(ev notification.Event, q string) []string {
	ingress := strings.TrimPrefix(p.topo.Ingress(), p.topo.Prefix)
	stages := p.topo.HasRequeueStage()
	native := p.topo.WaitsInQueue()
	id := diagram.EdgeID
	var out []string
	worker := ev.Outcome == retry.Delivered || ev.Outcome == retry.Failed ||
		ev.Outcome == retry.Parked && p.byWorker(ev)
	if worker && ev.Attempt == 1 && ev.Round == 0 {
		out = append(out, id(ingress, q))
	}
	if worker && ev.Attempt > 1 && !stages && !native {
		// A direct hand-off: the broker routed it back from the wait.
		out = append(out, id(diagram.WaitID, q))
	}
	switch ev.Outcome {
	case retry.Delivered:
		out = append(out, id(q, diagram.SinkID(q)))
	case retry.Failed:
		if stages {
			out = append(out, id(q, retry.ErrorExchange), id(retry.ErrorExchange, retry.ErrorQueue))
		}
	case retry.Retrying, retry.Waiting:
		switch {
		case native:
			out = append(out, id(q, q))
		case stages && ev.Outcome == retry.Retrying:
			out = append(out, id(retry.ErrorQueue, diagram.WaitID))
		case !stages:
			out = append(out, id(q, diagram.WaitID))
		}
	case retry.Requeued:
		out = append(out, id(diagram.WaitID, retry.RequeueQueue), id(retry.RequeueQueue, q))
	case retry.Parked:
		from := retry.ErrorQueue
		if p.byWorker(ev) {
			from = q
		}
		out = append(out, id(from, retry.DeadExchange), id(retry.DeadExchange, retry.DeadQueue))
	}
	return out
}

// Backlog returns, in seconds, how far behind each work queue (by its
// name without the topology's prefix) and each registered webhook
// endpoint (by id) is, as the workers' events tell it: the figures of
// events.Backlog, an endpoint's only when the copy it was taken from
// belongs to a tenant sees keeps (nil: every tenant's).
func (p *Pipeline) Backlog(sees func(tenant string) bool) (queues, endpoints map[string]float64) {
	now := p.now()
	queues = map[string]float64{}
	for q, s := range p.backlog.Queues(now) {
		if name, ok := strings.CutPrefix(q, p.topo.Prefix); ok {
			queues[name] = s
		}
	}
	return queues, p.backlog.EndpointsOf(now, sees)
}

// expire forgets the waits that are over. p.mu is held.
func (p *Pipeline) expire(now time.Time) {
	for k, w := range p.waiting {
		if now.After(w.due.Add(waitGrace)) {
			delete(p.waiting, k)
		}
	}
}

// pipelineView is what GET /dashboard/pipeline answers.
type pipelineView struct {
	Backend string `json:"backend"`
	Handoff string `json:"handoff"`
	// WindowSeconds is how far back the rates look.
	WindowSeconds int            `json:"window_seconds"`
	Cols          int            `json:"cols"`
	Rows          int            `json:"rows"`
	Nodes         []pipelineNode `json:"nodes"`
	Edges         []pipelineEdge `json:"edges"`
	// DepthsError says why the depths are missing.
	DepthsError string `json:"depths_error,omitempty"`
}

// pipelineNode is a node with its depth: the ready messages of its
// queues (nil for an exchange, a sink, or when the depths cannot be read)
// and the copies whose scheduled wait it holds.
type pipelineNode struct {
	diagram.Node
	Depth   *int `json:"depth"`
	Waiting int  `json:"waiting"`
}

// pipelineEdge is an edge with its rate: messages a second over the
// window.
type pipelineEdge struct {
	diagram.Edge
	Rate float64 `json:"rate"`
}

// view is the picture with depths (nil when unknown) and the traffic of
// the last RateWindow.
func (p *Pipeline) view(depths map[string]int) pipelineView {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expire(now)
	waits := map[string]int{}
	for _, w := range p.waiting {
		if !now.After(w.due.Add(waitGrace)) {
			where := diagram.WaitID
			if p.topo.WaitsInQueue() {
				where = w.queue
			}
			waits[where]++
		}
	}
	handoff := string(p.topo.Handoff)
	if p.topo.Handoff == retry.ViaStages {
		handoff = "stages"
	}
	v := pipelineView{Backend: string(p.topo.Backend), Handoff: handoff, WindowSeconds: rateSlots,
		Cols: p.graph.Cols, Rows: p.graph.Rows, Nodes: []pipelineNode{}, Edges: []pipelineEdge{}}
	for _, n := range p.graph.Nodes {
		pn := pipelineNode{Node: n, Waiting: waits[n.ID]}
		if depths != nil && len(n.Queues) > 0 {
			total, known := 0, false
			for _, q := range n.Queues {
				if d, ok := depths[q]; ok {
					total, known = total+d, true
				}
			}
			if known {
				pn.Depth = &total
			}
		}
		v.Nodes = append(v.Nodes, pn)
	}
	from := now.Unix() - int64(rateSlots) + 1
	for _, e := range p.graph.Edges {
		pe := pipelineEdge{Edge: e}
		if c := p.counts[e.ID]; c != nil {
			n := 0
			for _, s := range c {
				if s.sec >= from && s.sec <= now.Unix() {
					n += s.n
				}
			}
			pe.Rate = float64(n) / float64(rateSlots)
		}
		v.Edges = append(v.Edges, pe)
	}
	return v
}

// pipeline answers GET /dashboard/pipeline: the picture, the depth of
// each box and the rate of each arrow. Names and numbers only, so a
// public dashboard shows it whole, but for the reason depths are missing.
func (s *server) pipeline(w http.ResponseWriter, r *http.Request) error {
	who, refusal := s.allow(r)
	if refusal != nil {
		return refusal
	}
	full := who.full()
	if s.Pipeline == nil {
		return &problem.Problem{Type: problem.Base + "pipeline-unavailable", Title: "Pipeline unavailable",
			Status: http.StatusServiceUnavailable, Detail: "this dashboard runs without the pipeline's topology"}
	}
	var depths map[string]int
	var why string
	if s.Queues != nil {
		ctx, cancel := context.WithTimeout(r.Context(), queuesTimeout)
		d, err := s.Queues(ctx)
		cancel()
		if err != nil {
			s.Log.Warn("read queue depths", "error", err)
			why = "queue depths unavailable"
			if full {
				why += ": " + err.Error()
			}
		} else {
			depths = d
		}
	}
	v := s.Pipeline.view(depths)
	v.DepthsError = why
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, v)
	return nil
}
