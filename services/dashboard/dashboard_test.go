package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/services/events"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func ev(id, outcome string, attempt int) events.Event {
	return events.Event{Type: "attempt", Outcome: retry.Outcome(outcome), ID: id, Channel: "email", Queue: "email-queue",
		Attempt: attempt, At: t0.Add(time.Duration(attempt) * time.Second), Service: "worker"}
}

func ids(evs []events.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.ID)
	}
	return out
}

func TestHubRecent(t *testing.T) {
	tests := []struct {
		name      string
		keep      int
		published int
		want      []string
	}{
		{"none", 3, 0, nil},
		{"fewer than kept", 3, 2, []string{"0", "1"}},
		{"exactly kept", 3, 3, []string{"0", "1", "2"}},
		{"more than kept", 3, 10, []string{"7", "8", "9"}},
		{"past the trim point", 3, 13, []string{"10", "11", "12"}},
		{"keep one", 1, 5, []string{"4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHub(tt.keep)
			for i := range tt.published {
				h.Publish(ev(fmt.Sprint(i), "delivered", 1))
			}
			_, recent, cancel := h.Subscribe()
			defer cancel()
			if diff := cmp.Diff(tt.want, ids(recent)); diff != "" {
				t.Errorf("recent (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHubDefaultKeep(t *testing.T) {
	h := NewHub(0)
	for i := range DefaultKeep + 5 {
		h.Publish(ev(fmt.Sprint(i), "failed", 1))
	}
	_, recent, cancel := h.Subscribe()
	defer cancel()
	if len(recent) != DefaultKeep || recent[0].ID != "5" {
		t.Errorf("recent: %d events from %q, want %d from \"5\"", len(recent), recent[0].ID, DefaultKeep)
	}
}

func TestHubBroadcastAndCancel(t *testing.T) {
	h := NewHub(10)
	a, _, cancelA := h.Subscribe()
	b, _, cancelB := h.Subscribe()
	defer cancelB()
	h.Publish(ev("x", "failed", 1))
	for name, ch := range map[string]<-chan events.Event{"a": a, "b": b} {
		select {
		case got := <-ch:
			if got.ID != "x" {
				t.Errorf("%s got %q", name, got.ID)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s got nothing", name)
		}
	}
	cancelA()
	cancelA() // twice is harmless
	if _, ok := <-a; ok {
		t.Error("channel still open after cancel")
	}
	h.Publish(ev("y", "delivered", 1)) // must not send on a's closed channel
	if got := (<-b).ID; got != "y" {
		t.Errorf("b got %q after a left, want y", got)
	}
}

func TestHubSlowSubscriberDoesNotBlock(t *testing.T) {
	h := NewHub(10)
	slow, _, cancel := h.Subscribe() // never read until the end
	defer cancel()
	const n = subscriberBuffer * 4
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			h.Publish(ev(fmt.Sprint(i), "failed", 1))
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Publish blocked on a subscriber that does not read")
	}
	if got := len(slow); got != subscriberBuffer {
		t.Errorf("slow subscriber holds %d events, want its buffer full (%d)", got, subscriberBuffer)
	}
	if first := <-slow; first.ID != "0" {
		t.Errorf("slow subscriber's first event = %q, want the oldest (0)", first.ID)
	}
}

func TestHubRun(t *testing.T) {
	h := NewHub(10)
	in := make(chan events.Event)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.Run(context.Background(), in)
	}()
	in <- ev("a", "failed", 1)
	in <- ev("a", "delivered", 2)
	close(in)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return when its input closed")
	}
	_, recent, cancel := h.Subscribe()
	defer cancel()
	if diff := cmp.Diff([]events.Event{ev("a", "failed", 1), ev("a", "delivered", 2)}, recent); diff != "" {
		t.Errorf("recent (-want +got):\n%s", diff)
	}

	ctx, stop := context.WithCancel(context.Background())
	done = make(chan struct{})
	go func() {
		defer close(done)
		h.Run(ctx, make(chan events.Event))
	}()
	stop()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return when its context was cancelled")
	}
}

// frame is one Server-Sent Events message or comment.
type frame struct {
	Event   string
	Data    string
	Comment string
}

// stream opens url and sends each frame it reads to the returned channel
// until the response ends or the test does.
func stream(t *testing.T, url string) <-chan frame {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type = %q, want text/event-stream", ct)
	}
	out := make(chan frame, 64)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		var f frame
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if f != (frame{}) {
					out <- f
				}
				f = frame{}
			case strings.HasPrefix(line, ":"):
				f.Comment = strings.TrimSpace(line[1:])
			case strings.HasPrefix(line, "event: "):
				f.Event = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				f.Data = line[len("data: "):]
			}
		}
	}()
	return out
}

// next returns the next frame that is not the stream's retry hint.
func next(t *testing.T, frames <-chan frame) frame {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case f, ok := <-frames:
			if !ok {
				t.Fatal("stream ended")
			}
			if f == (frame{}) {
				continue
			}
			return f
		case <-deadline:
			t.Fatal("no frame within 5s")
		}
	}
}

func attempt(t *testing.T, f frame) events.Event {
	t.Helper()
	if f.Event != "attempt" {
		t.Fatalf("frame %+v, want event: attempt", f)
	}
	var e events.Event
	if err := json.Unmarshal([]byte(f.Data), &e); err != nil {
		t.Fatalf("data %q: %v", f.Data, err)
	}
	return e
}

func TestEventsStream(t *testing.T) {
	hub := NewHub(10)
	hub.Publish(ev("a", "failed", 1))
	hub.Publish(ev("a", "retrying", 1))
	srv := httptest.NewServer(New(Deps{Hub: hub}))
	t.Cleanup(srv.Close) // after the stream's own cleanup ends it

	frames := stream(t, srv.URL+"/dashboard/events")
	var got []events.Event
	for range 2 {
		got = append(got, attempt(t, next(t, frames)))
	}
	// Live events follow the recent ones once the stream is subscribed;
	// publish until one arrives, since subscribing races with the publish.
	live := ev("a", "delivered", 2)
	deadline := time.Now().Add(5 * time.Second)
	for {
		hub.Publish(live)
		select {
		case f := <-frames:
			got = append(got, attempt(t, f))
		case <-time.After(50 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("no live event")
			}
			continue
		}
		break
	}
	want := []events.Event{ev("a", "failed", 1), ev("a", "retrying", 1), live}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestEventsPing(t *testing.T) {
	srv := httptest.NewServer(newServer(Deps{Hub: NewHub(1)}, 10*time.Millisecond))
	t.Cleanup(srv.Close) // after the stream's own cleanup ends it
	frames := stream(t, srv.URL+"/dashboard/events")
	if f := next(t, frames); f.Comment != "ping" {
		t.Errorf("first frame %+v, want a ping comment", f)
	}
}

func TestEventsEndsWhenClientLeaves(t *testing.T) {
	hub := NewHub(1)
	srv := httptest.NewServer(New(Deps{Hub: hub}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/dashboard/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	subscribers := func() int {
		hub.mu.Lock()
		defer hub.mu.Unlock()
		return len(hub.subs)
	}
	if n := subscribers(); n != 1 {
		t.Fatalf("%d subscribers while streaming, want 1", n)
	}
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for subscribers() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("handler still subscribed after the client left")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRoutes(t *testing.T) {
	failing := func(context.Context) (map[string]int, error) { return nil, errors.New("channel closed") }
	depths := func(context.Context) (map[string]int, error) {
		return map[string]int{"email-queue": 3, "dead-letter-queue": 1}, nil
	}
	tests := []struct {
		name     string
		deps     Deps
		path     string
		status   int
		ctype    string
		contains string
	}{
		{"page", Deps{}, "/", 200, "text/html; charset=utf-8", `<script src="/static/app.js"`},
		{"script", Deps{}, "/static/app.js", 200, "text/javascript; charset=utf-8", "new EventSource("},
		{"style", Deps{}, "/static/style.css", 200, "text/css; charset=utf-8", ".mark.point.failed"},
		{"unknown", Deps{}, "/nope", 404, "text/plain; charset=utf-8", ""},
		{"queues", Deps{Queues: depths}, "/dashboard/queues", 200, "application/json", `{"queues":{"dead-letter-queue":1,"email-queue":3}}`},
		{"queues without a source", Deps{}, "/dashboard/queues", 200, "application/json", `{"queues":{}}`},
		{"queues failing", Deps{Queues: failing}, "/dashboard/queues", 503, "application/json", `{"error":"queue depths unavailable: channel closed"}`},
		{"events without a hub", Deps{}, "/dashboard/events", 503, "application/json", `"error"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(New(tt.deps))
			defer srv.Close()
			resp, err := http.Get(srv.URL + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			got := []any{resp.StatusCode, resp.Header.Get("Content-Type")}
			if diff := cmp.Diff([]any{tt.status, tt.ctype}, got); diff != "" {
				t.Errorf("status, content type (-want +got):\n%s", diff)
			}
			if !strings.Contains(string(body), tt.contains) {
				t.Errorf("body %q does not contain %q", body, tt.contains)
			}
		})
	}
}

func TestHubClose(t *testing.T) {
	h := NewHub(5)
	ch, _, cancel := h.Subscribe()
	h.Publish(ev("a", "failed", 1))
	h.Close()
	cancel() // after Close: harmless
	if got := (<-ch).ID; got != "a" {
		t.Errorf("buffered event = %q, want a", got)
	}
	if _, ok := <-ch; ok {
		t.Error("subscription open after Close")
	}
	h.Publish(ev("b", "delivered", 2))
	late, recent, cancel := h.Subscribe()
	defer cancel()
	if _, ok := <-late; ok {
		t.Error("subscription after Close is open")
	}
	if diff := cmp.Diff([]string{"a", "b"}, ids(recent)); diff != "" {
		t.Errorf("recent after Close (-want +got):\n%s", diff)
	}
}

func TestEventsEndOnHubClose(t *testing.T) {
	hub := NewHub(1)
	srv := httptest.NewServer(New(Deps{Hub: hub}))
	t.Cleanup(srv.Close)
	frames := stream(t, srv.URL+"/dashboard/events")
	hub.Close()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-frames:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("stream still open after the hub closed")
		}
	}
}
