package workshop

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// try is an attempt from start to end (milliseconds after t0).
func try(start, end int, ok bool) attempt { return attempt{start: at(start), end: at(end), ok: ok} }

func TestMeasureCountsWhereEveryNotificationEnded(t *testing.T) {
	r := newRecord()
	r.start, r.end = t0, at(5000)
	r.published = map[string]time.Time{
		"healthy": at(0), "recovered": at(0), "parked": at(0), "waiting": at(0), "lost": at(0), "twice": at(0),
		"never-tried": at(4000),
	}
	r.attempts = map[string][]attempt{
		"healthy":   {try(2, 4, true)},
		"recovered": {try(1, 3, false), try(303, 305, false), try(805, 807, true)},
		"parked":    {try(1, 3, false), try(253, 255, false)},
		"waiting":   {try(1, 3, false)},
		"lost":      {try(1, 3, false)},
		"twice":     {try(1, 3, true), try(10, 12, true), try(20, 22, true)},
	}
	r.scheduled = map[string][]time.Duration{
		"recovered": {ms(250), ms(500)},
		"parked":    {ms(250)},
		"waiting":   {ms(250)},
	}
	r.parked = map[string]bool{"parked": true, "healthy": true} // a delivered one parked too counts as delivered
	r.inFlight = map[string]bool{"waiting": true, "never-tried": true}
	r.publishes = 7
	r.copies = 1

	// A plain queue would have reached each of them 1ms after the start.
	base := baseline{}
	for id := range r.published {
		base[id] = ms(1)
	}
	got := measure("x", r, base)
	want := Figures{
		Strategy: "x", Accepted: 7, Delivered: 3, Parked: 1, InFlight: 2, Lost: 1, Duplicates: 2, Attempts: 11, Copies: 1,
		ScheduledP50: Duration(ms(250)), ScheduledP99: Duration(ms(500)),
		// Failure to next attempt: 300, 500, 250 (and the duplicates' 7 and 8).
		ActualP50: Duration(ms(250)), ActualP99: Duration(ms(500)),
		// healthy waited 2ms, twice 1ms, never-tried 1000ms until the end.
		HealthyP50: Duration(ms(2)), HealthyP99: Duration(ms(1000)),
		// never-tried: 1000 - 1 = 999ms behind others; waiting: stuck 4747ms past its 250ms;
		// lost: 4997ms since its failure with nothing scheduled, the worst.
		HoLP99:       Duration(ms(4997)),
		PublishesPer: 2,
		Wall:         Duration(ms(5000)),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("measure (-want +got):\n%s", diff)
	}
	if sum := got.Delivered + got.Parked + got.InFlight + got.Lost; sum != got.Accepted {
		t.Errorf("delivered + parked + in flight + lost = %d, want accepted %d", sum, got.Accepted)
	}
}

func TestMeasureEmptyRun(t *testing.T) {
	r := newRecord()
	r.start, r.end = t0, at(10)
	got := measure("x", r, nil)
	want := Figures{Strategy: "x", ScheduledP50: none, ScheduledP99: none, ActualP50: none, ActualP99: none,
		HealthyP50: none, HealthyP99: none, HoLP99: none, Wall: Duration(ms(10))}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("measure (-want +got):\n%s", diff)
	}
}

func TestHeadOfLine(t *testing.T) {
	tests := []struct {
		name     string
		atts     []attempt
		sched    []time.Duration
		finished bool
		want     time.Duration
	}{
		{"on time", []attempt{try(1, 3, true)}, nil, true, 0},
		{"first attempt late", []attempt{try(41, 43, true)}, nil, true, ms(40)},
		{"retry on schedule", []attempt{try(1, 3, false), try(253, 255, true)}, []time.Duration{ms(250)}, true, 0},
		// A 250ms wait that took 750ms: stuck behind a longer one.
		{"retry held back", []attempt{try(1, 3, false), try(753, 755, true)}, []time.Duration{ms(250)}, true, ms(500)},
		{"both add up", []attempt{try(11, 13, false), try(363, 365, true)}, []time.Duration{ms(250)}, true, ms(110)},
		// Requeued at once, redelivered at once: nothing beyond the schedule.
		{"immediate retries", []attempt{try(1, 3, false), try(4, 6, false), try(7, 9, true)}, nil, true, ms(2)},
		{"never attempted", nil, nil, false, ms(999)},
		{"stuck in a wait at the end", []attempt{try(1, 3, false)}, []time.Duration{ms(250)}, false, ms(747)},
		{"parked: its last wait does not count", []attempt{try(1, 3, false)}, nil, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := headOfLine(t0, tt.atts, tt.sched, at(1000), ms(1), tt.finished)
			if got != tt.want {
				t.Errorf("headOfLine = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = ms(100 - i) // unsorted on purpose
	}
	tests := []struct {
		name string
		ds   []time.Duration
		p    float64
		want Duration
	}{
		{"empty", nil, 50, none},
		{"one", []time.Duration{ms(5)}, 99, Duration(ms(5))},
		{"median of four is the second", []time.Duration{ms(4), ms(1), ms(3), ms(2)}, 50, Duration(ms(2))},
		{"p50 of 1..100", hundred, 50, Duration(ms(50))},
		{"p99 of 1..100", hundred, 99, Duration(ms(99))},
		{"p100 is the max", hundred, 100, Duration(ms(100))},
		{"p99 of ten is the max", hundred[90:], 99, Duration(ms(10))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.ds, tt.p); got != tt.want {
				t.Errorf("percentile = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDurationReadsWell(t *testing.T) {
	tests := []struct {
		d        Duration
		text     string
		jsonText string
	}{
		{none, "-", "null"},
		{Duration(0), "0s", "0"},
		{Duration(840 * time.Microsecond), "800µs", "0.8"},
		{Duration(12345 * time.Microsecond), "12ms", "12.3"},
		{Duration(1234567 * time.Microsecond), "1.23s", "1234.6"},
	}
	for _, tt := range tests {
		if got := tt.d.String(); got != tt.text {
			t.Errorf("String(%d) = %q, want %q", tt.d, got, tt.text)
		}
		b, err := json.Marshal(tt.d)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tt.jsonText {
			t.Errorf("JSON(%d) = %s, want %s", tt.d, b, tt.jsonText)
		}
		var back Duration
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if want := tt.d; want >= 0 {
			want = Duration(time.Duration(want).Round(100 * time.Microsecond))
			if back != want {
				t.Errorf("JSON round trip of %d gave %d, want %d", tt.d, back, want)
			}
		} else if back != none {
			t.Errorf("JSON round trip of none gave %d", back)
		}
	}
}
