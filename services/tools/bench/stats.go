package bench

import (
	"math"
	"slices"
	"time"
)

// Percentile returns the nearest-rank p-th percentile (0 < p ≤ 100) of
// sorted, which must be in ascending order: the smallest value that at
// least p percent of the values are at or below. It is 0 for no values.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

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
	return Latency{P50: Percentile(sorted, 50), P99: Percentile(sorted, 99), N: len(sorted)}
}

// PerSecond is n events over elapsed as a rate; 0 when nothing elapsed.
func PerSecond(n int, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return 0
	}
	return float64(n) / elapsed.Seconds()
}
