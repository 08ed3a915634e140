package dashboard

import (
	"context"
	"sync"

	"github.com/relay-demo/relay/services/events"
)

// DefaultKeep is how many recent events a Hub keeps when NewHub is given
// zero or less.
const DefaultKeep = 2000

// subscriberBuffer is each subscriber's backlog; a subscriber further
// behind than that misses events.
const subscriberBuffer = 512

// Hub broadcasts events to subscribers and keeps the most recent ones for
// subscribers that join later. Publishing never waits for a subscriber: a
// subscriber that falls behind misses events.
type Hub struct {
	keep int

	mu     sync.Mutex
	recent []events.Event // the last keep events are the tail
	subs   map[chan events.Event]struct{}
	closed bool
}

// NewHub returns a Hub that keeps the last keep events (DefaultKeep when
// keep is zero or less).
func NewHub(keep int) *Hub {
	if keep <= 0 {
		keep = DefaultKeep
	}
	return &Hub{keep: keep, subs: map[chan events.Event]struct{}{}}
}

// Publish records ev and hands it to every subscriber with room for it.
func (h *Hub) Publish(ev events.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	// Trimming only once the slice holds twice what is kept makes the
	// copy cost one element per publish, on average.
	if len(h.recent) >= 2*h.keep {
		h.recent = append(h.recent[:0], h.recent[len(h.recent)-h.keep+1:]...)
	}
	h.recent = append(h.recent, ev)
	for ch := range h.subs {
		select {
		case ch <- ev:
		default: // behind: this subscriber misses ev
		}
	}
}

// Subscribe returns the events published from now on, the recent events
// published before (oldest first), and cancel, which ends the subscription
// and closes ch. Calling cancel more than once is harmless.
func (h *Hub) Subscribe() (ch <-chan events.Event, recent []events.Event, cancel func()) {
	c := make(chan events.Event, subscriberBuffer)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		close(c)
	} else {
		h.subs[c] = struct{}{}
	}
	tail := h.recent[max(len(h.recent)-h.keep, 0):]
	recent = append([]events.Event(nil), tail...)
	return c, recent, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[c]; ok {
			delete(h.subs, c)
			close(c)
		}
	}
}

// Close ends every subscription, present and future, so the event streams
// that read them end too: call it before shutting the HTTP server down,
// which otherwise waits for the browsers to leave. Events published after
// Close are still kept for Subscribe's recent list.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for c := range h.subs {
		delete(h.subs, c)
		close(c)
	}
}

// Run publishes every event from in, such as the channel events.Subscribe
// returns, until in is closed or ctx is done.
func (h *Hub) Run(ctx context.Context, in <-chan events.Event) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-in:
			if !ok {
				return
			}
			h.Publish(ev)
		}
	}
}
