package peers

import (
	"sync"
	"time"
)

// tracker is the worker side's bookkeeping, the same for every system: it
// decides each attempt with Workload.Fails, keeps each job's last failure
// time in memory to measure how late its retry started, counts deliveries
// per id (a second one is a duplicate) and the jobs whose last allowed
// attempt failed (the system parks those), and says when every job has
// finished.
type tracker struct {
	w     Workload
	clock func() time.Time

	mu        sync.Mutex
	tried     map[string]int // the highest attempt seen per id
	failedAt  map[string]time.Time
	delivered map[string]int
	parked    map[string]bool
	late      []time.Duration
	attempts  int
	retries   int
	finished  int
	last      time.Time // when the last job finished
	done      chan struct{}
}

func newTracker(w Workload) *tracker {
	return &tracker{
		w: w, clock: time.Now,
		tried:     make(map[string]int, w.Jobs),
		failedAt:  make(map[string]time.Time, w.Jobs/2),
		delivered: make(map[string]int, w.Jobs),
		parked:    map[string]bool{},
		late:      make([]time.Duration, 0, w.Jobs/2),
		done:      make(chan struct{}),
	}
}

// Attempt is a handler's whole work: attempt (1 for the first) of job id
// starts now. It returns ErrTransient when the attempt fails.
func (t *tracker) Attempt(id string, attempt int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.attempt(id, attempt)
}

// AttemptNext is Attempt for a system that keeps no count of its own
// (watermill's Retry middleware retries in the handler): the attempt is
// one more than the tracker has seen for id.
func (t *tracker) AttemptNext(id string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.attempt(id, t.tried[id]+1)
}

func (t *tracker) attempt(id string, attempt int) error {
	now := t.clock()
	t.attempts++
	if attempt > 1 {
		t.retries++
	}
	t.tried[id] = max(t.tried[id], attempt)
	if f, ok := t.failedAt[id]; ok && attempt > 1 {
		// Late by how much after the scheduled retry time; a negative
		// value is a retry that came early.
		t.late = append(t.late, now.Sub(f.Add(t.w.Delay)))
		delete(t.failedAt, id)
	}
	if t.w.Fails(id, attempt) {
		t.failedAt[id] = now
		if attempt > t.w.MaxRetries && !t.parked[id] {
			t.parked[id] = true
			if t.delivered[id] == 0 {
				t.finish(now)
			}
		}
		return ErrTransient
	}
	t.delivered[id]++
	if t.delivered[id] == 1 && !t.parked[id] {
		t.finish(now)
	}
	return nil
}

func (t *tracker) finish(now time.Time) {
	t.finished++
	t.last = now
	if t.finished == t.w.Jobs {
		close(t.done)
	}
}

// Done is closed once every job has been delivered or failed its last
// allowed attempt.
func (t *tracker) Done() <-chan struct{} { return t.done }

// Progress is the jobs finished and the attempts made so far.
func (t *tracker) Progress() (finished, attempts int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.finished, t.attempts
}

// Tally is what the tracker saw.
type Tally struct {
	// Delivered counts ids handled successfully at least once;
	// Duplicates the successful handlings beyond the first.
	Delivered, Duplicates int
	// ParkedSeen counts ids whose last allowed attempt failed.
	ParkedSeen int
	// Attempts counts every attempt, Retries those after the first.
	Attempts, Retries int
	// Lateness holds, for every retry, when it started minus (the last
	// failure + the delay).
	Lateness []time.Duration
	// Last is when the last job finished.
	Last time.Time
}

// Tally returns the counts so far.
func (t *tracker) Tally() Tally {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := Tally{ParkedSeen: len(t.parked), Attempts: t.attempts, Retries: t.retries, Lateness: append([]time.Duration(nil), t.late...), Last: t.last}
	for _, n := range t.delivered {
		r.Delivered++
		r.Duplicates += n - 1
	}
	return r
}
