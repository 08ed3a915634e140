package dashboard

import (
	"errors"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/relay-demo/relay/internal/peer"
	"github.com/relay-demo/relay/internal/problem"
)

// events serves the live event stream. Each stream holds a place under
// the caps, a subscription with a small backlog, and a timer for its
// pings; it replays nothing, since the page loads the past from the
// history. A client that falls a backlog behind, or does not take a write
// within the write timeout, is dropped: its browser reconnects and
// reloads.
func (s *server) events(w http.ResponseWriter, r *http.Request) error {
	v, refusal := s.allow(r)
	if refusal != nil {
		return refusal
	}
	if s.Hub == nil {
		return &problem.Problem{Type: problem.Base + "no-event-source", Title: "No event source",
			Status: http.StatusServiceUnavailable, Detail: "this dashboard follows no pipeline events"}
	}
	client := peer.Addr(r)
	release, refusal := s.streams.acquire(client)
	if refusal != nil {
		return refusal
	}
	defer release()
	s.stream(w, r, client, v)
	return nil
}

// stream writes the events of the notifications v sees to a client events
// let in, until it leaves, falls behind or the hub closes.
func (s *server) stream(w http.ResponseWriter, r *http.Request, client string, v Viewer) {
	sub, cancel := s.Hub.SubscribeFor(v)
	defer cancel()
	full := v.full()

	rc := http.NewResponseController(w)
	// The server's read timeout would end the request once it expires
	// (the connection's background read fails, which cancels the
	// request): a stream has no more to read anyway.
	if err := rc.SetReadDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.Log.Warn("clear read deadline for event stream", "error", err)
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // no proxy buffering
	w.WriteHeader(http.StatusOK)

	// send writes what write writes within the write timeout, flushed.
	send := func(write func(io.Writer) error) bool {
		if err := rc.SetWriteDeadline(time.Now().Add(s.write)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return false
		}
		err := write(w)
		if err == nil {
			err = rc.Flush()
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			s.Log.Info("event stream dropped: the client took no write within the write timeout",
				"client", client, "timeout", s.write.String())
		}
		return err == nil
	}
	// EventSource clients reconnect by themselves after a lost stream;
	// 2s between tries keeps them prompt without hammering a restarting
	// API. The page reads the stream with fetch and backs off itself.
	if !send(func(w io.Writer) error { _, err := io.WriteString(w, "retry: 2000\n\n"); return err }) {
		return
	}
	pick := func(u *Update) []byte {
		if full {
			return u.Full
		}
		return u.Redacted
	}
	ping := time.NewTicker(s.ping)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case u, ok := <-sub.C():
			if !ok {
				if sub.Dropped() {
					s.Log.Info("event stream dropped: the client fell behind", "client", client)
				}
				return
			}
			ok = send(func(w io.Writer) error {
				if _, err := w.Write(pick(u)); err != nil {
					return err
				}
				// What else is waiting goes in the same flush.
				for {
					select {
					case u, ok := <-sub.C():
						if !ok {
							return nil // the next receive ends the stream
						}
						if _, err := w.Write(pick(u)); err != nil {
							return err
						}
					default:
						return nil
					}
				}
			})
			if !ok {
				return
			}
		case <-ping.C:
			if !send(func(w io.Writer) error { _, err := io.WriteString(w, ": ping\n\n"); return err }) {
				return
			}
		}
	}
}
