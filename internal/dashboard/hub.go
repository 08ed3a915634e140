package dashboard

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/relay-demo/relay/internal/events"
	"github.com/relay-demo/relay/internal/notification"
)

// subscriberBuffer is how many updates a subscriber may fall behind
// before the hub drops it. Updates are pointers, so a subscriber's whole
// backlog takes half a kilobyte.
const subscriberBuffer = 64

// Update is one pipeline event ready for the event streams: the complete
// Server-Sent Event, encoded once however many streams send it.
type Update struct {
	// ID is the notification the event is about.
	ID string
	// Tenant is the tenant the notification belongs to; "" for the
	// default tenant.
	Tenant string
	// Full is the event with every field.
	Full []byte
	// Redacted is the event without its error text: what a stream without
	// a token gets on a public dashboard.
	Redacted []byte
}

// newUpdate encodes ev as "event: attempt" frames, in full and redacted.
func newUpdate(ev notification.Event) (*Update, error) {
	full, err := frame(ev)
	if err != nil {
		return nil, err
	}
	u := &Update{ID: ev.ID, Tenant: ev.Tenant, Full: full, Redacted: full}
	if public := notification.PublicRecipient(ev.Recipient); ev.Error != "" || public != ev.Recipient {
		ev.Error, ev.Recipient = "", public
		if u.Redacted, err = frame(ev); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// Streamed is an event as the event streams send it: the event with what
// the history derives from it, so that the page draws the status the
// history would show rather than deriving it again.
type Streamed struct {
	notification.Event
	// Status is the status the event leads its copy to, once it is the
	// latest of the copy's events (notification.Event.CopyStatus); absent
	// for an outcome relay does not know.
	Status notification.Status `json:"status,omitempty"`
	// Rank orders the event among the outcomes of its attempt
	// (notification.Event.Rank): of two events of one round and attempt,
	// the higher-ranked says the copy's status.
	Rank int `json:"rank"`
}

// streamed is ev with what the history derives from it.
func streamed(ev notification.Event) Streamed {
	return Streamed{Event: ev, Status: ev.CopyStatus(), Rank: ev.Rank()}
}

// frame writes ev, as Streamed, as one Server-Sent Event. JSON has no raw
// newlines, so the data fits one data line.
func frame(ev notification.Event) ([]byte, error) {
	b, err := json.Marshal(streamed(ev))
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(b)+len("event: \ndata: \n\n")+len(events.TypeAttempt))
	out = append(out, "event: "+events.TypeAttempt+"\ndata: "...)
	out = append(out, b...)
	return append(out, "\n\n"...), nil
}

// Subscription is one subscriber's view of a Hub.
type Subscription struct {
	c       chan *Update
	dropped atomic.Bool
	// viewer, when set, is whose events the subscription receives: the
	// hub hands it no other tenant's, so they take no room in its backlog.
	viewer *Viewer
}

// C delivers the updates published since Subscribe. It is closed when the
// subscription ends: cancelled, dropped for falling behind, or the hub
// closed.
func (s *Subscription) C() <-chan *Update { return s.c }

// Dropped reports whether the hub ended the subscription because the
// subscriber fell subscriberBuffer updates behind.
func (s *Subscription) Dropped() bool { return s.dropped.Load() }

// Hub broadcasts pipeline events to subscribers as they happen. It keeps
// no past events: a dashboard reads what happened from the history and
// follows the hub for what happens next. Publishing never waits for a
// subscriber; one that falls behind is dropped, and its stream ends.
type Hub struct {
	mu     sync.Mutex
	subs   map[*Subscription]struct{}
	closed bool
}

// NewHub returns a Hub with no subscribers.
func NewHub() *Hub {
	return &Hub{subs: map[*Subscription]struct{}{}}
}

// Publish hands ev to every subscriber, and drops those with no room for
// it.
func (h *Hub) Publish(ev notification.Event) {
	u, err := newUpdate(ev)
	if err != nil {
		return // an Event holds strings, numbers and a time: always encodes
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if s.viewer != nil && !s.viewer.Sees(u.Tenant) {
			continue
		}
		select {
		case s.c <- u:
		default:
			s.dropped.Store(true)
			delete(h.subs, s)
			close(s.c)
		}
	}
}

// Subscribe returns a subscription to the events published from now on,
// every tenant's, and cancel, which ends it and closes its channel.
// Calling cancel more than once, or after the hub dropped the
// subscription, is harmless.
func (h *Hub) Subscribe() (s *Subscription, cancel func()) {
	return h.subscribe(&Subscription{c: make(chan *Update, subscriberBuffer)})
}

// SubscribeFor is Subscribe for v: the subscription receives only the
// events of the notifications v sees (see Viewer.Sees).
func (h *Hub) SubscribeFor(v Viewer) (s *Subscription, cancel func()) {
	return h.subscribe(&Subscription{c: make(chan *Update, subscriberBuffer), viewer: &v})
}

func (h *Hub) subscribe(s *Subscription) (*Subscription, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		close(s.c)
	} else {
		h.subs[s] = struct{}{}
	}
	return s, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[s]; ok {
			delete(h.subs, s)
			close(s.c)
		}
	}
}

// Subscribers is the number of subscriptions open.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// Close ends every subscription, present and future, so the event streams
// that read them end too: call it before shutting the HTTP server down,
// which otherwise waits for the browsers to leave.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for s := range h.subs {
		delete(h.subs, s)
		close(s.c)
	}
}

// Run publishes every event from in, such as the channel events.Subscribe
// returns, until in is closed or ctx is done.
func (h *Hub) Run(ctx context.Context, in <-chan notification.Event) {
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
