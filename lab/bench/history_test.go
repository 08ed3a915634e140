package bench

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
)

var t0 = time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)

func at(i int) time.Time { return t0.Add(time.Duration(i) * time.Millisecond) }

func TestFeedBatches(t *testing.T) {
	tests := []struct {
		name     string
		first, n int
	}{
		{"less than a batch", 0, 10},
		{"a notification that fails every way first", 100, 1},
		{"several batches", 7, 2000},
		{"exactly on a boundary or not", 0, feedBatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			batches, next, evs := feedBatches(tt.first, tt.n, at)
			if evs < tt.n {
				t.Errorf("%d events, want at least %d", evs, tt.n)
			}
			_, last := historyNotification(historyID(next-1), next-1, at(next-1))
			if evs-len(last) >= tt.n {
				t.Errorf("%d events: the last notification, %d, was not needed for %d", evs, next-1, tt.n)
			}
			accepted := map[string]bool{}
			gotEvents, gotNotifications := 0, 0
			for k, b := range batches {
				size := len(b.accepted) + len(b.events)
				if size > feedBatch || size == 0 || (k < len(batches)-1 && size != feedBatch) {
					t.Errorf("batch %d of %d holds %d messages, want %d (fewer only for the last)", k+1, len(batches), size, feedBatch)
				}
				for _, a := range b.accepted {
					if accepted[a.ID] {
						t.Errorf("notification %s accepted twice", a.ID)
					}
					accepted[a.ID] = true
				}
				// The API publishes a notification before any worker
				// handles it: its accepted record comes first.
				for _, e := range b.events {
					if !accepted[e.ID] {
						t.Errorf("batch %d: an event of %s before its accepted record", k+1, e.ID)
					}
				}
				gotEvents += len(b.events)
				gotNotifications += len(b.accepted)
			}
			if gotEvents != evs || gotNotifications != next-tt.first {
				t.Errorf("batches hold %d events of %d notifications; feedBatches said %d of %d", gotEvents, gotNotifications, evs, next-tt.first)
			}
			if first := batches[0].accepted[0].ID; first != historyID(tt.first) {
				t.Errorf("first notification %s, want %s", first, historyID(tt.first))
			}
		})
	}
}

// TestHistoryNotifications checks the mix the markdown page describes, and
// that the store takes it, with the statuses it says.
func TestHistoryNotifications(t *testing.T) {
	events := 0
	for i := range 1000 {
		_, evs := historyNotification(historyID(i), i, at(i))
		events += len(evs)
	}
	if got := float64(events) / 1000; got != 2.34 {
		t.Errorf("%.3f events per notification, want the 2.34 the report says", got)
	}

	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	batches, _, _ := feedBatches(0, 300, at)
	if _, err := feed(ctx, st, batches, 300); err != nil {
		t.Fatal(err)
	}
	status := func(i int) map[string]notification.Status {
		n, err := st.Get(ctx, historyID(i))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]notification.Status{}
		for _, c := range n.Copies {
			out[c.Channel] = c.Status
		}
		return out
	}
	for i, want := range map[int]map[string]notification.Status{
		0:  {"email": notification.StatusParked, "webhook": notification.StatusDelivered},
		1:  {"email": notification.StatusDelivered, "webhook": notification.StatusDelivered},
		10: {"email": notification.StatusDelivered, "webhook": notification.StatusDelivered},
	} {
		if diff := cmp.Diff(want, status(i)); diff != "" {
			t.Errorf("notification %d (-want +got):\n%s", i, diff)
		}
	}
}

var apiID = regexp.MustCompile(`^ntf_[a-z2-7]{26}$`)

func TestHistoryIDs(t *testing.T) {
	seen := map[string]bool{}
	for i := range 1000 {
		id := historyID(i)
		if !apiID.MatchString(id) {
			t.Fatalf("historyID(%d) = %q, want an id of the API's form", i, id)
		}
		if seen[id] {
			t.Fatalf("historyID(%d) = %q, again", i, id)
		}
		seen[id] = true
	}
	if historyID(5) != historyID(5) {
		t.Error("historyID is not a function of i")
	}
	// As the API's, the ids sort in the order they were made.
	for i := 1; i < 1000; i++ {
		if historyID(i-1) >= historyID(i) {
			t.Fatalf("historyID(%d) = %q is not before historyID(%d) = %q", i-1, historyID(i-1), i, historyID(i))
		}
	}
}

func TestOrderedID(t *testing.T) {
	form := regexp.MustCompile(`^ntf_[0-9a-v]{26}$`)
	for _, n := range []int{1, 2, 7, 1000, 1_000_000, 10_000_000} {
		var is []int
		for i := 0; i < n; i += max(1, n/997) {
			is = append(is, i)
		}
		if is[len(is)-1] != n-1 {
			is = append(is, n-1)
		}
		prev := ""
		for _, i := range is {
			id := orderedID(i, n)
			if !form.MatchString(id) {
				t.Fatalf("orderedID(%d, %d) = %q, want ntf_ and 26 characters of 0-9a-v", i, n, id)
			}
			if id <= prev {
				t.Fatalf("orderedID(%d, %d) = %q, not after the one before, %q", i, n, id, prev)
			}
			prev = id
		}
		// Neighbours sort in order too, not only distant ones.
		if n > 1 && orderedID(n-2, n) >= orderedID(n-1, n) {
			t.Errorf("n=%d: the last two ids out of order", n)
		}
	}
	// Spread over the whole range: the first ids of a million start low,
	// the last high.
	if first, last := orderedID(0, 1_000_000), orderedID(999_999, 1_000_000); !strings.HasPrefix(first, "ntf_0") || !strings.HasPrefix(last, "ntf_v") {
		t.Errorf("first %s, last %s: want them at the two ends of the range", first, last)
	}
}

func TestHistoryBaseline(t *testing.T) {
	tests := []struct {
		name      string
		rows      []Row
		wantQueue string
		wantRate  *float64
	}{
		{"no worker", []Row{{Queue: "classic", Figure: FigIngestRate, Relay: ptr(5000)}}, "", nil},
		{"the fastest queue type", []Row{
			{Queue: "classic", Figure: FigWorkerRate, Relay: ptr(12000), Raw: ptr(20000)},
			{Queue: "quorum", Figure: FigWorkerRate, Relay: ptr(6000), Raw: ptr(7000)},
		}, "classic", ptr(12000)},
		{"the fastest, second", []Row{
			{Queue: "classic", Figure: FigWorkerRate, Relay: ptr(5000)},
			{Queue: "quorum", Figure: FigWorkerRate, Relay: ptr(6000)},
		}, "quorum", ptr(6000)},
		{"a worker row without a figure", []Row{{Queue: "classic", Figure: FigWorkerRate, Note: "n/a"}}, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			queue, rate := historyBaseline(tt.rows)
			if queue != tt.wantQueue || !cmp.Equal(rate, tt.wantRate) {
				t.Errorf("historyBaseline = %q, %v; want %q, %v", queue, deref(rate), tt.wantQueue, deref(tt.wantRate))
			}
		})
	}
}

func deref(v *float64) any {
	if v == nil {
		return nil
	}
	return *v
}

func TestCheckLoopbackDSN(t *testing.T) {
	tests := []struct {
		dsn  string
		want string // in the error; empty for none
	}{
		{"postgres://postgres@127.0.0.1:5432/test?sslmode=disable", ""},
		{"postgresql://relay:pw@localhost/relay", ""},
		{"postgres://[::1]:5432/test", ""},
		{"postgres:///test?host=/var/run/postgresql", ""},
		{"postgres://relay:s3cret@db.example.com:5432/relay", "loopback"},
		{"postgres://10.0.0.5/relay", "loopback"},
		{"mysql://relay:s3cret@localhost/relay", "HISTORY_BENCH_DSN"},
		{"host=localhost user=relay password=s3cret", "HISTORY_BENCH_DSN"},
	}
	for _, tt := range tests {
		err := checkLoopbackDSN(tt.dsn)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("checkLoopbackDSN(%q) = %v, want nil", tt.dsn, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("checkLoopbackDSN(%q) = %v, want an error about %q", tt.dsn, err, tt.want)
		case err != nil && strings.Contains(err.Error(), "s3cret"):
			t.Errorf("checkLoopbackDSN(%q) shows the password: %v", tt.dsn, err)
		}
	}
}

func TestPostgresSchemaName(t *testing.T) {
	b := &bench{prefix: "bench.0123abcd."}
	if got, want := b.postgresSchemaName(), "relay_bench_0123abcd"; got != want {
		t.Errorf("postgresSchemaName = %q, want %q", got, want)
	}
}
