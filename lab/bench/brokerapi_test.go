package bench

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeManagement is a real HTTP server answering as RabbitMQ's management
// API does, for the three requests the bench makes. Its queue counts one
// more message every time it is asked, up to ready; for the first
// countOnly answers it reports the count without the memory, as a queue
// whose count arrived in one statistics event and its memory not yet.
type fakeManagement struct {
	mu        sync.Mutex
	node      map[string]any
	asked     atomic.Int64
	ready     int64
	countOnly atomic.Int64
}

// setNode changes what the node answers.
func (f *fakeManagement) setNode(n map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.node = n
}

func (f *fakeManagement) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if u, p, ok := r.BasicAuth(); !ok || u != "guest" || p != "s3cret" {
		http.Error(w, `{"error":"not_authorised"}`, http.StatusUnauthorized)
		return
	}
	var body any
	switch r.URL.EscapedPath() {
	case "/api/overview":
		body = map[string]any{"node": "rabbit@test", "management_version": "3.10.8"}
	case "/api/nodes/rabbit@test":
		if r.URL.Query().Get("memory") != "true" {
			http.Error(w, "want ?memory=true", http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		body = f.node
		f.mu.Unlock()
	case "/api/queues/%2F/bench.wait.1h":
		n := f.asked.Add(1)
		if n == 1 {
			body = map[string]any{"name": "bench.wait.1h", "memory": 1000} // no statistics yet
		} else if n <= f.countOnly.Load() {
			body = map[string]any{"name": "bench.wait.1h", "messages": min(n, f.ready)}
		} else {
			body = map[string]any{"name": "bench.wait.1h", "messages": min(n, f.ready), "memory": 1000 * min(n, f.ready)}
		}
	default:
		http.Error(w, `{"error":"Object Not Found"}`, http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

func node(used, limit, rss, allocated uint64) map[string]any {
	return map[string]any{"name": "rabbit@test", "mem_used": used, "mem_limit": limit, "mem_alarm": false,
		"disk_free": uint64(50 << 30), "disk_free_limit": uint64(50 << 20), "mem_calculation_strategy": "rss",
		"memory": map[string]any{"total": map[string]uint64{"erlang": allocated - 1, "rss": rss, "allocated": allocated}}}
}

func apiFor(t *testing.T, h http.Handler) (*brokerAPI, *httptest.Server) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	base, _ := url.Parse(srv.URL)
	return &brokerAPI{base: base, user: url.UserPassword("guest", "s3cret"), vhost: "/", client: srv.Client()}, srv
}

func TestNewBrokerAPI(t *testing.T) {
	a, err := newBrokerAPI("amqp://relay:s3cret@localhost:5672/orders%2Feu", "")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := a.String(), "http://localhost:15672"; got != want {
		t.Errorf("address %q, want %q (no credentials)", got, want)
	}
	if pass, _ := a.user.Password(); a.user.Username() != "relay" || pass != "s3cret" || a.vhost != "orders/eu" {
		t.Errorf("user %v, vhost %q; want the AMQP URL's", a.user, a.vhost)
	}
	if _, err := newBrokerAPI("http://localhost:5672/", ""); err == nil {
		t.Error("newBrokerAPI(http://…) = nil error, want one")
	}
	// MANAGEMENT_URL wins over the derived address: a second broker on
	// this host serves its API on a port of its own.
	a, err = newBrokerAPI("amqp://guest:guest@127.0.0.1:5643/", "http://admin:pw@127.0.0.1:15643")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := a.String(), "http://127.0.0.1:15643"; got != want || a.user.Username() != "admin" {
		t.Errorf("address %q user %v, want %q as admin", got, a.user, want)
	}
	if _, err := newBrokerAPI("amqp://localhost/", "::not a url"); err == nil {
		t.Error("newBrokerAPI with a MANAGEMENT_URL that does not parse = nil error, want one")
	}
}

func TestBrokerAPINode(t *testing.T) {
	f := &fakeManagement{node: node(900<<20, 8<<30, 1000<<20, 600<<20)}
	a, _ := apiFor(t, f)
	got, err := a.node(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// mem_used is the last sample; the live total under the node's
	// strategy wins.
	want := nodeMemory{Name: "rabbit@test", Used: 1000 << 20, Limit: 8 << 30, Allocated: 600 << 20, DiskFree: 50 << 30, DiskFreeLimit: 50 << 20}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("node (-want +got):\n%s", diff)
	}
	// Without the breakdown, mem_used.
	f.setNode(map[string]any{"mem_used": 123 << 20, "mem_limit": 1 << 30, "mem_alarm": true})
	if got, err := a.node(context.Background()); err != nil || got.Used != 123<<20 || !got.Alarm {
		t.Errorf("node without a breakdown = %+v, %v; want mem_used and the alarm", got, err)
	}
	f.setNode(map[string]any{})
	if _, err := a.node(context.Background()); err == nil || !strings.Contains(err.Error(), "no mem_used") {
		t.Errorf("node with no figures: %v, want an error", err)
	}
	a.user = url.UserPassword("guest", "wrong")
	if _, err := a.node(context.Background()); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("node with a wrong password: %v, want a 401", err)
	}
}

func TestBrokerAPIQueueHolding(t *testing.T) {
	f := &fakeManagement{ready: 3}
	a, _ := apiFor(t, f)
	got, err := a.queueHolding(context.Background(), "bench.wait.1h", 3, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got != (queueMemory{Messages: 3, Memory: 3000}) || f.asked.Load() != 3 {
		t.Errorf("queueHolding = %+v after %d requests, want 3 messages after 3", got, f.asked.Load())
	}
	// The count arrives before the memory: it waits for the memory.
	f.asked.Store(0)
	f.countOnly.Store(5)
	got, err = a.queueHolding(context.Background(), "bench.wait.1h", 3, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got != (queueMemory{Messages: 3, Memory: 3000}) || f.asked.Load() != 6 {
		t.Errorf("queueHolding = %+v after %d requests, want 3 messages and their memory after 6", got, f.asked.Load())
	}
	f.countOnly.Store(0)
	// Never as many as asked for: it gives up, saying how far it got.
	f.asked.Store(0)
	_, err = a.queueHolding(context.Background(), "bench.wait.1h", 10, 600*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "3 of 10 messages") {
		t.Errorf("queueHolding of a queue that never fills: %v, want an error counting 3 of 10", err)
	}
	if _, err := a.queueHolding(context.Background(), "gone", 1, 300*time.Millisecond); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("queueHolding of a missing queue: %v, want a 404", err)
	}
}

func TestBrokerAPISettled(t *testing.T) {
	// The node hands back 100 MiB a reading, then holds still.
	var readings atomic.Int64
	f := &fakeManagement{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/nodes/") {
			used := uint64(1000<<20) - uint64(min(readings.Add(1), 3))*(100<<20)
			f.setNode(node(used, 8<<30, used, 300<<20))
		}
		f.ServeHTTP(w, r)
	})
	a, _ := apiFor(t, h)
	got, err := a.settled(context.Background(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got.Used != 700<<20 {
		t.Errorf("settled at %d MiB, want 700", got.Used>>20)
	}
}

func TestRoomFor(t *testing.T) {
	perMem, _ := waitingCost(400)
	tests := []struct {
		name string
		node nodeMemory
		n    int
		want string // part of the error; empty for none
	}{
		{"plenty", nodeMemory{Name: "rabbit@a", Used: 1 << 30, Limit: 10 << 30, DiskFree: 80 << 30, DiskFreeLimit: 50 << 20}, 1_000_000, ""},
		{"memory short", nodeMemory{Name: "rabbit@a", Used: 1 << 30, Limit: 1<<30 + perMem*999, DiskFree: 80 << 30}, 1000, "--waiting 1000: 1,000 messages of 400 bytes need about"},
		{"disk short", nodeMemory{Name: "rabbit@a", Used: 1 << 30, Limit: 100 << 30, DiskFree: 60 << 20, DiskFreeLimit: 50 << 20}, 100_000, "of the broker's disk"},
		{"alarm raised", nodeMemory{Name: "rabbit@a", Used: 1 << 30, Limit: 10 << 30, Alarm: true}, 1, "resource alarm"},
		{"used over the limit", nodeMemory{Name: "rabbit@a", Used: 11 << 30, Limit: 10 << 30}, 1, "0 MiB left"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := roomFor(tt.node, tt.n, 400)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("roomFor = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("roomFor = %v, want an error with %q", err, tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), "--waiting"):
				t.Errorf("roomFor = %v, want it to name --waiting", err)
			}
		})
	}
}

func TestUseBrokerAPI(t *testing.T) {
	// Unreachable: no error, the memory figure will say n/a and why.
	a, srv := apiFor(t, &fakeManagement{})
	srv.Close()
	var progress strings.Builder
	b := &bench{out: &progress, opts: Options{Waiting: 1_000_000}}
	if err := b.useBrokerAPI(context.Background(), a); err != nil {
		t.Fatalf("useBrokerAPI with the API down = %v, want nil", err)
	}
	if b.api != nil || !strings.HasPrefix(b.apiNote, "n/a: management API unreachable at http://127.0.0.1:") {
		t.Errorf("api %v, note %q; want none and the reason", b.api, b.apiNote)
	}
	if !strings.Contains(progress.String(), "WARNING") {
		t.Errorf("progress %q, want a warning", progress.String())
	}

	// A node too small for --waiting: refused, naming the flag.
	a, _ = apiFor(t, &fakeManagement{node: node(100<<20, 200<<20, 100<<20, 80<<20)})
	b = &bench{opts: Options{Waiting: 1_000_000}}
	if err := b.useBrokerAPI(context.Background(), a); err == nil || !strings.Contains(err.Error(), "--waiting 1000000") {
		t.Errorf("useBrokerAPI with 100 MiB left = %v, want --waiting refused", err)
	}

	// Room enough: kept, with the limit for the report.
	a, _ = apiFor(t, &fakeManagement{node: node(100<<20, 8<<30, 100<<20, 80<<20)})
	b = &bench{opts: Options{Waiting: 1000}}
	if err := b.useBrokerAPI(context.Background(), a); err != nil || b.api != a || b.memLimit != 8<<30 {
		t.Errorf("useBrokerAPI = %v, api %v, limit %d; want it kept with the limit", err, b.api, b.memLimit)
	}
}
