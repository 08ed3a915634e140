package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// secretError and secretPayload must never reach a visitor without a
// token.
const (
	secretError   = "POST https://hooks.example/orders?key=s3cret: 503 Service Unavailable"
	secretPayload = "s3cret-payload"
)

func ev(id, outcome string, attempt int) notification.Event {
	return notification.Event{Type: "attempt", Outcome: retry.Outcome(outcome), ID: id, Channel: "email", Queue: "email-queue",
		Attempt: attempt, At: t0.Add(time.Duration(attempt) * time.Second), Service: "worker"}
}

// eventOf decodes the JSON of an update's frame.
func eventOf(t *testing.T, b []byte) notification.Event {
	t.Helper()
	data, ok := strings.CutPrefix(string(b), "event: attempt\ndata: ")
	if !ok || !strings.HasSuffix(data, "\n\n") {
		t.Fatalf("frame %q is not one attempt event", b)
	}
	var e notification.Event
	if err := json.Unmarshal([]byte(strings.TrimSuffix(data, "\n\n")), &e); err != nil {
		t.Fatalf("frame %q: %v", b, err)
	}
	return e
}

func receive(t *testing.T, s *Subscription) *Update {
	t.Helper()
	select {
	case u, ok := <-s.C():
		if !ok {
			t.Fatal("subscription closed")
		}
		return u
	case <-time.After(5 * time.Second):
		t.Fatal("no update within 5s")
	}
	return nil
}

func TestUpdateRedaction(t *testing.T) {
	failed := ev("a", "failed", 1)
	failed.Error = secretError
	tests := []struct {
		name         string
		in           notification.Event
		wantRedacted notification.Event
	}{
		{"with an error", failed, func() notification.Event { e := failed; e.Error = ""; return e }()},
		{"without an error", ev("a", "delivered", 2), ev("a", "delivered", 2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := newUpdate(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.in, eventOf(t, u.Full)); diff != "" {
				t.Errorf("full (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantRedacted, eventOf(t, u.Redacted)); diff != "" {
				t.Errorf("redacted (-want +got):\n%s", diff)
			}
			if strings.Contains(string(u.Redacted), "s3cret") {
				t.Errorf("redacted frame holds the error text: %s", u.Redacted)
			}
		})
	}
}

func TestHubBroadcastAndCancel(t *testing.T) {
	h := NewHub()
	a, cancelA := h.Subscribe()
	b, cancelB := h.Subscribe()
	defer cancelB()
	h.Publish(ev("x", "failed", 1))
	for name, s := range map[string]*Subscription{"a": a, "b": b} {
		if got := receive(t, s).ID; got != "x" {
			t.Errorf("%s got %q", name, got)
		}
	}
	cancelA()
	cancelA() // twice is harmless
	if _, ok := <-a.C(); ok {
		t.Error("channel still open after cancel")
	}
	if a.Dropped() {
		t.Error("a cancelled subscription reports itself dropped")
	}
	h.Publish(ev("y", "delivered", 1)) // must not send on a's closed channel
	if got := receive(t, b).ID; got != "y" {
		t.Errorf("b got %q after a left, want y", got)
	}
	if n := h.Subscribers(); n != 1 {
		t.Errorf("%d subscribers, want 1", n)
	}
}

// TestHubSubscribeFor: a viewer's subscription receives the events of its
// tenant's notifications alone, an operator's every tenant's, a visitor's
// the default tenant's; another tenant's events take no room in its
// backlog.
func TestHubSubscribeFor(t *testing.T) {
	h := NewHub()
	inTenant := func(id, tenant string) notification.Event {
		e := ev(id, "delivered", 1)
		e.Tenant = tenant
		return e
	}
	subs := map[string]struct {
		viewer Viewer
		want   []string
	}{
		"acme":     {Viewer{Access: Authenticated, Tenant: "acme"}, []string{"a1", "a2"}},
		"globex":   {Viewer{Access: Authenticated, Tenant: "globex"}, []string{"g1"}},
		"default":  {Viewer{Access: Authenticated}, []string{"d1"}},
		"visitor":  {Viewer{Access: Anonymous}, []string{"d1"}},
		"operator": {Viewer{Access: Authenticated, Operator: true}, []string{"a1", "d1", "g1", "a2"}},
	}
	got := map[string]*Subscription{}
	for name, s := range subs {
		sub, cancel := h.SubscribeFor(s.viewer)
		defer cancel()
		got[name] = sub
	}
	all, cancel := h.Subscribe()
	defer cancel()
	// More of globex's events than a subscriber's backlog holds: acme's
	// subscription is not dropped for them.
	for i := range subscriberBuffer + 1 {
		h.Publish(inTenant(fmt.Sprintf("g%d", i+2), "globex"))
		<-all.C()
	}
	for _, e := range []notification.Event{inTenant("a1", "acme"), inTenant("d1", ""), inTenant("g1", "globex"), inTenant("a2", "acme")} {
		h.Publish(e)
	}
	for name, s := range subs {
		if name == "globex" || name == "operator" {
			if !got[name].Dropped() {
				t.Errorf("%s's subscription, %d events behind, was not dropped", name, subscriberBuffer+1)
			}
			continue
		}
		var ids []string
		for range s.want {
			ids = append(ids, receive(t, got[name]).ID)
		}
		select {
		case u := <-got[name].C():
			ids = append(ids, u.ID)
		default:
		}
		if diff := cmp.Diff(s.want, ids); diff != "" {
			t.Errorf("%s's events (-want +got):\n%s", name, diff)
		}
	}
}

func TestHubDropsSlowSubscriber(t *testing.T) {
	h := NewHub()
	slow, cancel := h.Subscribe() // never read until the end
	defer cancel()
	fast, cancelFast := h.Subscribe()
	defer cancelFast()
	var got []string
	for i := range subscriberBuffer + 1 {
		h.Publish(ev(fmt.Sprint(i), "failed", 1)) // never blocks on slow
		got = append(got, receive(t, fast).ID)    // fast keeps up
	}
	if !slow.Dropped() {
		t.Fatal("a subscriber a buffer behind was not dropped")
	}
	n := 0
	for range slow.C() { // what it had is still there, then the channel ends
		n++
	}
	if n != subscriberBuffer {
		t.Errorf("dropped subscriber kept %d updates, want its buffer (%d)", n, subscriberBuffer)
	}
	if fast.Dropped() || len(got) != subscriberBuffer+1 {
		t.Errorf("the subscriber that kept up got %d updates, dropped %v", len(got), fast.Dropped())
	}
	if n := h.Subscribers(); n != 1 {
		t.Errorf("%d subscribers after the drop, want 1", n)
	}
}

func TestHubRun(t *testing.T) {
	h := NewHub()
	s, cancel := h.Subscribe()
	defer cancel()
	in := make(chan notification.Event)
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
	got := []notification.Event{eventOf(t, receive(t, s).Full), eventOf(t, receive(t, s).Full)}
	if diff := cmp.Diff([]notification.Event{ev("a", "failed", 1), ev("a", "delivered", 2)}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	ctx, stop := context.WithCancel(context.Background())
	done = make(chan struct{})
	go func() {
		defer close(done)
		h.Run(ctx, make(chan notification.Event))
	}()
	stop()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return when its context was cancelled")
	}
}

func TestHubClose(t *testing.T) {
	h := NewHub()
	s, cancel := h.Subscribe()
	h.Publish(ev("a", "failed", 1))
	h.Close()
	cancel() // after Close: harmless
	if got := receive(t, s).ID; got != "a" {
		t.Errorf("buffered update = %q, want a", got)
	}
	if _, ok := <-s.C(); ok {
		t.Error("subscription open after Close")
	}
	late, cancel := h.Subscribe()
	defer cancel()
	if _, ok := <-late.C(); ok {
		t.Error("subscription after Close is open")
	}
}

// The fixtures of the access tests: the tokens the fake authentication
// accepts (an operator's, the default tenant's and tenant acme's), and
// one notification with a parked copy.
const (
	goodToken    = "good-token-0123456789"
	defaultToken = "default-token-0123456789"
	acmeToken    = "acme-token-0123456789"
)

func authenticate(r *http.Request) Viewer {
	switch r.Header.Get("Authorization") {
	case "":
		return Viewer{Access: Anonymous}
	case "Bearer " + goodToken:
		return Viewer{Access: Authenticated, Operator: true}
	case "Bearer " + defaultToken:
		return Viewer{Access: Authenticated}
	case "Bearer " + acmeToken:
		return Viewer{Access: Authenticated, Tenant: "acme"}
	}
	return Viewer{Access: Refused}
}

func get(t *testing.T, h http.Handler, path, authorization string) (*http.Response, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	// An event stream ends once its hub is closed: the deps of these
	// tests give it a closed hub.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result(), rec.Body.String()
}

func closedHub() *Hub {
	h := NewHub()
	h.Close()
	return h
}

// TestDataNeedsAToken asks every data route without a token, with a
// wrong one and with the right one, on a private and a public dashboard.
func TestDataNeedsAToken(t *testing.T) {
	paths := []string{"/dashboard/events", "/dashboard/queues"}
	failing := func(context.Context) (map[string]int, error) {
		return nil, errors.New("dial amqp://relay:" + secretPayload + "@rabbit: refused")
	}
	tests := []struct {
		name          string
		public        bool
		authorization string
		wantStatus    int
		wantSecrets   bool // error texts in the answers
	}{
		{"private, no token", false, "", 401, false},
		{"private, wrong token", false, "Bearer nope-0123456789", 401, false},
		{"private, not a bearer token", false, "Basic YWxhZGRpbjpvcGVuc2VzYW1l", 401, false},
		{"private, right token", false, "Bearer " + goodToken, 200, true},
		{"public, no token", true, "", 200, false},
		{"public, wrong token", true, "Bearer nope-0123456789", 401, false},
		{"public, right token", true, "Bearer " + goodToken, 200, true},
	}
	for _, tt := range tests {
		for _, path := range paths {
			t.Run(tt.name+" "+path, func(t *testing.T) {
				h := New(Deps{Hub: closedHub(), Authenticate: authenticate, Public: tt.public, Queues: func(context.Context) (map[string]int, error) {
					return map[string]int{"dead-letter-queue": 1}, nil
				}})
				resp, body := get(t, h, path, tt.authorization)
				if resp.StatusCode != tt.wantStatus {
					t.Fatalf("GET %s = %d %s, want %d", path, resp.StatusCode, body, tt.wantStatus)
				}
				if tt.wantStatus == 401 {
					if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" || !strings.Contains(body, `"status":401`) {
						t.Errorf("401 answer %q %s, want a problem", ct, body)
					}
					if resp.Header.Get("WWW-Authenticate") == "" {
						t.Error("401 without WWW-Authenticate")
					}
					return
				}
				if !tt.wantSecrets && strings.Contains(body, "s3cret") {
					t.Errorf("answer without a token holds a secret:\n%s", body)
				}
			})
		}
		t.Run(tt.name+" failing queues", func(t *testing.T) {
			h := New(Deps{Authenticate: authenticate, Public: tt.public, Queues: failing})
			resp, body := get(t, h, "/dashboard/queues", tt.authorization)
			want := tt.wantStatus
			if want == 200 {
				want = 503
			}
			if resp.StatusCode != want {
				t.Fatalf("GET /dashboard/queues = %d %s, want %d", resp.StatusCode, body, want)
			}
			if got := strings.Contains(body, "s3cret"); got != tt.wantSecrets {
				t.Errorf("answer holds the error text: %v, want %v: %s", got, tt.wantSecrets, body)
			}
		})
	}
}

func TestSession(t *testing.T) {
	tests := []struct {
		name          string
		public        bool
		authorization string
		status        int
		want          string
	}{
		{"private, no token", false, "", 200, `{"authenticated":false,"public":false}`},
		{"private, right token", false, "Bearer " + goodToken, 200, `{"authenticated":true,"public":false}`},
		{"public, no token", true, "", 200, `{"authenticated":false,"public":true}`},
		{"wrong token", true, "Bearer nope-0123456789", 401, `"the bearer token is not one the API accepts"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := get(t, New(Deps{Authenticate: authenticate, Public: tt.public}), "/dashboard/session", tt.authorization)
			if resp.StatusCode != tt.status || !strings.Contains(body, tt.want) {
				t.Errorf("GET = %d %s, want %d %s", resp.StatusCode, body, tt.status, tt.want)
			}
		})
	}
}

// sseFrame is one Server-Sent Events message or comment.
type sseFrame struct {
	Event   string
	Data    string
	Comment string
}

// stream opens url with the token, if any, and sends each frame it reads
// to the returned channel until the response ends or the test does.
func stream(t *testing.T, client *http.Client, url, token string) <-chan sseFrame {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type = %q, want text/event-stream", ct)
	}
	out := make(chan sseFrame, 64)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		var f sseFrame
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if f != (sseFrame{}) {
					out <- f
				}
				f = sseFrame{}
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
func next(t *testing.T, frames <-chan sseFrame) sseFrame {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case f, ok := <-frames:
			if !ok {
				t.Fatal("stream ended")
			}
			if f == (sseFrame{}) {
				continue
			}
			return f
		case <-deadline:
			t.Fatal("no frame within 5s")
		}
	}
}

// eventually polls cond every 10ms until it holds, failing after 5s.
func eventually(t *testing.T, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf(format, args...)
		}
		<-tick.C
	}
}

func TestEventsStream(t *testing.T) {
	tests := []struct {
		name      string
		token     string
		wantError string
	}{
		{"with a token, in full", goodToken, secretError},
		{"public without a token, redacted", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hub := NewHub()
			srv := httptest.NewServer(New(Deps{Hub: hub, Authenticate: authenticate, Public: true}))
			t.Cleanup(srv.Close) // after the stream's own cleanup ends it
			frames := stream(t, srv.Client(), srv.URL+"/dashboard/events", tt.token)
			eventually(t, func() bool { return hub.Subscribers() == 1 }, "the stream never subscribed")
			failed := ev("a", "failed", 1)
			failed.Error = secretError
			hub.Publish(failed)
			hub.Publish(ev("a", "delivered", 2))
			var got []notification.Event
			for range 2 {
				f := next(t, frames)
				if f.Event != "attempt" {
					t.Fatalf("frame %+v, want event: attempt", f)
				}
				var e notification.Event
				if err := json.Unmarshal([]byte(f.Data), &e); err != nil {
					t.Fatalf("data %q: %v", f.Data, err)
				}
				got = append(got, e)
			}
			want := failed
			want.Error = tt.wantError
			if diff := cmp.Diff([]notification.Event{want, ev("a", "delivered", 2)}, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEventsStreamTenants: the stream sends a tenant's viewer the events
// of its tenant's notifications and no other's, an operator every
// tenant's, and a public dashboard's visitor the default tenant's.
func TestEventsStreamTenants(t *testing.T) {
	tests := []struct {
		name   string
		token  string
		tenant string // the viewer's tenant
		want   []string
	}{
		{"acme's token", acmeToken, "acme", []string{"ntf_acme"}},
		{"the default tenant's token", defaultToken, "", []string{"ntf_default"}},
		{"an operator's token", goodToken, "", []string{"ntf_acme", "ntf_default", "ntf_globex"}},
		{"a visitor without a token", "", "", []string{"ntf_default"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hub := NewHub()
			srv := httptest.NewServer(New(Deps{Hub: hub, Authenticate: authenticate, Public: true}))
			t.Cleanup(srv.Close)
			frames := stream(t, srv.Client(), srv.URL+"/dashboard/events", tt.token)
			eventually(t, func() bool { return hub.Subscribers() == 1 }, "the stream never subscribed")
			for id, tenant := range map[string]string{"ntf_acme": "acme", "ntf_default": "", "ntf_globex": "globex"} {
				e := ev(id, "delivered", 1)
				e.Tenant = tenant
				hub.Publish(e)
			}
			// The last event is the viewer's tenant's: once it arrives,
			// nothing else is on its way.
			marker := ev("ntf_end", "delivered", 1)
			marker.Tenant = tt.tenant
			hub.Publish(marker)
			var got []string
			for {
				var e notification.Event
				if err := json.Unmarshal([]byte(next(t, frames).Data), &e); err != nil {
					t.Fatal(err)
				}
				if e.ID == "ntf_end" {
					break
				}
				got = append(got, e.ID)
			}
			slices.Sort(got)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEventsPing(t *testing.T) {
	srv := httptest.NewServer(newServer(Deps{Hub: NewHub(), Authenticate: authenticate}, timing{ping: 10 * time.Millisecond, write: time.Second}))
	t.Cleanup(srv.Close) // after the stream's own cleanup ends it
	frames := stream(t, srv.Client(), srv.URL+"/dashboard/events", goodToken)
	if f := next(t, frames); f.Comment != "ping" {
		t.Errorf("first frame %+v, want a ping comment", f)
	}
}

func TestEventsEndsWhenClientLeaves(t *testing.T) {
	hub := NewHub()
	s := newServer(Deps{Hub: hub, Authenticate: authenticate}, timing{ping: time.Minute, write: time.Second})
	srv := httptest.NewServer(s)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/dashboard/events", nil)
	req.Header.Set("Authorization", "Bearer "+goodToken)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if n := hub.Subscribers(); n != 1 {
		t.Fatalf("%d subscribers while streaming, want 1", n)
	}
	cancel()
	resp.Body.Close()
	eventually(t, func() bool { return hub.Subscribers() == 0 && s.streams.open() == 0 },
		"handler still subscribed after the client left")
}

func TestEventsEndOnHubClose(t *testing.T) {
	hub := NewHub()
	srv := httptest.NewServer(New(Deps{Hub: hub, Authenticate: authenticate}))
	t.Cleanup(srv.Close)
	frames := stream(t, srv.Client(), srv.URL+"/dashboard/events", goodToken)
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

// TestStreamOutlivesReadTimeout serves a stream from a server whose read
// timeout is far shorter than the stream's life: the stream goes on.
func TestStreamOutlivesReadTimeout(t *testing.T) {
	hub := NewHub()
	srv := httptest.NewUnstartedServer(New(Deps{Hub: hub, Authenticate: authenticate}))
	srv.Config.ReadTimeout = 50 * time.Millisecond
	srv.Config.WriteTimeout = 50 * time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(hub.Close)
	frames := stream(t, srv.Client(), srv.URL+"/dashboard/events", goodToken)
	eventually(t, func() bool { return hub.Subscribers() == 1 }, "the stream never subscribed")
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for i := range 8 { // 400ms: eight read and write timeouts
		<-tick.C
		hub.Publish(ev(fmt.Sprint(i), "delivered", 1))
		if f := next(t, frames); f.Event != "attempt" || !strings.Contains(f.Data, fmt.Sprintf(`"id":"%d"`, i)) {
			t.Fatalf("frame %d = %+v, want event %d", i, f, i)
		}
	}
}

// clientFrom is an HTTP client whose connections come from the loopback
// address ip, so the server tells it from other clients.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

func TestStreamCaps(t *testing.T) {
	hub := NewHub()
	s := newServer(Deps{Hub: hub, Authenticate: authenticate, MaxStreams: 3, MaxStreamsPerClient: 2},
		timing{ping: time.Minute, write: time.Second})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	t.Cleanup(hub.Close) // ends the streams before srv.Close waits for them
	a, b := clientFrom("127.0.0.1"), clientFrom("127.0.0.2")

	open := func(c *http.Client) (*http.Response, context.CancelFunc) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/dashboard/events", nil)
		req.Header.Set("Authorization", "Bearer "+goodToken)
		resp, err := c.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		t.Cleanup(func() { cancel(); resp.Body.Close() })
		return resp, cancel
	}
	refused := func(c *http.Client, why string) {
		t.Helper()
		resp, _ := open(c)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Content-Type") != "application/problem+json" ||
			resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), why) {
			t.Errorf("stream beyond the cap = %d %s %s, want a 429 problem naming %s", resp.StatusCode, resp.Header, body, why)
		}
	}
	first, closeFirst := open(a)
	second, _ := open(a)
	for _, r := range []*http.Response{first, second} {
		if r.StatusCode != http.StatusOK {
			t.Fatalf("stream within the caps = %d", r.StatusCode)
		}
	}
	refused(a, "DASHBOARD_MAX_STREAMS_PER_CLIENT")
	if third, _ := open(b); third.StatusCode != http.StatusOK {
		t.Fatalf("another client's stream = %d, want 200", third.StatusCode)
	}
	refused(b, "DASHBOARD_MAX_STREAMS")
	closeFirst()
	first.Body.Close()
	eventually(t, func() bool { return s.streams.open() == 2 }, "the closed stream still holds its place")
	if again, _ := open(a); again.StatusCode != http.StatusOK {
		t.Errorf("stream after one closed = %d, want 200", again.StatusCode)
	}
}

// TestStreamCapPerIPv6Network opens event streams from different
// addresses of one IPv6 /64, as one client holding a whole network can:
// they count as one client, as the API's rate limits count them, so the
// per-client cap holds however many addresses the client uses. Another
// /64, and an IPv4 client, still get theirs.
func TestStreamCapPerIPv6Network(t *testing.T) {
	hub := NewHub()
	s := newServer(Deps{Hub: hub, Authenticate: authenticate, MaxStreams: 10, MaxStreamsPerClient: 2},
		timing{ping: time.Minute, write: time.Second})
	// The test's connections all come from loopback: the address a
	// request claims to come from is set here, before the dashboard
	// sees it.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.RemoteAddr = r.Header.Get("X-Test-Remote-Addr")
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(hub.Close) // ends the streams before srv.Close waits for them
	open := func(remote string) int {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/dashboard/events", nil)
		req.Header.Set("Authorization", "Bearer "+goodToken)
		req.Header.Set("X-Test-Remote-Addr", remote)
		resp, err := srv.Client().Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		t.Cleanup(func() { cancel(); resp.Body.Close() })
		return resp.StatusCode
	}
	var got []int
	for _, remote := range []string{"[2001:db8:1:2::1]:40000", "[2001:db8:1:2::2]:40001", "[2001:db8:1:2:ffff:ffff:ffff:ffff]:40002",
		"[2001:db8:1:2:abcd::9]:40003", "[2001:db8:1:3::1]:40004", "192.0.2.7:40005"} {
		got = append(got, open(remote))
	}
	if diff := cmp.Diff([]int{200, 200, 429, 429, 200, 200}, got); diff != "" {
		t.Errorf("streams from one /64, then another /64 and an IPv4 address (-want +got):\n%s", diff)
	}
}

// TestSlowClientDropped opens a stream that never reads and floods it:
// the stream ends, by the hub dropping it or by the write timeout, and
// gives its place back.
func TestSlowClientDropped(t *testing.T) {
	hub := NewHub()
	s := newServer(Deps{Hub: hub, Authenticate: authenticate}, timing{ping: time.Minute, write: 100 * time.Millisecond})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	t.Cleanup(hub.Close)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /dashboard/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", goodToken)
	eventually(t, func() bool { return s.streams.open() == 1 }, "the stream never opened")
	big := ev("a", "failed", 1)
	big.Error = strings.Repeat("x", 64<<10)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				hub.Publish(big)
			}
		}
	})
	eventually(t, func() bool { return s.streams.open() == 0 && hub.Subscribers() == 0 },
		"a client that reads nothing still holds a stream")
	close(stop)
	wg.Wait()
}

func TestRoutes(t *testing.T) {
	failing := func(context.Context) (map[string]int, error) { return nil, errors.New("channel closed") }
	depths := func(context.Context) (map[string]int, error) {
		return map[string]int{"email-queue": 3, "dead-letter-queue": 1}, nil
	}
	token := "Bearer " + goodToken
	tests := []struct {
		name     string
		deps     Deps
		path     string
		status   int
		ctype    string
		contains string
	}{
		{"page", Deps{}, "/", 200, "text/html; charset=utf-8", `<script src="/static/app.js"`},
		{"script", Deps{}, "/static/app.js", 200, "text/javascript; charset=utf-8", `fetch("/dashboard/events"`},
		{"style", Deps{}, "/static/style.css", 200, "text/css; charset=utf-8", ".chip.parked"},
		{"unknown", Deps{}, "/nope", 404, "text/plain; charset=utf-8", ""},
		{"queues", Deps{Queues: depths}, "/dashboard/queues", 200, "application/json", `{"queues":{"dead-letter-queue":1,"email-queue":3}}`},
		{"queues without a source", Deps{}, "/dashboard/queues", 200, "application/json", `{"queues":{}}`},
		{"queues failing", Deps{Queues: failing}, "/dashboard/queues", 503, "application/problem+json", `"detail":"queue depths unavailable: channel closed"`},
		{"events without a hub", Deps{}, "/dashboard/events", 503, "application/problem+json", `problems/no-event-source"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.deps.Authenticate = authenticate
			resp, body := get(t, New(tt.deps), tt.path, token)
			got := []any{resp.StatusCode, resp.Header.Get("Content-Type")}
			if diff := cmp.Diff([]any{tt.status, tt.ctype}, got); diff != "" {
				t.Errorf("status, content type (-want +got):\n%s", diff)
			}
			// A refusal is never cached.
			if cc := resp.Header.Get("Cache-Control"); tt.ctype == "application/problem+json" && cc != "no-store" {
				t.Errorf("Cache-Control of a problem = %q, want no-store", cc)
			}
			if !strings.Contains(body, tt.contains) {
				t.Errorf("body %q does not contain %q", body, tt.contains)
			}
		})
	}
}

// TestPageHasNothingInline keeps the page within its
// Content-Security-Policy, which allows no inline script or style.
func TestPageHasNothingInline(t *testing.T) {
	page, err := static.ReadFile("static/index.html")
	if err != nil {
		t.Fatal(err)
	}
	forbidden := []struct {
		name string
		re   *regexp.Regexp
	}{
		{"an inline script", regexp.MustCompile(`<script(\s[^>]*)?>\s*[^<\s]`)},
		{"a style element", regexp.MustCompile(`<style`)},
		{"a style attribute", regexp.MustCompile(`\sstyle=`)},
		{"an event handler attribute", regexp.MustCompile(`\son[a-z]+=`)},
		{"a javascript: URL", regexp.MustCompile(`javascript:`)},
	}
	for _, tag := range regexp.MustCompile(`<script[^>]*>`).FindAll(page, -1) {
		if !strings.Contains(string(tag), ` src="/static/`) {
			t.Errorf("index.html has a script not loaded from /static/: %s", tag)
		}
	}
	for _, f := range forbidden {
		if loc := f.re.FindIndex(page); loc != nil {
			t.Errorf("index.html has %s: %q", f.name, page[loc[0]:min(loc[1]+40, len(page))])
		}
	}
	script, err := static.ReadFile("static/app.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "setAttribute(\"style\""} {
		if strings.Contains(string(script), bad) {
			t.Errorf("app.js uses %s", bad)
		}
	}
}

// TestPageHasEveryElement checks that every element app.js looks up by id
// is on the page: a missing one throws, and the page stops drawing.
func TestPageHasEveryElement(t *testing.T) {
	page, err := static.ReadFile("static/index.html")
	if err != nil {
		t.Fatal(err)
	}
	script, err := static.ReadFile("static/app.js")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, m := range regexp.MustCompile(`\sid="([^"]+)"`).FindAllSubmatch(page, -1) {
		ids[string(m[1])] = true
	}
	uses := regexp.MustCompile(`\$\("([^"]+)"\)`).FindAllSubmatch(script, -1)
	if len(uses) == 0 {
		t.Fatal(`app.js looks up no element with $("…")`)
	}
	for _, m := range uses {
		if !ids[string(m[1])] {
			t.Errorf(`app.js looks up $(%q), which index.html does not have`, m[1])
		}
	}
}

// TestPublicHidesURLSecrets: on a public dashboard, a visitor without a
// token sees each webhook URL as its scheme, host and a fixed mask in the
// live events (the API's tests hold its answers about notifications to
// it). The secrets a receiver puts after the host, in the path (Slack's
// and Discord's webhook URLs are all path), the query or the user
// information, appear in none.
func TestPublicHidesURLSecrets(t *testing.T) {
	const slack = "https://hooks.example/services/T000/B000/XXXXsecretpath"
	urls := []string{slack, "https://hooks.example/in?tok=SECRET123", "https://user:pw0rd@hooks.example/basic#frag"}
	secrets := []string{"services", "T000", "B000", "XXXX", "secretpath", "/in", "tok=", "SECRET123", "user", "pw0rd", "basic", "frag"}
	leaks := func(what, body string) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(body, s) {
				t.Errorf("anonymous %s shows %q: %s", what, s, body)
			}
		}
	}
	for _, u := range urls {
		e := ev("ntf_hook", "delivered", 1)
		e.Channel, e.Recipient = "webhook", u
		up, err := newUpdate(e)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(up.Redacted), `"recipient":"https://hooks.example/***"`) {
			t.Errorf("anonymous event %s, want the recipient https://hooks.example/***", up.Redacted)
		}
		leaks("event", string(up.Redacted))
	}
}
