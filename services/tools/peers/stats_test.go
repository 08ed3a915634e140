package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPercentile(t *testing.T) {
	ms := func(xs ...int) []time.Duration {
		out := make([]time.Duration, len(xs))
		for i, x := range xs {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	tests := []struct {
		name string
		xs   []time.Duration
		p    float64
		want time.Duration
	}{
		{"none", nil, 50, 0},
		{"one", ms(7), 99, 7 * time.Millisecond},
		{"median of odd, unsorted", ms(5, 1, 3), 50, 3 * time.Millisecond},
		{"median of even: the lower", ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p99 of 100", ms(seq(100)...), 99, 99 * time.Millisecond},
		{"p99 of 1000", ms(seq(1000)...), 99, 990 * time.Millisecond},
		{"p100", ms(3, 9, 1), 100, 9 * time.Millisecond},
		{"negative values", ms(-5, -1, 2), 50, -1 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.xs, tt.p); got != tt.want {
				t.Errorf("percentile(%v) = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

func TestSettle(t *testing.T) {
	start := time.Unix(100, 0)
	tally := Tally{Delivered: 95, Duplicates: 2, ParkedSeen: 3, Attempts: 140, Retries: 40,
		Lateness: []time.Duration{3 * time.Millisecond, time.Millisecond, 2 * time.Millisecond}, Last: start.Add(4 * time.Second)}
	tests := []struct {
		name   string
		parked int
		want   Result
	}{
		{"the server holds every job parked", 3, Result{Delivered: 95, Parked: 3, ParkedSeen: 3, Lost: 2, Duplicates: 2, Attempts: 140, Retries: 40}},
		{"the server lost a parked job", 2, Result{Delivered: 95, Parked: 2, ParkedSeen: 3, Lost: 3, Duplicates: 2, Attempts: 140, Retries: 40}},
		{"the server could not be asked", -1, Result{Delivered: 95, Parked: 3, ParkedSeen: 3, Lost: 2, Duplicates: 2, Attempts: 140, Retries: 40}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Result{Workload: Workload{Jobs: 100}}
			r.settle(tally, tt.parked, start)
			tt.want.Workload = r.Workload
			tt.want.Elapsed = 4 * time.Second
			tt.want.LateP50, tt.want.LateP99, tt.want.LateMax = 2*time.Millisecond, 3*time.Millisecond, 3*time.Millisecond
			if diff := cmp.Diff(tt.want, r); diff != "" {
				t.Errorf("settle (-want +got):\n%s", diff)
			}
		})
	}
}

func TestJobsPerSecond(t *testing.T) {
	tests := []struct {
		name string
		r    Result
		want float64
	}{
		{"ran", Result{Workload: Workload{Jobs: 1000}, Elapsed: 2 * time.Second}, 500},
		{"failed", Result{Workload: Workload{Jobs: 1000}, Elapsed: 2 * time.Second, Err: "timeout"}, 0},
		{"no time", Result{Workload: Workload{Jobs: 1000}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.JobsPerSecond(); got != tt.want {
				t.Errorf("JobsPerSecond() = %v, want %v", got, tt.want)
			}
		})
	}
}
