package bench

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func ms1(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// upTo returns 1ms, 2ms, … n ms.
func upTo(n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = ms1(i + 1)
	}
	return out
}

func TestPercentile(t *testing.T) {
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"no values", nil, 50, 0},
		{"one value is every percentile", []time.Duration{ms1(7)}, 99, ms1(7)},
		{"median of 1..100", upTo(100), 50, ms1(50)},
		{"p99 of 1..100", upTo(100), 99, ms1(99)},
		{"p100 is the largest", upTo(100), 100, ms1(100)},
		{"p99 of 1..1000", upTo(1000), 99, ms1(990)},
		{"nearest rank rounds up", upTo(3), 50, ms1(2)},
		{"p99 of two values is the larger", upTo(2), 99, ms1(2)},
		{"a tiny p is the smallest", upTo(10), 0.1, ms1(1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("Percentile(%d values, %v) = %v, want %v", len(tt.sorted), tt.p, got, tt.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	in := []time.Duration{ms1(5), ms1(1), ms1(4), ms1(2), ms1(3)}
	before := append([]time.Duration(nil), in...)
	got := Summarize(in)
	if diff := cmp.Diff(Latency{P50: ms1(3), P99: ms1(5), N: 5}, got); diff != "" {
		t.Errorf("Summarize (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, in); diff != "" {
		t.Errorf("Summarize changed its input (-before +after):\n%s", diff)
	}
}

func TestPerSecond(t *testing.T) {
	tests := []struct {
		name    string
		n       int
		elapsed time.Duration
		want    float64
	}{
		{"a thousand in half a second", 1000, 500 * time.Millisecond, 2000},
		{"nothing elapsed", 10, 0, 0},
		{"negative elapsed", 10, -time.Second, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PerSecond(tt.n, tt.elapsed); got != tt.want {
				t.Errorf("PerSecond(%d, %v) = %v, want %v", tt.n, tt.elapsed, got, tt.want)
			}
		})
	}
}
