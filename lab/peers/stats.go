package peers

import (
	"slices"
	"time"

	"github.com/relay-demo/relay/lab/internal/stats"
)

// Result is one system's run: what the child measured, printed as JSON,
// and what the parent added from the outside once the child had exited.
type Result struct {
	// Name is the system's flag name, Title its name in the table.
	Name  string `json:"name"`
	Title string `json:"title"`
	// Server is the server the system ran on, with its version.
	Server string `json:"server"`
	// Settings says how the system was set up: intervals, queue types.
	Settings []string `json:"settings,omitempty"`
	Workload Workload `json:"workload"`

	// Elapsed runs from the start of the workers, every job already
	// enqueued, to the last job finished.
	Elapsed    time.Duration `json:"elapsed_ns"`
	Enqueue    time.Duration `json:"enqueue_ns"`
	Delivered  int           `json:"delivered"`
	Parked     int           `json:"parked"`
	ParkedSeen int           `json:"parked_seen"`
	Lost       int           `json:"lost"`
	Duplicates int           `json:"duplicates"`
	Attempts   int           `json:"attempts"`
	Retries    int           `json:"retries"`
	LateP50    time.Duration `json:"late_p50_ns"`
	LateP99    time.Duration `json:"late_p99_ns"`
	LateMax    time.Duration `json:"late_max_ns"`
	// Err is why the run failed (a timeout included); the figures are
	// then partial.
	Err string `json:"error,omitempty"`

	// Filled in by the parent.
	ClientCPU time.Duration `json:"client_cpu_ns"`
	ServerCPU time.Duration `json:"server_cpu_ns"`
	// ServerCPUOK is false where the server's processes could not be
	// read.
	ServerCPUOK bool          `json:"server_cpu_ok"`
	PeakRSS     uint64        `json:"peak_rss_bytes"`
	Wall        time.Duration `json:"wall_ns"`
}

// JobsPerSecond is every job finished over the elapsed time, zero for a
// run that failed.
func (r Result) JobsPerSecond() float64 {
	if r.Err != "" || r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Workload.Jobs) / r.Elapsed.Seconds()
}

// perJob divides a whole run's figure by its jobs.
func (r Result) perJob(d time.Duration) time.Duration {
	return d / time.Duration(max(r.Workload.Jobs, 1))
}

// settle fills the counts of r from what the tracker saw and what the
// server says it parked (parked < 0: the server could not be asked, and
// the tracker's count stands in). It sorts t.Lateness in place.
func (r *Result) settle(t Tally, parked int, start time.Time) {
	r.Delivered, r.Duplicates, r.ParkedSeen, r.Attempts = t.Delivered, t.Duplicates, t.ParkedSeen, t.Attempts
	r.Retries = t.Retries
	r.Parked = parked
	if parked < 0 {
		r.Parked = t.ParkedSeen
	}
	r.Lost = max(r.Workload.Jobs-r.Delivered-r.Parked, 0)
	if !t.Last.IsZero() {
		r.Elapsed = t.Last.Sub(start)
	}
	slices.Sort(t.Lateness)
	r.LateP50 = stats.Percentile(t.Lateness, 50)
	r.LateP99 = stats.Percentile(t.Lateness, 99)
	if n := len(t.Lateness); n > 0 {
		r.LateMax = t.Lateness[n-1]
	}
}
