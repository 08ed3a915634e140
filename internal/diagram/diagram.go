// Package diagram turns a retry topology into a picture: boxes for the
// exchanges and queues a retry.Plan declares, arrows for its bindings, its
// queues' dead-lettering and the republishes of relay's own consumers, each
// box on a column and a row. The dashboard draws it live (with each queue's
// depth and each arrow's rate) and the workshop's chapters as SVG, both
// from the plan the code declares, so neither picture can drift from it.
//
// The wait of the delay backends is one box, "wait": the delayed exchange
// of the plugin, the TTL backend's queue per step, the 65 exchanges and
// queues of the binary delay levels; its depth is the sum of its queues'.
package diagram

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/relay-demo/relay/retry"
)

// The kinds of node.
const (
	// KindExchange is an exchange: it holds no message.
	KindExchange = "exchange"
	// KindQueue is a queue.
	KindQueue = "queue"
	// KindWait is the wait group: every exchange and queue a message waits
	// in before its next attempt.
	KindWait = "wait"
	// KindSink is where a work queue's consumer delivers: the downstream.
	KindSink = "sink"
)

// The kinds of edge.
const (
	// EdgeRoute is a binding: the exchange routes to the queue or exchange.
	EdgeRoute = "route"
	// EdgeDeadLetter is a queue's dead-lettering to its x-dead-letter-exchange.
	EdgeDeadLetter = "dead-letter"
	// EdgeExpire is a queue whose expired messages go, through the default
	// exchange, to another queue.
	EdgeExpire = "expire"
	// EdgeMove is a republish by one of relay's consumers.
	EdgeMove = "move"
	// EdgeDeliver is a worker's delivery to the downstream.
	EdgeDeliver = "deliver"
)

// WaitID is the ID of the wait group's node.
const WaitID = "wait"

// Node is one box: an exchange, a queue, the wait group or a downstream.
type Node struct {
	// ID is the entity's name without the topology's prefix, WaitID for
	// the wait group, "delivered:" and a work queue's name for a sink.
	ID    string `json:"id"`
	Label string `json:"label"`
	Kind  string `json:"kind"`
	// Detail says what kind of exchange, what TTL, how many levels.
	Detail string `json:"detail,omitempty"`
	// Queues are the names (without prefix) of the queues the box holds:
	// its depth is their sum. None for an exchange or a sink.
	Queues []string `json:"queues"`
	// Col and Row place the box: columns follow the path of a message
	// from the ingress exchange, rows the order of the plan.
	Col int `json:"col"`
	Row int `json:"row"`
}

// Edge is one arrow between two nodes; there is at most one per ordered
// pair.
type Edge struct {
	// ID is From + ">" + To.
	ID    string `json:"id"`
	From  string `json:"from"`
	To    string `json:"to"`
	Kind  string `json:"kind"`
	Label string `json:"label"`
	// Back is an arrow that goes to a column left of its start, or to its
	// own box: drawn around the boxes rather than through them.
	Back bool `json:"back"`
}

// Graph is a plan's picture.
type Graph struct {
	Nodes []Node `json:"nodes"`
	Edges []Edge `json:"edges"`
	// Cols and Rows are the size of the grid the nodes sit on.
	Cols int `json:"cols"`
	Rows int `json:"rows"`
}

// Node returns the node with id, if there is one.
func (g Graph) Node(id string) (Node, bool) {
	for _, n := range g.Nodes {
		if n.ID == id {
			return n, true
		}
	}
	return Node{}, false
}

// Edge returns the edge from one node to another, if there is one.
func (g Graph) Edge(from, to string) (Edge, bool) {
	for _, e := range g.Edges {
		if e.From == from && e.To == to {
			return e, true
		}
	}
	return Edge{}, false
}

// EdgeID names the edge from one node to another.
func EdgeID(from, to string) string { return from + ">" + to }

// SinkID is the ID of the downstream a work queue's worker delivers to.
func SinkID(queue string) string { return "delivered:" + queue }

// inWait reports whether an entity (without prefix) is part of the wait.
func inWait(name string) bool {
	return name == "wait-exchange" || name == "wait-queue" || strings.HasPrefix(name, "wait.")
}

// builder collects nodes and edges in order, merging the wait group.
type builder struct {
	prefix string
	g      Graph
	index  map[string]int // node id -> index in g.Nodes
	edges  map[string]int // edge id -> index in g.Edges
	wait   struct {
		exchanges []retry.Exchange
		queues    []retry.Queue
	}
}

func (b *builder) id(name string) string {
	base := strings.TrimPrefix(name, b.prefix)
	if inWait(base) {
		return WaitID
	}
	return base
}

func (b *builder) add(n Node) {
	if i, ok := b.index[n.ID]; ok {
		b.g.Nodes[i].Queues = append(b.g.Nodes[i].Queues, n.Queues...)
		return
	}
	if n.Queues == nil {
		n.Queues = []string{}
	}
	b.index[n.ID] = len(b.g.Nodes)
	b.g.Nodes = append(b.g.Nodes, n)
}

func (b *builder) edge(from, to, kind, label string) {
	f, t := b.id(from), b.id(to)
	if f == WaitID && t == WaitID {
		return // inside the wait: one box
	}
	if _, ok := b.index[f]; !ok {
		return
	}
	if _, ok := b.index[t]; !ok {
		return
	}
	id := EdgeID(f, t)
	if i, ok := b.edges[id]; ok {
		e := &b.g.Edges[i]
		if label != "" && !slices.Contains(strings.Split(e.Label, "; "), label) {
			if e.Label != "" {
				e.Label += "; "
			}
			e.Label += label
		}
		return
	}
	b.edges[id] = len(b.g.Edges)
	b.g.Edges = append(b.g.Edges, Edge{ID: id, From: f, To: t, Kind: kind, Label: label})
}

// FromPlan draws p, whose names carry prefix.
func FromPlan(p retry.Plan, prefix string) Graph {
	b := &builder{prefix: prefix, index: map[string]int{}, edges: map[string]int{}}
	for _, e := range p.Exchanges {
		if b.id(e.Name) == WaitID {
			b.wait.exchanges = append(b.wait.exchanges, e)
			b.add(Node{ID: WaitID, Label: "wait", Kind: KindWait})
			continue
		}
		b.add(Node{ID: b.id(e.Name), Label: b.id(e.Name), Kind: KindExchange, Detail: e.Kind})
	}
	for _, q := range p.Queues {
		base := strings.TrimPrefix(q.Name, prefix)
		if b.id(q.Name) == WaitID {
			b.wait.queues = append(b.wait.queues, q)
			b.add(Node{ID: WaitID, Label: "wait", Kind: KindWait, Queues: []string{base}})
			continue
		}
		b.add(Node{ID: base, Label: base, Kind: KindQueue, Detail: queueDetail(q), Queues: []string{base}})
	}
	if i, ok := b.index[WaitID]; ok {
		b.g.Nodes[i].Detail = waitDetail(b.wait.exchanges, b.wait.queues)
	}
	for _, bd := range p.Bindings {
		to := bd.Queue
		if bd.ToExchange != "" {
			to = bd.ToExchange
		}
		b.edge(bd.Exchange, to, EdgeRoute, strings.TrimPrefix(bindingLabel(bd), prefix))
	}
	for _, q := range p.Queues {
		dlx, ok := q.Args["x-dead-letter-exchange"].(string)
		if !ok {
			continue
		}
		if dlx != "" {
			b.edge(q.Name, dlx, EdgeDeadLetter, "dead-letter")
			continue
		}
		if key, ok := q.Args["x-dead-letter-routing-key"].(string); ok {
			b.edge(q.Name, key, EdgeExpire, "expired")
		}
	}
	for _, m := range p.Moves {
		b.edge(m.From, m.To, EdgeMove, m.Label)
	}
	b.layout()
	return b.g
}

// Of draws topology t: its plan, and the downstream each work queue's
// worker delivers to.
func Of(t retry.Topology) Graph {
	p := t.Plan()
	g := FromPlan(p, t.Prefix)
	b := &builder{prefix: t.Prefix, g: g, index: map[string]int{}, edges: map[string]int{}}
	for i, n := range g.Nodes {
		b.index[n.ID] = i
	}
	for i, e := range g.Edges {
		b.edges[e.ID] = i
	}
	for _, r := range t.Routes {
		b.add(Node{ID: SinkID(r.Queue), Label: r.Key + " downstream", Kind: KindSink, Detail: "the " + r.Key + " worker delivers"})
		b.edge(t.Name(r.Queue), t.Name(SinkID(r.Queue)), EdgeDeliver, "delivered")
	}
	b.layout()
	return b.g
}

// layout places the nodes: a node's column is its distance from the first
// exchange along the edges, its row its place among its column's nodes.
// A node no path reaches goes after the last column.
func (b *builder) layout() {
	g := &b.g
	col := map[string]int{}
	if len(g.Nodes) > 0 {
		first := g.Nodes[0].ID
		col[first] = 0
		queue := []string{first}
		for len(queue) > 0 {
			n := queue[0]
			queue = queue[1:]
			for _, e := range g.Edges {
				if e.From != n {
					continue
				}
				if _, seen := col[e.To]; !seen {
					col[e.To] = col[n] + 1
					queue = append(queue, e.To)
				}
			}
		}
	}
	last := 0
	for _, c := range col {
		last = max(last, c)
	}
	// Rows, a column at a time: a downstream beside its work queue, then
	// every other box on the first free row from its highest predecessor's,
	// so the main path runs along the top and the retry loop below it.
	for i := range g.Nodes {
		if c, ok := col[g.Nodes[i].ID]; ok {
			g.Nodes[i].Col = c
		} else {
			g.Nodes[i].Col = last + 1
		}
	}
	taken := map[[2]int]bool{}
	place := func(n *Node, want int) {
		for taken[[2]int{n.Col, want}] {
			want++
		}
		n.Row = want
		taken[[2]int{n.Col, want}] = true
	}
	g.Cols, g.Rows = 0, 0
	for c := 0; c <= last+1; c++ {
		for _, sinks := range []bool{true, false} {
			for i := range g.Nodes {
				n := &g.Nodes[i]
				if n.Col != c || (n.Kind == KindSink) != sinks {
					continue
				}
				want := -1
				for _, e := range g.Edges {
					if e.To != n.ID || e.From == n.ID {
						continue
					}
					if p := g.Nodes[b.index[e.From]]; p.Col < c && (want < 0 || p.Row < want) {
						want = p.Row
					}
				}
				place(n, max(want, 0))
				g.Cols = max(g.Cols, c+1)
				g.Rows = max(g.Rows, n.Row+1)
			}
		}
	}
	for i := range g.Edges {
		e := &g.Edges[i]
		from, to := g.Nodes[b.index[e.From]], g.Nodes[b.index[e.To]]
		e.Back = to.Col <= from.Col
	}
}

func bindingLabel(bd retry.Binding) string {
	switch {
	case bd.Key != "" && strings.Contains(bd.Key, "*"):
		return "by delay bits"
	case bd.Key != "":
		return bd.Key
	case bd.Args != nil:
		return "all"
	}
	return ""
}

func queueDetail(q retry.Queue) string {
	var parts []string
	if t, ok := q.Args["x-queue-type"].(string); ok {
		parts = append(parts, t)
	}
	if ms, ok := ttl(q); ok {
		parts = append(parts, "ttl "+stepName(ms))
	}
	if lo, ok := q.Args["x-delayed-retry-min"].(int64); ok {
		hi, _ := q.Args["x-delayed-retry-max"].(int64)
		parts = append(parts, fmt.Sprintf("delayed retry %s…%s", retry.StepName(time.Duration(lo)*time.Millisecond), retry.StepName(time.Duration(hi)*time.Millisecond)))
	}
	if lim, ok := q.Args["x-delivery-limit"].(int64); ok {
		parts = append(parts, fmt.Sprintf("limit %d", lim))
	}
	return strings.Join(parts, ", ")
}

func ttl(q retry.Queue) (time.Duration, bool) {
	switch v := q.Args["x-message-ttl"].(type) {
	case int64:
		return time.Duration(v) * time.Millisecond, true
	case int:
		return time.Duration(v) * time.Millisecond, true
	case int32:
		return time.Duration(v) * time.Millisecond, true
	}
	return 0, false
}

// waitDetail says how the wait holds its messages.
func waitDetail(exchanges []retry.Exchange, queues []retry.Queue) string {
	for _, e := range exchanges {
		if e.Kind == "x-delayed-message" {
			return "held in the delayed exchange"
		}
	}
	// The binary delay levels beside a backend's own step queues (ttl)
	// serve any other wait: named apart.
	var levels, own []retry.Queue
	for _, q := range queues {
		if strings.Contains(q.Name, "wait.level.") {
			levels = append(levels, q)
		} else {
			own = append(own, q)
		}
	}
	if len(levels) > 0 && len(own) > 0 {
		return fmt.Sprintf("%s, and %d levels for any other wait", waitDetail(nil, own), len(levels))
	}
	var steps []time.Duration
	for _, q := range queues {
		if d, ok := ttl(q); ok && !slices.Contains(steps, d) {
			steps = append(steps, d)
		}
	}
	slices.Sort(steps)
	ttls := make([]string, len(steps))
	for i, d := range steps {
		ttls[i] = stepName(d)
	}
	switch {
	case len(queues) == 0:
		return ""
	case len(ttls) > 6:
		return fmt.Sprintf("%d queues, ttl %s…%s", len(queues), ttls[0], ttls[len(ttls)-1])
	case len(ttls) > 0:
		if len(queues) == 1 {
			return "ttl " + ttls[0]
		}
		return fmt.Sprintf("%d queues, ttl %s", len(queues), strings.Join(ttls, " "))
	case len(queues) == 1:
		return "per-message ttl"
	}
	return fmt.Sprintf("%d queues", len(queues))
}

// stepName writes a wait as a queue's name does (5s, 1m), or rounded to
// the hour past an hour (597h rather than 2147483648ms).
func stepName(d time.Duration) string {
	if d > time.Hour && d%time.Second != 0 {
		return fmt.Sprintf("%dh", int64(d.Round(time.Hour).Hours()))
	}
	return retry.StepName(d)
}
