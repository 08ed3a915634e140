package retry

import (
	"context"
	"sync"
	"sync/atomic"
)

// flowKey is the context key of a publish's flow.
type flowKey struct{}

// flows numbers the flows NewFlow makes.
var flows atomic.Uint64

// NewFlow returns ctx carrying a flow of its own: every publish made
// with it, or with a context derived from it, takes its turn in a
// Producer's window as one flow (see ProducerConfig.Window). An HTTP API
// makes one per request, so that a batch of thousands is one flow, and a
// single notification posted beside it is another, served in turn with
// it rather than after it. A publish whose context carries no flow is a
// flow of its own.
func NewFlow(ctx context.Context) context.Context {
	return context.WithValue(ctx, flowKey{}, flows.Add(1))
}

// flowOf is ctx's flow, or a new one.
func flowOf(ctx context.Context) uint64 {
	if f, ok := ctx.Value(flowKey{}).(uint64); ok {
		return f
	}
	return flows.Add(1)
}

// window bounds the messages in flight, unconfirmed, of a Producer, and
// hands the room that frees up to the flows waiting for it in turn: one
// call from each flow, then again from the first, so that a flow with
// thousands of calls waiting holds any other's call back by at most one
// call per flow, not by all of its own. The broker confirms a channel's
// messages in the order it took them, and a quorum queue's in the order
// its log wrote them: what is in flight ahead of a message is what it
// waits for. The window keeps that short, and the turns keep one flow
// from filling it.
type window struct {
	size int

	mu   sync.Mutex
	free int
	// waiting are the flows with calls waiting, in turn order; each
	// flow's calls in the order they came.
	waiting []*flowQueue
	byFlow  map[uint64]*flowQueue
}

type flowQueue struct {
	flow  uint64
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
	return &window{size: size, free: size, byFlow: map[uint64]*flowQueue{}}
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
	flow := flowOf(ctx)
	q := w.byFlow[flow]
	if q == nil {
		q = &flowQueue{flow: flow}
		w.byFlow[flow] = q
		w.waiting = append(w.waiting, q)
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
			w.grant()
		} else {
			w.drop(q, c)
		}
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

// grant gives the free room to the waiting calls, the first call of the
// first flow in turn, which then goes to the back of the line. w.mu is
// held.
func (w *window) grant() {
	for len(w.waiting) > 0 {
		q := w.waiting[0]
		c := q.calls[0]
		if c.n > w.free {
			return
		}
		w.free -= c.n
		c.done = true
		close(c.granted)
		q.calls = q.calls[1:]
		w.waiting = w.waiting[1:]
		if len(q.calls) > 0 {
			w.waiting = append(w.waiting, q)
		} else {
			delete(w.byFlow, q.flow)
		}
	}
}

// drop takes c, which gave up before its turn, out of q. w.mu is held.
func (w *window) drop(q *flowQueue, c *waiter) {
	for i, x := range q.calls {
		if x == c {
			q.calls = append(q.calls[:i], q.calls[i+1:]...)
			break
		}
	}
	if len(q.calls) == 0 {
		delete(w.byFlow, q.flow)
		for i, x := range w.waiting {
			if x == q {
				w.waiting = append(w.waiting[:i], w.waiting[i+1:]...)
				break
			}
		}
	}
	// The call now first may fit where this one did not.
	w.grant()
}
