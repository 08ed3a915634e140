//go:build cluster

package cluster_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/relay-demo/relay/retry"
)

// notifications is how many notifications the test posts, each with an
// email and a webhook copy.
const notifications = 5000

// rate is how many notifications the clients post a second: at this
// pace, the load spans the three scenarios, and two cores keep up.
const rate = 30

// reserve is the share of the notifications held back until the last
// scenario is over, so that it runs under load to its end.
const reserve = 10

// down is how long a killed node stays down before it is started again.
const down = 5 * time.Second

// scenario is one fault the test puts the cluster through.
type scenario struct {
	name   string
	start  time.Time
	detail string
	// quiet, when set, is when the load paused during the scenario.
	quiet time.Time
	took  time.Duration // until the cluster was whole again
}

// TestCluster runs relay on a three-node cluster while nodes are killed
// and restarted, and checks that every accepted copy ends delivered or
// parked (see the package's documentation).
func TestCluster(tt *testing.T) {
	t := &tee{T: tt}
	began := time.Now()
	before := readDefault()
	// Registered first, so it runs last: after every node of the test
	// is gone. The test's last lines are why it failed, if it did.
	t.Cleanup(func() {
		defer t.summary()
		after := readDefault()
		if !before.same(after) {
			t.Errorf("the default broker changed: before %s, after %s", before, after)
			return
		}
		t.Logf("the default broker is as it was: before %s; after %s", before, after)
	})

	c := startCluster(t, 3)
	r := newRig(t, c, 0.3)
	r.startRelay()
	work := r.workQueues()
	wait := r.waitQueues()

	l := r.send(notifications, notifications*(100-reserve)/100, 8, rate, 8*time.Minute)
	// Each scenario starts after a stretch of steady traffic: 5 % of the
	// notifications, accepted since the one before ended.
	steady := func() {
		t.Helper()
		r.waitAccepted(l, int(l.count.Load())+notifications*5/100, 3*time.Minute)
	}
	var scenarios []*scenario
	steady()
	scenarios = append(scenarios, r.killLeader("kill -9 the work-queue leader", "work", work))
	steady()
	if len(wait) > 0 {
		scenarios = append(scenarios, r.killLeader("kill -9 the wait-queue leader", "wait", wait))
	} else {
		// The native backend waits in the work queues themselves: the
		// stage queue it has, error-queue, takes the second kill.
		scenarios = append(scenarios, r.killLeader("kill -9 the error-queue leader", "error", []string{r.topo.Name(retry.ErrorQueue)}))
	}
	steady()
	scenarios = append(scenarios, r.rollingRestart())
	if at, held := l.heldSince(); held {
		// The API then accepts nothing: the stall measured ends there.
		scenarios[len(scenarios)-1].quiet = at
		t.Logf("the load reached its last %d %% before the rolling restart was over, and waited for it %s", reserve, time.Since(at).Round(100*time.Millisecond))
	}
	l.open()
	r.finish(l, 5*time.Minute)
	settleStart := time.Now()
	o := r.settle(l, 3*time.Minute)
	if n, early := r.early(l, o); n > 0 && early == 0 {
		t.Logf("%d scheduled notifications waited through the faults: none went out early", n)
	}
	r.report(l, o, scenarios, time.Since(settleStart), time.Since(began))
}

// workQueues are the names of the topology's work queues.
func (r *rig) workQueues() []string {
	var out []string
	for _, rt := range r.topo.WorkRoutes() {
		out = append(out, rt.Queue)
	}
	return out
}

// waitQueues are the names of the TTL backend's wait queues; none for the
// native backend.
func (r *rig) waitQueues() []string {
	if r.topo.Backend == retry.Native {
		return nil
	}
	var out []string
	for _, d := range r.topo.Policy.Delays {
		if q := r.topo.WaitQueue(d); !slices.Contains(out, q) {
			out = append(out, q)
		}
	}
	return out
}

// killLeader kills with SIGKILL the node that leads the most of queues,
// keeps it down for a while, starts it again and waits until it is back
// in the cluster.
func (r *rig) killLeader(name, kind string, queues []string) *scenario {
	r.t.Helper()
	n, k, err := r.c.leading(r.prefix, queues)
	if err != nil {
		r.t.Fatal(err)
	}
	s := &scenario{name: name, start: time.Now()}
	if err := n.kill(); err != nil {
		r.t.Fatal(err)
	}
	r.t.Logf("%s: killed %s (pid %d), which led %d of %d %s queues", name, n.name, n.pid, k, len(queues), kind)
	hold(down)
	if err := n.start(); err != nil {
		r.t.Fatal(err)
	}
	if err := n.waitUp(2 * time.Minute); err != nil {
		r.t.Fatal(err)
	}
	if err := r.c.waitWhole(2 * time.Minute); err != nil {
		r.t.Fatal(err)
	}
	s.took = time.Since(s.start)
	s.detail = fmt.Sprintf("%s led %d/%d %s queues; down %s, whole again after %s", n.short(), k, len(queues), kind, down, s.took.Round(100*time.Millisecond))
	r.t.Logf("%s: %s", name, s.detail)
	return s
}

// rollingRestart stops and starts each node in turn, gracefully, each
// once no quorum queue needs it for its majority, as an upgrade would.
func (r *rig) rollingRestart() *scenario {
	r.t.Helper()
	s := &scenario{name: "rolling restart", start: time.Now()}
	var steps []string
	for _, n := range r.c.nodes {
		if err := r.c.waitNotCritical(n, 2*time.Minute); err != nil {
			r.t.Fatal(err)
		}
		at := time.Now()
		if err := r.c.restart(n.name); err != nil {
			r.t.Fatal(err)
		}
		step := time.Since(at).Round(100 * time.Millisecond)
		steps = append(steps, fmt.Sprintf("%s %s", n.short(), step))
		r.t.Logf("rolling restart: %s stopped and back in the cluster after %s", n.name, step)
	}
	s.took = time.Since(s.start)
	s.detail = fmt.Sprintf("each node stopped and started (%s); %s in all", strings.Join(steps, ", "), s.took.Round(100*time.Millisecond))
	return s
}

// hold keeps a fault in place for d.
func hold(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	<-t.C
}

// recovery is the longest the pipeline stalled while the scenario's
// fault lasted, from its start until the cluster was whole again: the
// longest time in which the API accepted no notification, or a channel
// delivered no copy, the stretch from the fault's start to the first
// such event included. Under a steady load, events come every few tens of
// milliseconds; a stall is how long clients, or a channel, waited for
// relay to find a live node and the queues a new leader.
func recovery(s *scenario, accepted map[string]time.Time, o outcome) time.Duration {
	end := s.start.Add(s.took)
	if !s.quiet.IsZero() && s.quiet.Before(end) {
		end = s.quiet
	}
	series := map[string][]time.Time{}
	for _, at := range accepted {
		series["api"] = append(series["api"], at)
	}
	for k, at := range o.delivered {
		series[k.channel] = append(series[k.channel], at)
	}
	var worst time.Duration
	for _, ts := range series {
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		prev := s.start
		for _, at := range ts {
			if at.Before(s.start) {
				continue
			}
			if at.After(end) {
				break
			}
			worst = max(worst, at.Sub(prev))
			prev = at
		}
		worst = max(worst, end.Sub(prev))
	}
	return worst
}

// report prints the figures of each scenario and in total, and fails the
// test if any accepted copy was lost. A scenario counts the notifications
// accepted from its start until the next one's; the first also counts
// those accepted before it.
func (r *rig) report(l *load, o outcome, scenarios []*scenario, settled, total time.Duration) {
	r.t.Helper()
	l.mu.Lock()
	accepted := make(map[string]time.Time, len(l.accepted))
	for id, at := range l.accepted {
		accepted[id] = at
	}
	l.mu.Unlock()
	ids := make([][]string, len(scenarios))
	for id, at := range accepted {
		k := 0
		for k+1 < len(scenarios) && !at.Before(scenarios[k+1].start) {
			k++
		}
		ids[k] = append(ids[k], id)
	}
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "scenario\taccepted\tdelivered\tparked\tlost\tduplicates\ttime to recover\t")
	var all []string
	for k, s := range scenarios {
		slices.Sort(ids[k])
		all = append(all, ids[k]...)
		t := o.count(ids[k])
		rec := recovery(s, accepted, o).Round(10 * time.Millisecond)
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t\n", s.name, t.accepted, t.delivered, t.parked, t.lost, t.duplicates, rec)
		r.lost(s.name, t)
	}
	t := o.count(all)
	fmt.Fprintf(w, "total\t%d\t%d\t%d\t%d\t%d\t\t\n", t.accepted, t.delivered, t.parked, t.lost, t.duplicates)
	w.Flush()
	r.t.Logf("copies (an email and a webhook per notification) of %d notifications, %d a second, 30%% of attempts failing, delay backend %s:\n%s",
		notifications, rate, r.topo.Backend, b.String())
	for _, s := range scenarios {
		r.t.Logf("%s: %s", s.name, s.detail)
	}
	r.t.Logf("sent: %d answers 503, %d requests unanswered; settled %s after the last notification was accepted",
		l.unavailable.Load(), l.unanswered.Load(), settled.Round(100*time.Millisecond))
	for _, x := range r.released {
		r.t.Logf("broker: %s", x)
	}
	r.t.Logf("cluster test: %s, lost %d, in %s; dead-letter workers restarted by moving a leader: %d", t, t.lost, total.Round(time.Second), len(r.released))
}

// lost fails the test for lost copies, naming a few.
func (r *rig) lost(name string, t tally) {
	if t.lost == 0 {
		return
	}
	rep := r.down.Stats().Report()
	for _, k := range t.missing[:min(len(t.missing), 10)] {
		at := rep.Email.Attempts[k.id]
		if k.channel == "webhook" {
			at = rep.Webhook.Attempts[k.id]
		}
		r.t.Logf("lost: %s copy of %s, %d attempts seen downstream", k.channel, k.id, len(at))
	}
	qs, _ := r.c.queues(r.prefix)
	r.t.Errorf("%s: %d of %d accepted copies were neither delivered nor parked; queues: %v", name, t.lost, t.accepted, qs)
}
