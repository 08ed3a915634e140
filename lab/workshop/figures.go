package workshop

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/relay-demo/relay/lab/internal/stats"
)

// attempt is one call to the downstream.
type attempt struct {
	start, end time.Time
	ok         bool
}

// record is everything a run saw, by notification id.
type record struct {
	// published is when each accepted notification arrived: when the
	// release let it into the strategy's ingress (the whole load is
	// published before the clock starts; see publishLoad).
	published map[string]time.Time
	// attempts are each notification's calls to the downstream, in order.
	attempts map[string][]attempt
	// scheduled are the waits the strategy scheduled after each failure,
	// in order.
	scheduled map[string][]time.Duration
	// parked, inFlight: where the broker had each notification at the end.
	parked, inFlight map[string]bool
	// copies counts parked copies in the strategy's extra dead-letter
	// queues.
	copies int
	// publishes counts the strategy's own confirmed publishes.
	publishes int
	// end is when the run stopped; timedOut, whether its bound stopped it.
	start, end time.Time
	timedOut   bool
}

func newRecord() *record {
	return &record{
		published: map[string]time.Time{}, attempts: map[string][]attempt{}, scheduled: map[string][]time.Duration{},
		parked: map[string]bool{}, inFlight: map[string]bool{},
	}
}

// Duration is a time.Duration that reads well in a table and marshals to
// JSON as milliseconds.
type Duration time.Duration

// String rounds to what a reader can compare: 3ms, 250ms, 1.2s; "-" for
// nothing measured.
func (d Duration) String() string {
	t := time.Duration(d)
	switch {
	case t < 0:
		return "-"
	case t < 10*time.Millisecond:
		return t.Round(100 * time.Microsecond).String()
	case t < time.Second:
		return t.Round(time.Millisecond).String()
	default:
		return t.Round(10 * time.Millisecond).String()
	}
}

// MarshalJSON writes milliseconds, or null for nothing measured.
func (d Duration) MarshalJSON() ([]byte, error) {
	if d < 0 {
		return []byte("null"), nil
	}
	return json.Marshal(math.Round(float64(d)/float64(time.Millisecond)*10) / 10)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var ms *float64
	if err := json.Unmarshal(b, &ms); err != nil {
		return err
	}
	if ms == nil {
		*d = none
		return nil
	}
	*d = Duration(math.Round(*ms * float64(time.Millisecond)))
	return nil
}

// none marks a percentile of an empty set.
const none = Duration(-1)

// Figures are one run's measurements.
type Figures struct {
	Strategy string `json:"strategy"`
	// Skipped says why the strategy could not run on this broker; Failed,
	// what went wrong when it tried. The rest is then empty.
	Skipped string `json:"skipped,omitempty"`
	Failed  string `json:"failed,omitempty"`
	// Accepted counts notifications the broker confirmed.
	Accepted int `json:"accepted"`
	// Delivered, Parked and InFlight count distinct notifications by where
	// they ended: delivered downstream (at least once), in the dead-letter
	// queue, or still in one of the strategy's queues when the run stopped.
	Delivered int `json:"delivered"`
	Parked    int `json:"parked"`
	InFlight  int `json:"in_flight"`
	// Lost is accepted − delivered − parked − in flight: in none of them.
	Lost int `json:"lost"`
	// Duplicates counts deliveries of a notification already delivered.
	Duplicates int `json:"duplicates"`
	// Attempts counts every call to the downstream.
	Attempts int `json:"attempts"`
	// Copies counts extra parked copies in dead-letter queues bound on
	// business headers.
	Copies int `json:"parked_copies,omitempty"`
	// Scheduled and Actual are the waits before retries: what the strategy
	// asked for, and the time from the failure to the next attempt.
	ScheduledP50 Duration `json:"scheduled_delay_p50_ms"`
	ScheduledP99 Duration `json:"scheduled_delay_p99_ms"`
	ActualP50    Duration `json:"actual_delay_p50_ms"`
	ActualP99    Duration `json:"actual_delay_p99_ms"`
	// Healthy is the time from arrival to first attempt of the
	// notifications that never failed (or, if they were never attempted,
	// to the end).
	HealthyP50 Duration `json:"healthy_wait_p50_ms"`
	HealthyP99 Duration `json:"healthy_wait_p99_ms"`
	// HoLP99 is the 99th percentile, over notifications, of the time each
	// spent queued behind others beyond what its schedule asked for (see
	// headOfLine).
	HoLP99 Duration `json:"head_of_line_p99_ms"`
	// PublishesPer counts confirmed publishes per accepted notification:
	// the first publish plus every one the strategy made. The broker's own
	// dead-lettering and requeues are not publishes.
	PublishesPer float64 `json:"publishes_per_notification"`
	// Wall is the run's duration; TimedOut, whether its bound ended it.
	Wall     Duration `json:"wall_ms"`
	TimedOut bool     `json:"timed_out"`
	// Verdict sums the row up in a line, against the other rows of the
	// same compare (see rowVerdict).
	Verdict string `json:"verdict,omitempty"`
}

// skippedRow is the row of a strategy the broker cannot run.
func skippedRow(strategy, reason string) Figures {
	return emptyRow(Figures{Strategy: strategy, Skipped: reason})
}

// emptyRow marks every figure of f as not measured.
func emptyRow(f Figures) Figures {
	return Figures{Strategy: f.Strategy, Skipped: f.Skipped, Failed: f.Failed, ScheduledP50: none, ScheduledP99: none, ActualP50: none,
		ActualP99: none, HealthyP50: none, HealthyP99: none, HoLP99: none, Wall: none}
}

// measure turns a record into figures. base is, for each notification, the
// time to its first attempt with no failures at all; head-of-line waits are
// counted beyond it.
func measure(strategy string, r *record, base baseline) Figures {
	f := Figures{Strategy: strategy, Accepted: len(r.published), Copies: r.copies,
		Wall: Duration(r.end.Sub(r.start)), TimedOut: r.timedOut}
	var scheduled, actual, healthy, hol []time.Duration
	for id, published := range r.published {
		atts := r.attempts[id]
		f.Attempts += len(atts)
		oks := 0
		for _, a := range atts {
			if a.ok {
				oks++
			}
		}
		f.Duplicates += max(oks-1, 0)
		delivered := oks > 0
		switch {
		case delivered:
			f.Delivered++
		case r.parked[id]:
			f.Parked++
		case r.inFlight[id]:
			f.InFlight++
		default:
			f.Lost++
		}
		sched := r.scheduled[id]
		scheduled = append(scheduled, sched...)
		for k := 1; k < len(atts); k++ {
			actual = append(actual, atts[k].start.Sub(atts[k-1].end))
		}
		switch {
		case len(atts) == 0:
			healthy = append(healthy, r.end.Sub(published))
		case !slices.ContainsFunc(atts, func(a attempt) bool { return !a.ok }):
			healthy = append(healthy, atts[0].start.Sub(published))
		}
		hol = append(hol, headOfLine(published, atts, sched, r.end, base[id], delivered || r.parked[id]))
	}
	f.ScheduledP50, f.ScheduledP99 = percentile(scheduled, 50), percentile(scheduled, 99)
	f.ActualP50, f.ActualP99 = percentile(actual, 50), percentile(actual, 99)
	f.HealthyP50, f.HealthyP99 = percentile(healthy, 50), percentile(healthy, 99)
	f.HoLP99 = percentile(hol, 99)
	if f.Accepted > 0 {
		f.PublishesPer = float64(f.Accepted+r.publishes) / float64(f.Accepted)
	}
	return f
}

// headOfLine is the time one notification spent waiting behind others
// beyond what was meant: before its first attempt, whatever exceeds its
// baseline (when a plain queue would have reached it); before each retry, whatever exceeds the wait the strategy
// scheduled; and, if it never finished, the same for the wait it was in
// when the run stopped.
func headOfLine(published time.Time, atts []attempt, sched []time.Duration, end time.Time, baseline time.Duration, finished bool) time.Duration {
	over := func(waited, meant time.Duration) time.Duration { return max(waited-meant, 0) }
	meant := func(k int) time.Duration { // the wait scheduled after failure k (from 0)
		if k < len(sched) {
			return sched[k]
		}
		return 0
	}
	if len(atts) == 0 {
		return over(end.Sub(published), baseline)
	}
	total := over(atts[0].start.Sub(published), baseline)
	for k := 1; k < len(atts); k++ {
		total += over(atts[k].start.Sub(atts[k-1].end), meant(k-1))
	}
	if last := len(atts) - 1; !finished && !atts[last].ok {
		total += over(end.Sub(atts[last].end), meant(last))
	}
	return total
}

// percentile is the nearest-rank p-th percentile of ds (0 < p ≤ 100), in
// any order and left unchanged, or none for an empty set.
func percentile(ds []time.Duration, p float64) Duration {
	if len(ds) == 0 {
		return none
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return Duration(stats.Percentile(s, p))
}

// pair renders two figures as "a / b".
func pair(a, b Duration) string { return fmt.Sprintf("%s / %s", a, b) }
