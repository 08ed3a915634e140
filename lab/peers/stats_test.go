package peers

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

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
