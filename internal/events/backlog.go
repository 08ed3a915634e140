package events

import (
	"sync"
	"time"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/notification"
)

// BacklogIdle is how long a backlog figure stands without a newer message
// taken from its queue or for its endpoint: past it, a queue's figure is
// 0 and an endpoint's is dropped.
const BacklogIdle = 30 * time.Second

// maxBacklogEndpoints bounds the endpoints a Backlog follows at once.
const maxBacklogEndpoints = 10_000

// Backlog follows how far behind each work queue, and each registered
// webhook endpoint, is. A queue's figure is how long the message a worker
// took last had been ready in it when the worker received it
// (retry.Event.Waited): taken in order from the head of the queue, that is
// the age of the oldest ready message at that moment. An endpoint's is how
// old the copy for it a worker took last was (since it was published, or
// fell due): its copies also wait apart from the queue, in the delay
// backend, while the endpoint's circuit is open, its limits hold them or
// they are retried, and that wait is the endpoint's own. Backlog is fed
// with the workers' events, the only ones that carry a wait
// (notification.Event.WaitedMS).
//
// A queue nobody takes from tells nothing: the figure stands for
// BacklogIdle after the last take and then falls to 0, as an emptied queue
// does. A stuck consumer therefore reads 0 too; the queue's depth tells
// the two apart.
type Backlog struct {
	idle time.Duration

	mu        sync.Mutex
	queues    map[string]take
	endpoints map[string]take
}

// take is one message taken: how far behind it found its queue or
// endpoint, and when.
type take struct {
	behind time.Duration
	at     time.Time
	// tenant is, for an endpoint, the tenant of the copy taken for it
	// ("" for the default tenant): a tenant is shown the figures its own
	// copies made, never another's.
	tenant string
}

// NewBacklog returns a Backlog whose figures stand for idle (BacklogIdle
// when zero).
func NewBacklog(idle time.Duration) *Backlog {
	if idle <= 0 {
		idle = BacklogIdle
	}
	return &Backlog{idle: idle, queues: map[string]take{}, endpoints: map[string]take{}}
}

// Observe records ev when it is a worker's take with a known wait. Events
// arrive out of order from concurrent handlers: the latest take wins.
func (b *Backlog) Observe(ev notification.Event) {
	if ev.WaitedMS == nil || ev.Queue == "" {
		return
	}
	t := take{behind: time.Duration(max(*ev.WaitedMS, 0)) * time.Millisecond,
		at: ev.At.Add(-time.Duration(ev.DurationMS) * time.Millisecond)}
	b.mu.Lock()
	defer b.mu.Unlock()
	if old, ok := b.queues[ev.Queue]; !ok || !t.at.Before(old.at) {
		b.queues[ev.Queue] = t
	}
	if !channel.IsEndpointID(ev.Target) {
		// A bare URL, or no endpoint: only registered endpoints are
		// followed, so the figures stay as few as they are.
		return
	}
	old, ok := b.endpoints[ev.Target]
	// The copy's age when it was taken: its age at the decision, less
	// the attempt.
	t.behind = time.Duration(max(ev.AgeMS-ev.DurationMS, 0)) * time.Millisecond
	t.tenant = ev.Tenant
	if !ok && len(b.endpoints) >= maxBacklogEndpoints {
		b.forget(t.at)
		if len(b.endpoints) >= maxBacklogEndpoints {
			return
		}
	}
	if !ok || !t.at.Before(old.at) {
		b.endpoints[ev.Target] = t
	}
}

// forget drops the endpoints idle at now. b.mu is held.
func (b *Backlog) forget(now time.Time) {
	for id, t := range b.endpoints {
		if now.Sub(t.at) > b.idle {
			delete(b.endpoints, id)
		}
	}
}

// Queues returns, at now, the backlog in seconds of each queue a worker
// took a message from, by the queue's name as the events give it: 0 for a
// queue idle for longer than the figure stands.
func (b *Backlog) Queues(now time.Time) map[string]float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]float64, len(b.queues))
	for q, t := range b.queues {
		out[q] = 0
		if now.Sub(t.at) <= b.idle {
			out[q] = t.behind.Seconds()
		}
	}
	return out
}

// Endpoints returns, at now, the age in seconds of the copy taken last for
// each registered endpoint a worker took one for within the time a figure
// stands; the others are forgotten.
func (b *Backlog) Endpoints(now time.Time) map[string]float64 {
	return b.EndpointsOf(now, nil)
}

// EndpointsOf is Endpoints for the figures whose copy, the one taken last
// for its endpoint, belongs to a tenant sees keeps ("" for the default
// tenant); nil keeps every tenant's.
func (b *Backlog) EndpointsOf(now time.Time, sees func(tenant string) bool) map[string]float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.forget(now)
	out := make(map[string]float64, len(b.endpoints))
	for id, t := range b.endpoints {
		if sees == nil || sees(t.tenant) {
			out[id] = t.behind.Seconds()
		}
	}
	return out
}
