package peers

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeClock advances by step on every reading.
type fakeClock struct {
	now  time.Time
	step time.Duration
}

func (c *fakeClock) read() time.Time {
	c.now = c.now.Add(c.step)
	return c.now
}

// idThatFails finds an id whose attempts fail exactly as pattern says
// (true: fails), so a test can lean on Fails without hard-coding hashes.
func idThatFails(t *testing.T, w Workload, pattern ...bool) string {
	t.Helper()
	for i := range 1_000_000 {
		id := w.ID(i)
		ok := true
		for a, fail := range pattern {
			if w.Fails(id, a+1) != fail {
				ok = false
				break
			}
		}
		if ok {
			return id
		}
	}
	t.Fatalf("no id fails as %v", pattern)
	return ""
}

func TestTracker(t *testing.T) {
	w := Workload{Jobs: 2, FailRate: 0.3, Delay: 100 * time.Millisecond, MaxRetries: 2}
	okFirst := idThatFails(t, w, false)
	failOnce := idThatFails(t, w, true, false)
	failAll := idThatFails(t, w, true, true, true)
	type step struct {
		id      string
		attempt int
		wantErr bool
	}
	tests := []struct {
		name     string
		steps    []step
		want     Tally
		wantDone bool
	}{
		{
			name:  "delivered at once, then a duplicate",
			steps: []step{{okFirst, 1, false}, {okFirst, 1, false}},
			want:  Tally{Delivered: 1, Duplicates: 1, Attempts: 2},
		},
		{
			name:     "a retry 10ms after its delay (the clock moves 10ms a reading) and a job parked",
			steps:    []step{{failOnce, 1, true}, {failOnce, 2, false}, {failAll, 1, true}, {failAll, 2, true}, {failAll, 3, true}},
			want:     Tally{Delivered: 1, ParkedSeen: 1, Attempts: 5, Retries: 3},
			wantDone: true,
		},
		{
			name:  "a redelivered first attempt is no retry and has no lateness",
			steps: []step{{failOnce, 1, true}, {failOnce, 1, true}},
			want:  Tally{Attempts: 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTracker(w)
			clock := &fakeClock{now: time.Unix(0, 0), step: 10 * time.Millisecond}
			tr.clock = clock.read
			for _, s := range tt.steps {
				if err := tr.Attempt(s.id, s.attempt); (err != nil) != s.wantErr {
					t.Fatalf("Attempt(%q, %d) = %v, want error %v", s.id, s.attempt, err, s.wantErr)
				}
			}
			got := tr.Tally()
			got.Lateness, got.Last = nil, time.Time{}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Tally() (-want +got):\n%s", diff)
			}
			done := false
			select {
			case <-tr.Done():
				done = true
			default:
			}
			if done != tt.wantDone {
				t.Errorf("done = %v, want %v", done, tt.wantDone)
			}
		})
	}
}

func TestTrackerLateness(t *testing.T) {
	w := Workload{Jobs: 1, FailRate: 0.3, Delay: 100 * time.Millisecond, MaxRetries: 2}
	id := idThatFails(t, w, true, false)
	tr := newTracker(w)
	now := time.Unix(0, 0)
	tr.clock = func() time.Time { return now }
	_ = tr.Attempt(id, 1)
	now = now.Add(130 * time.Millisecond) // 30ms after the retry was due
	if err := tr.Attempt(id, 2); err != nil {
		t.Fatalf("attempt 2: %v", err)
	}
	got := tr.Tally()
	if diff := cmp.Diff([]time.Duration{30 * time.Millisecond}, got.Lateness); diff != "" {
		t.Errorf("lateness (-want +got):\n%s", diff)
	}
	if !got.Last.Equal(now) {
		t.Errorf("last finish = %v, want %v", got.Last, now)
	}
}

func TestAttemptNextCounts(t *testing.T) {
	w := Workload{Jobs: 1, FailRate: 0.3, Delay: time.Millisecond, MaxRetries: 10}
	id := idThatFails(t, w, true, true, false)
	tr := newTracker(w)
	for i, wantErr := range []bool{true, true, false} {
		if err := tr.AttemptNext(id); (err != nil) != wantErr {
			t.Fatalf("AttemptNext #%d = %v, want error %v", i+1, err, wantErr)
		}
	}
	if got := tr.Tally(); got.Delivered != 1 || got.Retries != 2 {
		t.Errorf("Tally() = %+v, want 1 delivered after 2 retries", got)
	}
}
