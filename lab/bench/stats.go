package bench

import (
	"slices"
	"time"

	"github.com/relay-demo/relay/lab/internal/stats"
)

// Latency is the median and the 99th percentile of a set of durations.
type Latency struct {
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	// N is the number of durations they were taken from.
	N int `json:"n"`
}

// Summarize computes the Latency of ds, which it leaves unchanged.
func Summarize(ds []time.Duration) Latency {
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	return Latency{P50: stats.Percentile(sorted, 50), P99: stats.Percentile(sorted, 99), N: len(sorted)}
}

// PerSecond is n events over elapsed as a rate; 0 when nothing elapsed.
func PerSecond(n int, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return 0
	}
	return float64(n) / elapsed.Seconds()
}
