package diagram

import (
	"encoding/xml"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/retry"
)

func topology(b retry.Backend, h retry.Handoff) retry.Topology {
	return retry.Topology{Prefix: "x.", Backend: b, Handoff: h, QueueType: retry.Quorum,
		Routes: []retry.Route{{Queue: "email-queue", Key: "email"}},
		Policy: retry.Policy{Delays: []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}}}
}

// TestOf draws each backend with each hand-off: every entity of the plan
// is in a box (the wait's in one), and the path of a retry is drawn.
func TestOf(t *testing.T) {
	tests := []struct {
		backend    retry.Backend
		handoff    retry.Handoff
		waitQueues int // -1: no wait box
		waitDetail string
		path       []string // boxes a retried message passes, in order
	}{
		{retry.Plugin, retry.ViaStages, 0, "held in the delayed exchange",
			[]string{"notification-exchange", "email-queue", "error-exchange", "error-queue", "wait", "requeue-queue", "email-queue", "delivered:email-queue"}},
		{retry.Plugin, retry.Direct, 0, "held in the delayed exchange",
			[]string{"notification-exchange", "email-queue", "wait", "email-queue", "delivered:email-queue"}},
		{retry.TTL, retry.ViaStages, 3 + 32, "3 queues, ttl 1s 2s 3s, and 32 levels for any other wait",
			[]string{"notification-exchange", "email-queue", "error-exchange", "error-queue", "wait", "requeue-queue", "email-queue"}},
		{retry.TTL, retry.Direct, 3 + 32, "3 queues, ttl 1s 2s 3s, and 32 levels for any other wait",
			[]string{"notification-exchange", "email-queue", "wait", "email-queue"}},
		{retry.Levels, retry.ViaStages, 32, "32 queues, ttl 1ms…597h",
			[]string{"notification-exchange", "email-queue", "error-exchange", "error-queue", "wait", "requeue-queue", "email-queue"}},
		{retry.Levels, retry.Direct, 32, "32 queues, ttl 1ms…597h",
			[]string{"notification-exchange", "email-queue", "wait", "email-queue"}},
		// The work queue holds a retry; the levels, a deferral.
		{retry.Native, retry.ViaStages, 32, "32 queues, ttl 1ms…597h",
			[]string{"notification-exchange", "email-queue", "email-queue", "dead-letter-exchange", "dead-letter-queue"}},
		{retry.Native, retry.Direct, 32, "32 queues, ttl 1ms…597h",
			[]string{"notification-exchange", "email-queue", "email-queue", "delivered:email-queue"}},
	}
	for _, tt := range tests {
		t.Run(string(tt.backend)+"/"+string(tt.handoff), func(t *testing.T) {
			top := topology(tt.backend, tt.handoff)
			g := Of(top)
			in := map[string]bool{}
			for _, n := range g.Nodes {
				for _, q := range n.Queues {
					in[q] = true
				}
				if n.Col >= g.Cols || n.Row >= g.Rows {
					t.Errorf("box %q at %d,%d, outside the grid of %dx%d", n.ID, n.Col, n.Row, g.Cols, g.Rows)
				}
			}
			for _, q := range top.Plan().Queues {
				if base := strings.TrimPrefix(q.Name, top.Prefix); !in[base] {
					t.Errorf("queue %q is in no box", base)
				}
			}
			wait, ok := g.Node(WaitID)
			switch {
			case tt.waitQueues < 0 && ok:
				t.Errorf("a wait box %+v", wait)
			case tt.waitQueues >= 0 && !ok:
				t.Error("no wait box")
			case ok:
				if len(wait.Queues) != tt.waitQueues || wait.Detail != tt.waitDetail {
					t.Errorf("wait box holds %d queues, %q; want %d, %q", len(wait.Queues), wait.Detail, tt.waitQueues, tt.waitDetail)
				}
			}
			for i := 1; i < len(tt.path); i++ {
				if _, ok := g.Edge(tt.path[i-1], tt.path[i]); !ok {
					t.Errorf("no arrow %s > %s", tt.path[i-1], tt.path[i])
				}
			}
			seen := map[[2]int]string{}
			for _, n := range g.Nodes {
				at := [2]int{n.Col, n.Row}
				if other, dup := seen[at]; dup {
					t.Errorf("boxes %q and %q both at %v", other, n.ID, at)
				}
				seen[at] = n.ID
			}
		})
	}
}

// TestFromPlanColumns places the boxes along a message's path.
func TestFromPlanColumns(t *testing.T) {
	g := Of(topology(retry.Levels, retry.ViaStages))
	col := map[string]int{}
	for _, n := range g.Nodes {
		col[n.ID] = n.Col
	}
	want := map[string]int{"notification-exchange": 0, "email-queue": 1, "error-exchange": 2, "error-queue": 3, "wait": 4, "requeue-queue": 5,
		"dead-letter-exchange": 2, "dead-letter-queue": 3, "delivered:email-queue": 2}
	if diff := cmp.Diff(want, col); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	// The main path on the top row, the retry loop below it.
	row := map[string]int{}
	for _, n := range g.Nodes {
		row[n.ID] = n.Row
	}
	wantRow := map[string]int{"notification-exchange": 0, "email-queue": 0, "delivered:email-queue": 0, "error-exchange": 1, "error-queue": 1,
		"wait": 1, "requeue-queue": 1, "dead-letter-exchange": 2, "dead-letter-queue": 2}
	if diff := cmp.Diff(wantRow, row); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	back, _ := g.Edge("requeue-queue", "email-queue")
	if !back.Back {
		t.Errorf("requeue-queue > email-queue is not drawn as going back: %+v", back)
	}
}

// TestSVG draws a well-formed document with a box per node and an arrow
// per edge, every name escaped.
func TestSVG(t *testing.T) {
	g := Of(topology(retry.Levels, retry.ViaStages))
	doc := g.SVG(`levels & <stages>`)
	dec := xml.NewDecoder(strings.NewReader(doc))
	nodes, edges := 0, 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, doc)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "g" {
			for _, a := range se.Attr {
				switch {
				case a.Name.Local == "class" && strings.HasPrefix(a.Value, "node "):
					nodes++
				case a.Name.Local == "class" && strings.HasPrefix(a.Value, "edge "):
					edges++
				}
			}
		}
	}
	if nodes != len(g.Nodes) || edges != len(g.Edges) {
		t.Errorf("%d boxes and %d arrows drawn, want %d and %d", nodes, edges, len(g.Nodes), len(g.Edges))
	}
	if !strings.Contains(doc, "levels &amp; &lt;stages&gt;") {
		t.Error("the title is not escaped")
	}
}
