package retry

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// fakeAPI is a management API that answers /api/overview with status and
// body, and counts the requests of each path.
type fakeAPI struct {
	status   atomic.Int64
	body     atomic.Value // string
	overview atomic.Int64
	queues   atomic.Int64
}

func newFakeAPI(t *testing.T, status int, body string) (*fakeAPI, *Management) {
	t.Helper()
	f := &fakeAPI{}
	f.status.Store(int64(status))
	f.body.Store(body)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/api/overview":
			f.overview.Add(1)
			w.WriteHeader(int(f.status.Load()))
			_, _ = w.Write([]byte(f.body.Load().(string)))
		case strings.HasPrefix(r.URL.Path, "/api/queues/"):
			f.queues.Add(1)
			_, _ = w.Write([]byte(`{"messages":3,"messages_ready":1,"messages_unacknowledged":1,"leader":"rabbit@n1"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return f, &Management{URL: strings.Replace(srv.URL, "http://", "http://guest:secret@", 1), Vhost: "/"}
}

// connIn is an AMQP connection as it looks once the broker of cluster
// has announced itself.
func connIn(cluster string) *amqp.Connection {
	props := amqp.Table{"product": "RabbitMQ"}
	if cluster != "" {
		props["cluster_name"] = cluster
	}
	return &amqp.Connection{Properties: props}
}

func TestManagementCheck(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		body    string
		conn    string // the cluster the AMQP connection announces
		wantErr bool   // ErrOtherCluster
		// wantOverview is how many times the API is asked, over two
		// checks and a read of the counts.
		wantOverview int64
	}{
		{name: "same cluster", status: 200, body: `{"cluster_name":"rabbit@n1","rabbitmq_version":"4.3.6"}`, conn: "rabbit@n1", wantOverview: 1},
		{name: "another cluster", status: 200, body: `{"cluster_name":"rabbit@localhost"}`, conn: "relay43@localhost", wantErr: true, wantOverview: 1},
		{name: "not found", status: 404, body: `{"error":"Object Not Found"}`, conn: "rabbit@n1", wantErr: true, wantOverview: 1},
		{name: "credentials refused", status: 401, body: `{"error":"not_authorised"}`, conn: "rabbit@n1", wantErr: true, wantOverview: 1},
		{name: "no cluster_name", status: 200, body: `{}`, conn: "rabbit@n1", wantErr: true, wantOverview: 1},
		// Nothing to compare: the API is used as it is, unasked.
		{name: "connection without cluster_name", status: 200, body: `{"cluster_name":"x"}`, conn: "", wantOverview: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, m := newFakeAPI(t, tt.status, tt.body)
			ctx := context.Background()
			err := m.Check(ctx, connIn(tt.conn))
			if got := errors.Is(err, ErrOtherCluster); got != tt.wantErr {
				t.Fatalf("Check: %v, want ErrOtherCluster: %t", err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("the error quotes the password: %v", err)
			}
			// Kept: asked once, whatever the connection says next.
			if err2 := m.Check(ctx, nil); err2 != err {
				t.Errorf("second Check: %v, want %v", err2, err)
			}
			_, cerr := m.Counts(ctx, "jobs")
			if got := errors.Is(cerr, ErrOtherCluster); got != tt.wantErr {
				t.Errorf("Counts: %v, want ErrOtherCluster: %t", cerr, tt.wantErr)
			}
			if n := f.overview.Load(); n != tt.wantOverview {
				t.Errorf("/api/overview asked %d times, want %d", n, tt.wantOverview)
			}
			if wantQueues := map[bool]int64{true: 0, false: 1}[tt.wantErr]; f.queues.Load() != wantQueues {
				t.Errorf("/api/queues asked %d times, want %d: another cluster's API is not used", f.queues.Load(), wantQueues)
			}
		})
	}
}

func TestManagementCheckNamesBothClusters(t *testing.T) {
	_, m := newFakeAPI(t, 200, `{"cluster_name":"rabbit@localhost"}`)
	err := m.Check(context.Background(), connIn("relay43@localhost"))
	for _, want := range []string{"rabbit@localhost", "relay43@localhost", "127.0.0.1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
}

// An API that does not answer, or answers 5xx, has not said whose it
// is: the next use asks again.
func TestManagementCheckAsksAgain(t *testing.T) {
	f, m := newFakeAPI(t, 503, `{"error":"starting"}`)
	ctx := context.Background()
	if err := m.Check(ctx, connIn("rabbit@n1")); err == nil || errors.Is(err, ErrOtherCluster) {
		t.Fatalf("Check on a 503: %v, want an error other than ErrOtherCluster", err)
	}
	f.status.Store(200)
	f.body.Store(`{"cluster_name":"rabbit@n1"}`)
	if _, err := m.Counts(ctx, "jobs"); err != nil {
		t.Fatalf("Counts once the API answers: %v", err)
	}
	if n := f.overview.Load(); n != 2 {
		t.Errorf("/api/overview asked %d times, want 2", n)
	}

	unreachable := &Management{URL: "http://guest:guest@127.0.0.1:1", Client: &http.Client{Timeout: time.Second}}
	for range 2 {
		if err := unreachable.Check(ctx, connIn("rabbit@n1")); err == nil || errors.Is(err, ErrOtherCluster) {
			t.Errorf("Check of an unreachable API: %v, want an error other than ErrOtherCluster", err)
		}
	}
}

// The watch for held dead letters stops at another cluster's API, and
// says so once, through otherCluster, instead of every 30 s.
func TestHeldWatchOtherCluster(t *testing.T) {
	var logs bytes.Buffer
	calls := 0
	w := &heldWatch{
		queues: []string{"jobs", "wait.1s"},
		counts: func(context.Context, string) (QueueCounts, error) {
			return QueueCounts{}, ErrOtherCluster
		},
		after:        3 * time.Minute,
		log:          slog.New(slog.NewTextHandler(&logs, nil)),
		otherCluster: func() { calls++ },
	}
	w.check(context.Background(), time.Now())
	if !w.off || calls != 1 {
		t.Errorf("after ErrOtherCluster: off %t, otherCluster called %d times; want off, once", w.off, calls)
	}
	if logs.Len() != 0 {
		t.Errorf("the watch logged on its own: %s", logs.String())
	}
}

// TestManagementFor checks what is derived from an AMQP URL: the same host
// and credentials on the management port, only for a broker on the
// default port; moved elsewhere, nothing.
func TestManagementFor(t *testing.T) {
	tests := []struct {
		amqp      string
		want      string
		wantVhost string
		wantErr   error // nil, ErrManagementUnknown, or any (errAny)
	}{
		{"amqp://u:p@rabbit:5672/", "http://u:p@rabbit:15672", "/", nil},
		{"amqp://rabbit", "http://guest:guest@rabbit:15672", "/", nil},
		{"amqps://u:p@rabbit:5671/prod", "https://u:p@rabbit:15671", "prod", nil},
		{"amqp://u:p@rabbit/a%2Fb", "http://u:p@rabbit:15672", "a/b", nil},
		{"amqp://u:p@localhost:5673/", "", "", ErrManagementUnknown},
		{"amqps://u:p@rabbit:5672/", "", "", ErrManagementUnknown},
		{"http://rabbit:15672", "", "", errAny},
		{"amqp//u:p@localhost:5672/", "", "", errAny},
	}
	for _, tt := range tests {
		t.Run(tt.amqp, func(t *testing.T) {
			m, err := ManagementFor(tt.amqp)
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("ManagementFor: %v", err)
			case tt.wantErr == errAny && err == nil, tt.wantErr == ErrManagementUnknown && !errors.Is(err, ErrManagementUnknown):
				t.Fatalf("ManagementFor = %+v, %v; want %v", m, err, tt.wantErr)
			case tt.wantErr != nil:
				return
			}
			if m.URL != tt.want || m.Vhost != tt.wantVhost {
				t.Errorf("ManagementFor = %s vhost %q, want %s vhost %q", m.URL, m.Vhost, tt.want, tt.wantVhost)
			}
		})
	}
}

var errAny = errors.New("any error")
