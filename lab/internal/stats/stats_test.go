package stats

import (
	"slices"
	"testing"
	"time"
)

func ms(xs ...int) []time.Duration {
	out := make([]time.Duration, len(xs))
	for i, x := range xs {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

// upTo returns 1ms, 2ms, … n ms.
func upTo(n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(i+1) * time.Millisecond
	}
	return out
}

func TestPercentile(t *testing.T) {
	tests := []struct {
		name   string
		values []time.Duration // in any order: the test sorts a copy
		p      float64
		want   time.Duration
	}{
		{"no values", nil, 50, 0},
		{"one value is every percentile", ms(7), 99, 7 * time.Millisecond},
		{"median of 1..100", upTo(100), 50, 50 * time.Millisecond},
		{"p99 of 1..100", upTo(100), 99, 99 * time.Millisecond},
		{"p100 is the largest", upTo(100), 100, 100 * time.Millisecond},
		{"p99 of 1..1000", upTo(1000), 99, 990 * time.Millisecond},
		{"nearest rank rounds up", upTo(3), 50, 2 * time.Millisecond},
		{"p99 of two values is the larger", upTo(2), 99, 2 * time.Millisecond},
		{"a tiny p is the smallest", upTo(10), 0.1, 1 * time.Millisecond},
		{"median of odd, unsorted", ms(5, 1, 3), 50, 3 * time.Millisecond},
		{"median of even: the lower", ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p100 of three", ms(3, 9, 1), 100, 9 * time.Millisecond},
		{"negative values", ms(-5, -1, 2), 50, -1 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sorted := slices.Clone(tt.values)
			slices.Sort(sorted)
			if got := Percentile(sorted, tt.p); got != tt.want {
				t.Errorf("Percentile(%d values, %v) = %v, want %v", len(sorted), tt.p, got, tt.want)
			}
		})
	}
}

// TestPercentileLeavesInputAlone checks that Percentile only reads what
// it is given.
func TestPercentileLeavesInputAlone(t *testing.T) {
	in := upTo(10)
	before := slices.Clone(in)
	Percentile(in, 50)
	if !slices.Equal(in, before) {
		t.Errorf("Percentile changed its input to %v", in)
	}
}

// TestPercentileOfMilliseconds checks the same rank on float64 values, the
// bench's lateness figures.
func TestPercentileOfMilliseconds(t *testing.T) {
	late := []float64{0.5, 1.25, 2, 3.5, 40}
	for _, tt := range []struct{ p, want float64 }{{50, 2}, {99, 40}, {100, 40}, {20, 0.5}, {21, 1.25}} {
		if got := Percentile(late, tt.p); got != tt.want {
			t.Errorf("Percentile(%v, %v) = %v, want %v", late, tt.p, got, tt.want)
		}
	}
	if got := Percentile([]float64(nil), 99); got != 0 {
		t.Errorf("Percentile(none, 99) = %v, want 0", got)
	}
}
