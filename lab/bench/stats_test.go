package bench

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func ms1(n int) time.Duration { return time.Duration(n) * time.Millisecond }

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
