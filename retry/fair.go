package retry

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
)

// flowKey is the context key of a publish's flow.
type flowKey struct{}

// flow is one stream of publishes (an HTTP request's, say) and the party
// it publishes for (the request's client).
type flow struct {
	id    uint64
	owner string
}

// flows numbers the flows NewFlow makes.
var flows atomic.Uint64

// NewFlow returns ctx carrying a flow of its own, for owner: every
// publish made with it, or with a context derived from it, takes its turn
// in a Producer's window as part of that flow (see
// ProducerConfig.Window). The window takes the owners waiting in turn,
// and each owner's flows in turn, one call each time: an owner with many
// flows gets no more turns than an owner with one, and a flow with
// thousands of calls waiting holds its owner's other flows back by one
// call at a time. An HTTP API makes a flow per request, owned by the
// request's client: a batch of thousands is one flow, and a single
// notification the same client posts beside it is another, served in
// turn with it rather than after it. A publish whose context carries no
// flow is a flow, and an owner, of its own.
func NewFlow(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, flowKey{}, flow{id: flows.Add(1), owner: owner})
}

// flowOf is ctx's flow, or a new one with an owner of its own: a name
// no caller of NewFlow can give, as it holds a NUL byte and a number.
func flowOf(ctx context.Context) flow {
	if f, ok := ctx.Value(flowKey{}).(flow); ok {
		return f
	}
	id := flows.Add(1)
	return flow{id: id, owner: "\x00" + strconv.FormatUint(id, 10)}
}

// window bounds the messages in flight, unconfirmed, of a Producer, and
// hands the room that frees up to the calls waiting for it in turn (see
// NewFlow). The broker confirms a channel's messages in the order it took
// them, and a quorum queue's in the order its log wrote them: what is in
// flight ahead of a message is what it waits for. The window keeps that
// short, and the turns keep one flow from filling it.
type window struct {
	size int

	mu   sync.Mutex
	free int
	// waiting are the owners with calls waiting, in turn order; each
	// owner's flows in turn order; each flow's calls in the order they
	// came.
	waiting []*ownerQueue
	owners  map[string]*ownerQueue
}

type ownerQueue struct {
	owner string
	flows []*flowQueue
}

type flowQueue struct {
	id    uint64
	calls []*waiter
}

// waiter is one call waiting for room for n messages.
type waiter struct {
	n       int
	granted chan struct{}
	// done is set under window.mu once the call has its room: a call
	// that gives up after that hands it back.
	done bool
}

func newWindow(size int) *window {
	return &window{size: size, free: size, owners: map[string]*ownerQueue{}}
}

// acquire waits for room for n messages of ctx's flow (n is cut to what
// the window holds, so a call larger than it still goes, alone), and
// returns the room it holds, to hand back with release; or ctx's error.
func (w *window) acquire(ctx context.Context, n int) (int, error) {
	n = min(max(n, 1), w.size)
	w.mu.Lock()
	if len(w.waiting) == 0 && w.free >= n {
		w.free -= n
		w.mu.Unlock()
		return n, nil
	}
	f := flowOf(ctx)
	o := w.owners[f.owner]
	if o == nil {
		o = &ownerQueue{owner: f.owner}
		w.owners[f.owner] = o
		w.waiting = append(w.waiting, o)
	}
	var q *flowQueue
	for _, x := range o.flows {
		if x.id == f.id {
			q = x
			break
		}
	}
	if q == nil {
		q = &flowQueue{id: f.id}
		o.flows = append(o.flows, q)
	}
	c := &waiter{n: n, granted: make(chan struct{})}
	q.calls = append(q.calls, c)
	w.grant()
	w.mu.Unlock()
	select {
	case <-c.granted:
		return n, nil
	case <-ctx.Done():
		w.mu.Lock()
		defer w.mu.Unlock()
		if c.done {
			w.free += n
		} else {
			w.drop(o, q, c)
		}
		w.grant()
		return 0, ctx.Err()
	}
}

// release hands back room for n messages.
func (w *window) release(n int) {
	if n <= 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.free += n
	w.grant()
}

// grant gives the free room to the waiting calls: the first call of the
// first flow of the first owner, whose flow then goes to the back of the
// owner's line, and the owner to the back of the window's. w.mu is held.
func (w *window) grant() {
	for len(w.waiting) > 0 {
		o := w.waiting[0]
		q := o.flows[0]
		c := q.calls[0]
		if c.n > w.free {
			return
		}
		w.free -= c.n
		c.done = true
		close(c.granted)
		q.calls = q.calls[1:]
		o.flows = o.flows[1:]
		if len(q.calls) > 0 {
			o.flows = append(o.flows, q)
		}
		w.waiting = w.waiting[1:]
		if len(o.flows) > 0 {
			w.waiting = append(w.waiting, o)
		} else {
			delete(w.owners, o.owner)
		}
	}
}

// drop takes c, which gave up before its turn, out of its flow q of owner
// o, and each out of its line once empty. w.mu is held.
func (w *window) drop(o *ownerQueue, q *flowQueue, c *waiter) {
	q.calls = remove(q.calls, c)
	if len(q.calls) == 0 {
		o.flows = remove(o.flows, q)
	}
	if len(o.flows) == 0 {
		w.waiting = remove(w.waiting, o)
		delete(w.owners, o.owner)
	}
}

// remove is s without x.
func remove[T comparable](s []T, x T) []T {
	for i, y := range s {
		if y == x {
			return append(s[:i], s[i+1:]...)
		}
	}
	return s
}
