package retry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"
)

// HeldAfter is how long a quorum queue may hold dead-lettered messages it
// has not forwarded, without that number going down, before the stages
// log it as an error. The broker's own dead-letter worker sends again
// what it has no confirm for, or found no route for, every
// dead_letter_worker_publisher_confirm_timeout (3 minutes by default): a
// worker that starts with the broker, before the broker routes again,
// holds what expired meanwhile that long. Past four minutes it has
// stopped, or its messages still have no route.
const HeldAfter = 4 * time.Minute

// heldEvery is how often the stages read the counts.
const heldEvery = 30 * time.Second

// QueueCounts are a queue's message counts as the management API reports
// them (refreshed by the broker every few seconds).
type QueueCounts struct {
	Messages int    `json:"messages"`
	Ready    int    `json:"messages_ready"`
	Unacked  int    `json:"messages_unacknowledged"`
	Leader   string `json:"leader"`
}

// Held is how many of the queue's messages are neither ready nor
// unacknowledged: in a quorum queue with at-least-once dead-lettering, the
// messages it dead-lettered whose forwarding has not been confirmed yet.
func (c QueueCounts) Held() int { return max(c.Messages-c.Ready-c.Unacked, 0) }

// Counts reads queue's message counts from the management API.
func (m *Management) Counts(ctx context.Context, queue string) (QueueCounts, error) {
	var c QueueCounts
	if err := m.do(ctx, http.MethodGet, "/api/queues/"+url.PathEscape(m.vhost())+"/"+url.PathEscape(queue), nil, &c); err != nil {
		return QueueCounts{}, fmt.Errorf("counts of %q over the management API: %w", queue, err)
	}
	return c, nil
}

// deadLettering lists the topology's queues that dead-letter at least
// once: on quorum queues, the work queues and the TTL wait queues.
func (t Topology) deadLettering() []string {
	var out []string
	for _, q := range t.Plan().Queues {
		if q.Args["x-dead-letter-strategy"] == "at-least-once" {
			out = append(out, q.Name)
		}
	}
	return out
}

// heldWatch notices a quorum queue whose at-least-once dead-letter worker
// has stopped. RabbitMQ 3.10's worker can stop around a leader election
// and not come back; the queue then keeps what it dead-lettered (failures
// nacked from a work queue, waits that expired) safely, counted but
// neither ready nor unacknowledged, and forwards none of it until its next
// leader starts a worker. Nothing is lost, but those retries stall. relay
// cannot restart the broker's worker: it says so, with the remedy.
type heldWatch struct {
	queues []string
	counts func(ctx context.Context, queue string) (QueueCounts, error)
	after  time.Duration
	log    *slog.Logger
	// since is, per queue holding messages, when it was first seen
	// holding them without the number going down since, and that number.
	since map[string]held
	// failing is whether the last read failed: logged once per outage.
	failing bool
	// otherCluster, if set, is called when the management API turns
	// out to be another cluster's (ErrOtherCluster); the watch then ends.
	otherCluster func()
	// off is set once it has.
	off bool
}

type held struct {
	at     time.Time
	n      int
	logged time.Time
}

// check reads every queue's counts once and logs each queue that has held
// messages for after or longer without the number going down (again every
// after while it lasts). It returns those queues.
func (w *heldWatch) check(ctx context.Context, now time.Time) []string {
	if w.since == nil {
		w.since = map[string]held{}
	}
	var stalled []string
	for _, q := range w.queues {
		c, err := w.counts(ctx, q)
		if errors.Is(err, ErrOtherCluster) {
			w.off = true
			if w.otherCluster != nil {
				w.otherCluster()
			}
			return stalled
		}
		if err != nil {
			if ctx.Err() == nil && !w.failing {
				w.log.Warn("cannot read the queues' counts to watch for dead letters the broker holds; trying again every "+heldEvery.String(), "error", err.Error())
			}
			w.failing = true
			return stalled
		}
		w.failing = false
		n := c.Held()
		s, seen := w.since[q]
		switch {
		case n == 0:
			delete(w.since, q)
			continue
		case !seen || n < s.n:
			w.since[q] = held{at: now, n: n}
			continue
		}
		if now.Sub(s.at) < w.after || now.Sub(s.logged) < w.after {
			continue
		}
		s.logged = now
		w.since[q] = s
		stalled = append(stalled, q)
		leader := c.Leader
		if leader == "" {
			leader = "NODE"
		}
		w.log.Error("a quorum queue holds dead-lettered messages it does not forward: the broker's at-least-once dead-letter worker for it has stopped "+
			"(RabbitMQ 3.10 can lose it in a leader election), or finds no route for them (a binding of the topology deleted). Nothing is lost; "+
			"declare the topology again (start relay) if a binding is gone, then move the queue's leader to start a new worker: "+
			fmt.Sprintf("rabbitmq-queues delete_member %s %s, then rabbitmq-queues add_member %s %s", q, leader, q, leader),
			"queue", q, "held", n, "for", now.Sub(s.at).Round(time.Second).String(), "leader", c.Leader)
	}
	return stalled
}

// run checks every heldEvery until ctx is done.
func (w *heldWatch) run(ctx context.Context) {
	tk := time.NewTicker(heldEvery)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tk.C:
			if w.check(ctx, now); w.off {
				return
			}
		}
	}
}
