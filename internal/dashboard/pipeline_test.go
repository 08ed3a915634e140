package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/events"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

// pipelineTopology is a topology of two work queues on a backend and a
// hand-off, with a schedule every backend follows (native's is linear).
func pipelineTopology(b retry.Backend, h retry.Handoff) retry.Topology {
	return retry.Topology{Prefix: "pic.", Backend: b, Handoff: h, QueueType: durable(b),
		Routes: []retry.Route{{Queue: "email-queue", Key: "email"}, {Queue: "webhook-queue", Key: "webhook"}},
		Policy: retry.Policy{Delays: []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}}}
}

// everyQueueHolds is a Queues function where each queue of t holds one
// ready message.
func everyQueueHolds(t retry.Topology) func(context.Context) (map[string]int, error) {
	return func(context.Context) (map[string]int, error) {
		out := map[string]int{}
		for _, q := range t.Plan().Queues {
			out[strings.TrimPrefix(q.Name, t.Prefix)] = 1
		}
		return out, nil
	}
}

// pictureNode and picture are what a test reads of /dashboard/pipeline.
type pictureNode struct {
	ID      string   `json:"id"`
	Kind    string   `json:"kind"`
	Queues  []string `json:"queues"`
	Depth   *int     `json:"depth"`
	Waiting int      `json:"waiting"`
}

type picture struct {
	Backend     string        `json:"backend"`
	Handoff     string        `json:"handoff"`
	Nodes       []pictureNode `json:"nodes"`
	DepthsError string        `json:"depths_error"`
	Edges       []struct {
		ID   string  `json:"id"`
		Rate float64 `json:"rate"`
	} `json:"edges"`
}

func (p picture) node(id string) (pictureNode, bool) {
	for _, n := range p.Nodes {
		if n.ID == id {
			return n, true
		}
	}
	return pictureNode{}, false
}

// rates are the edges that carried traffic, in messages a second.
func (p picture) rates() map[string]float64 {
	out := map[string]float64{}
	for _, e := range p.Edges {
		if e.Rate != 0 {
			out[e.ID] = e.Rate
		}
	}
	return out
}

func getPicture(t *testing.T, h http.Handler, authorization string) picture {
	t.Helper()
	resp, body := get(t, h, "/dashboard/pipeline", authorization)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /dashboard/pipeline: %d %s", resp.StatusCode, body)
	}
	var p picture
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return p
}

// TestPipelinePicture draws the pipeline of every delay backend with each
// hand-off, as the components emit their events for one copy that fails,
// waits and is delivered, and one parked as permanent: the boxes are the
// topology's, the wait one box with its queues' total, and each arrow
// carries the messages that took it.
func TestPipelinePicture(t *testing.T) {
	const (
		ingress = "notification-exchange"
		email   = "email-queue"
		sink    = "delivered:email-queue"
	)
	tests := []struct {
		backend retry.Backend
		handoff retry.Handoff
		// wantWait is the number of queues in the wait box; -1 for no box.
		wantWait    int
		wantRequeue bool
		// waitsIn is the box that holds a copy while it waits.
		waitsIn string
		// events are what the components emit, in order; after the
		// first waitAfter of them the copy waits.
		events    []retry.Outcome
		waitAfter int
		wantRates map[string]float64
	}{
		{
			backend: retry.Plugin, wantWait: 0, wantRequeue: true, waitsIn: "wait",
			events: []retry.Outcome{retry.Failed, retry.Retrying, retry.Requeued, retry.Delivered}, waitAfter: 2,
			wantRates: map[string]float64{
				ingress + ">" + email: 0.2, email + ">error-exchange": 0.1, "error-exchange>error-queue": 0.1,
				"error-queue>wait": 0.1, "wait>requeue-queue": 0.1, "requeue-queue>" + email: 0.1,
				email + ">" + sink: 0.1, email + ">dead-letter-exchange": 0.1, "dead-letter-exchange>dead-letter-queue": 0.1,
			},
		},
		{
			backend: retry.Plugin, handoff: retry.Direct, wantWait: 0, waitsIn: "wait",
			events: []retry.Outcome{retry.Failed, retry.Retrying, retry.Delivered}, waitAfter: 2,
			wantRates: map[string]float64{
				ingress + ">" + email: 0.2, email + ">wait": 0.1, "wait>" + email: 0.1,
				email + ">" + sink: 0.1, email + ">dead-letter-exchange": 0.1, "dead-letter-exchange>dead-letter-queue": 0.1,
			},
		},
		{
			backend: retry.TTL, wantWait: 3 + 32, wantRequeue: true, waitsIn: "wait",
			events: []retry.Outcome{retry.Failed, retry.Retrying, retry.Requeued, retry.Delivered}, waitAfter: 2,
			wantRates: map[string]float64{
				ingress + ">" + email: 0.2, email + ">error-exchange": 0.1, "error-exchange>error-queue": 0.1,
				"error-queue>wait": 0.1, "wait>requeue-queue": 0.1, "requeue-queue>" + email: 0.1,
				email + ">" + sink: 0.1, email + ">dead-letter-exchange": 0.1, "dead-letter-exchange>dead-letter-queue": 0.1,
			},
		},
		{
			// A wait queue per step and work queue, and the 32 levels for any other wait.
			backend: retry.TTL, handoff: retry.Direct, wantWait: 6 + 32, waitsIn: "wait",
			events: []retry.Outcome{retry.Failed, retry.Retrying, retry.Delivered}, waitAfter: 2,
			wantRates: map[string]float64{
				ingress + ">" + email: 0.2, email + ">wait": 0.1, "wait>" + email: 0.1,
				email + ">" + sink: 0.1, email + ">dead-letter-exchange": 0.1, "dead-letter-exchange>dead-letter-queue": 0.1,
			},
		},
		{
			backend: retry.Levels, wantWait: 32, wantRequeue: true, waitsIn: "wait",
			events: []retry.Outcome{retry.Failed, retry.Retrying, retry.Requeued, retry.Delivered}, waitAfter: 2,
			wantRates: map[string]float64{
				ingress + ">" + email: 0.2, email + ">error-exchange": 0.1, "error-exchange>error-queue": 0.1,
				"error-queue>wait": 0.1, "wait>requeue-queue": 0.1, "requeue-queue>" + email: 0.1,
				email + ">" + sink: 0.1, email + ">dead-letter-exchange": 0.1, "dead-letter-exchange>dead-letter-queue": 0.1,
			},
		},
		{
			backend: retry.Levels, handoff: retry.Direct, wantWait: 32, waitsIn: "wait",
			events: []retry.Outcome{retry.Failed, retry.Retrying, retry.Delivered}, waitAfter: 2,
			wantRates: map[string]float64{
				ingress + ">" + email: 0.2, email + ">wait": 0.1, "wait>" + email: 0.1,
				email + ">" + sink: 0.1, email + ">dead-letter-exchange": 0.1, "dead-letter-exchange>dead-letter-queue": 0.1,
			},
		},
		{
			// The broker holds the copy in its own queue; the levels hold a deferral.
			backend: retry.Native, wantWait: 32, waitsIn: email,
			events: []retry.Outcome{retry.Failed, retry.Retrying, retry.Delivered}, waitAfter: 2,
			wantRates: map[string]float64{
				ingress + ">" + email: 0.2, email + ">" + email: 0.1,
				email + ">" + sink: 0.1, email + ">dead-letter-exchange": 0.1, "dead-letter-exchange>dead-letter-queue": 0.1,
			},
		},
		{
			backend: retry.Native, handoff: retry.Direct, wantWait: 32, waitsIn: email,
			events: []retry.Outcome{retry.Failed, retry.Retrying, retry.Delivered}, waitAfter: 2,
			wantRates: map[string]float64{
				ingress + ">" + email: 0.2, email + ">" + email: 0.1,
				email + ">" + sink: 0.1, email + ">dead-letter-exchange": 0.1, "dead-letter-exchange>dead-letter-queue": 0.1,
			},
		},
	}
	for _, tt := range tests {
		handoff := "stages"
		if tt.handoff == retry.Direct {
			handoff = "direct"
		}
		t.Run(string(tt.backend)+"/"+handoff, func(t *testing.T) {
			topo := pipelineTopology(tt.backend, tt.handoff)
			if err := topo.Validate(); err != nil {
				t.Fatal(err)
			}
			p := NewPipeline(topo)
			now := t0
			p.now = func() time.Time { return now }
			h := New(Deps{Pipeline: p, Queues: everyQueueHolds(topo), Authenticate: authenticate})
			token := "Bearer " + goodToken

			pic := getPicture(t, h, token)
			if pic.Backend != string(tt.backend) || pic.Handoff != handoff {
				t.Errorf("backend, hand-off = %s, %s; want %s, %s", pic.Backend, pic.Handoff, tt.backend, handoff)
			}
			wait, hasWait := pic.node("wait")
			switch {
			case tt.wantWait < 0 && hasWait:
				t.Errorf("a wait box %+v; the %s backend waits inside the work queues", wait, tt.backend)
			case tt.wantWait >= 0 && !hasWait:
				t.Errorf("no wait box")
			case tt.wantWait == 0 && wait.Depth != nil:
				t.Errorf("wait depth %d, want none: the delayed exchange does not count its messages", *wait.Depth)
			case tt.wantWait > 0 && (len(wait.Queues) != tt.wantWait || wait.Depth == nil || *wait.Depth != tt.wantWait):
				t.Errorf("wait box holds %d queues, depth %v; want %d queues and their total, %d", len(wait.Queues), wait.Depth, tt.wantWait, tt.wantWait)
			}
			for _, n := range pic.Nodes {
				if strings.HasPrefix(n.ID, "wait.") || strings.HasPrefix(n.ID, "pic.") {
					t.Errorf("box %q: the wait's queues belong in its one box, names carry no prefix", n.ID)
				}
			}
			if _, ok := pic.node("requeue-queue"); ok != tt.wantRequeue {
				t.Errorf("requeue-queue drawn: %v, want %v", ok, tt.wantRequeue)
			}
			for _, id := range []string{ingress, email, "webhook-queue", "error-queue", "dead-letter-queue", sink} {
				n, ok := pic.node(id)
				switch {
				case !ok:
					t.Errorf("no box %q", id)
				case n.Kind == "queue" && (n.Depth == nil || *n.Depth != 1):
					t.Errorf("box %q depth %v, want 1", id, n.Depth)
				}
			}
			if r := pic.rates(); len(r) != 0 {
				t.Errorf("rates before any event: %v", r)
			}

			send := func(id string, o retry.Outcome, attempt int, reason string) {
				e := notification.Event{Type: events.TypeAttempt, Outcome: o, ID: id, Channel: "email", Queue: topo.Name(email),
					Attempt: attempt, Reason: reason, At: now}
				if o == retry.Retrying {
					e.DelayMS = 1000
				}
				p.Observe(e)
			}
			attempt := 1
			for i, o := range tt.events {
				if i == tt.waitAfter {
					pic := getPicture(t, h, token)
					if n, _ := pic.node(tt.waitsIn); n.Waiting != 1 {
						t.Errorf("after %v, box %q shows %d copies waiting, want 1", tt.events[:i], tt.waitsIn, n.Waiting)
					}
					now = now.Add(time.Second)
					attempt++
				}
				send("ntf_a", o, attempt, "")
			}
			send("ntf_b", retry.Parked, 1, retry.ReasonPermanent)

			pic = getPicture(t, h, token)
			if diff := cmp.Diff(tt.wantRates, pic.rates()); diff != "" {
				t.Errorf("rates (-want +got):\n%s", diff)
			}
			if n, _ := pic.node(tt.waitsIn); n.Waiting != 0 {
				t.Errorf("box %q shows %d copies waiting after the delivery, want 0", tt.waitsIn, n.Waiting)
			}

			now = now.Add(RateWindow)
			if r := getPicture(t, h, token).rates(); len(r) != 0 {
				t.Errorf("rates %s after the last event: %v, want none", RateWindow, r)
			}
		})
	}
}

// TestPipelineWaitEnds stops counting a copy as waiting once its wait is
// over, though its next event never came.
func TestPipelineWaitEnds(t *testing.T) {
	topo := pipelineTopology(retry.Levels, retry.ViaStages)
	p := NewPipeline(topo)
	now := t0
	p.now = func() time.Time { return now }
	p.Observe(notification.Event{Outcome: retry.Retrying, ID: "ntf_a", Queue: topo.Name("email-queue"), Attempt: 1, DelayMS: 5000, At: t0})
	h := New(Deps{Pipeline: p, Authenticate: authenticate})
	for _, tt := range []struct {
		after time.Duration
		want  int
	}{{0, 1}, {5 * time.Second, 1}, {5*time.Second + waitGrace + time.Millisecond, 0}} {
		now = t0.Add(tt.after)
		pic := getPicture(t, h, "Bearer "+goodToken)
		if n, _ := pic.node("wait"); n.Waiting != tt.want {
			t.Errorf("%s after a wait of 5s was scheduled: %d waiting, want %d", tt.after, n.Waiting, tt.want)
		}
		if n, _ := pic.node("email-queue"); n.Depth != nil {
			t.Errorf("email-queue depth %d without a source of depths, want none", *n.Depth)
		}
	}
}

// TestPipelinePublic shows a visitor without a token the picture, but not
// why the depths are missing.
func TestPipelinePublic(t *testing.T) {
	topo := pipelineTopology(retry.Plugin, retry.ViaStages)
	failing := func(context.Context) (map[string]int, error) {
		return nil, errors.New("dial amqp://relay:" + secretPayload + "@rabbit: refused")
	}
	h := New(Deps{Pipeline: NewPipeline(topo), Queues: failing, Authenticate: authenticate, Public: true})
	pic := getPicture(t, h, "")
	if pic.DepthsError != "queue depths unavailable" {
		t.Errorf("depths error %q, want the bare words", pic.DepthsError)
	}
	if n, ok := pic.node("email-queue"); !ok || n.Depth != nil {
		t.Errorf("email-queue %+v, want the box without a depth", n)
	}
	if resp, _ := get(t, New(Deps{Pipeline: NewPipeline(topo), Authenticate: authenticate}), "/dashboard/pipeline", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("private dashboard without a token: %d, want 401", resp.StatusCode)
	}
	if resp, _ := get(t, New(Deps{Authenticate: authenticate}), "/dashboard/pipeline", "Bearer "+goodToken); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("without a pipeline: %d, want 503", resp.StatusCode)
	}
}

// TestDrawScript keeps the pictures' script within the page's
// Content-Security-Policy and its elements on the page.
func TestDrawScript(t *testing.T) {
	page, err := static.ReadFile("static/index.html")
	if err != nil {
		t.Fatal(err)
	}
	script, err := static.ReadFile("static/draw.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<script src="/static/draw.js" defer>`, `<link rel="stylesheet" href="/static/draw.css">`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("index.html lacks %s", want)
		}
	}
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", `"style"`, ".style."} {
		if strings.Contains(string(script), bad) {
			t.Errorf("draw.js uses %s", bad)
		}
	}
	ids := map[string]bool{}
	for _, m := range regexp.MustCompile(`\sid="([^"]+)"`).FindAllSubmatch(page, -1) {
		ids[string(m[1])] = true
	}
	uses := regexp.MustCompile(`\$\("([^"]+)"\)`).FindAllSubmatch(script, -1)
	if len(uses) == 0 {
		t.Fatal(`draw.js looks up no element with $("…")`)
	}
	for _, m := range uses {
		if !ids[string(m[1])] {
			t.Errorf(`draw.js looks up $(%q), which index.html does not have`, m[1])
		}
	}
	for _, path := range []string{"/static/draw.js", "/static/draw.css"} {
		if resp, _ := get(t, New(Deps{}), path, ""); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", path, resp.StatusCode)
		}
	}
}

// durable is the queue type that keeps most of what backend b waits:
// quorum, where b runs with it.
func durable(b retry.Backend) retry.QueueType {
	f, _ := retry.FeaturesOf(b)
	return f.Durable()
}

// TestQueuesBacklog reads the backlog the workers' events tell, by work
// queue for everyone, and by endpoint only with a token.
func TestQueuesBacklog(t *testing.T) {
	topo := pipelineTopology(retry.Levels, retry.ViaStages)
	p := NewPipeline(topo)
	now := t0
	p.now = func() time.Time { return now }
	waited := func(ms int64) *int64 { return &ms }
	const ep = "ep_aaaaaaaaaaaaaaaaaaaaaaaaaa"
	p.Observe(notification.Event{Outcome: retry.Delivered, ID: "ntf_a", Channel: "webhook", Target: ep,
		Queue: topo.Name("webhook-queue"), Attempt: 1, At: t0, AgeMS: 90_000, WaitedMS: waited(42_500)})
	p.Observe(notification.Event{Outcome: retry.Delivered, ID: "ntf_b", Channel: "webhook", Target: "https://example.com/hook",
		Queue: topo.Name("webhook-queue"), Attempt: 1, At: t0, WaitedMS: waited(42_500)})
	// Tenant acme's endpoint: only acme's viewers and operators see it.
	const acmeEP = "ep_bbbbbbbbbbbbbbbbbbbbbbbbbb"
	p.Observe(notification.Event{Outcome: retry.Delivered, ID: "ntf_c", Channel: "webhook", Target: acmeEP, Tenant: "acme",
		Queue: topo.Name("webhook-queue"), Attempt: 1, At: t0.Add(-time.Millisecond), AgeMS: 30_000, WaitedMS: waited(1_000)})
	depths := func(context.Context) (map[string]int, error) { return map[string]int{"webhook-queue": 7}, nil }
	h := New(Deps{Pipeline: p, Queues: depths, Authenticate: authenticate, Public: true})
	tests := []struct {
		name          string
		after         time.Duration
		authorization string
		want          string
	}{
		{"an operator", time.Second, "Bearer " + goodToken,
			`{"backlog_seconds":{"webhook-queue":42.5},"endpoint_backlog_seconds":{"` + ep + `":90,"` + acmeEP + `":30},"queues":{"webhook-queue":7}}`},
		{"the default tenant's token", time.Second, "Bearer " + defaultToken,
			`{"backlog_seconds":{"webhook-queue":42.5},"endpoint_backlog_seconds":{"` + ep + `":90},"queues":{"webhook-queue":7}}`},
		{"acme's token", time.Second, "Bearer " + acmeToken,
			`{"backlog_seconds":{"webhook-queue":42.5},"endpoint_backlog_seconds":{"` + acmeEP + `":30},"queues":{"webhook-queue":7}}`},
		{"public", time.Second, "", `{"backlog_seconds":{"webhook-queue":42.5},"queues":{"webhook-queue":7}}`},
		{"idle", events.BacklogIdle + time.Second, "Bearer " + goodToken,
			`{"backlog_seconds":{"webhook-queue":0},"endpoint_backlog_seconds":{},"queues":{"webhook-queue":7}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now = t0.Add(tt.after)
			resp, body := get(t, h, "/dashboard/queues", tt.authorization)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /dashboard/queues = %d %s", resp.StatusCode, body)
			}
			if got := strings.TrimSpace(body); got != tt.want {
				t.Errorf("GET /dashboard/queues = %s, want %s", got, tt.want)
			}
		})
	}
}
