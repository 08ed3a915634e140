package bench

import (
	"context"
	"testing"
	"time"
)

// TestIsolation runs a small isolation measurement: every figure is
// there, and with the breaker the healthy endpoint's p99 stays far below
// the sick endpoint's timeout, which it would reach were its deliveries
// stuck behind the sick ones.
func TestIsolation(t *testing.T) {
	if testing.Short() {
		t.Skip("takes about 15s")
	}
	opts := IsolationOptions{Workers: 8, Timeout: time.Second, Warmup: 2 * time.Second, Duration: 2 * time.Second}
	res, err := Isolation(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", IsolationMarkdown(res))
	for name, f := range map[string]IsolationFigures{"absent": res.Absent, "breaker": res.Breaker, "no breaker": res.NoBreaker} {
		if f.Delivered <= 0 || f.Throughput <= 0 || f.Latency.P99 <= 0 || f.Latency.P50 <= 0 {
			t.Errorf("%s: figures not all positive: %+v", name, f)
		}
	}
	for name, f := range map[string]IsolationFigures{"breaker": res.Breaker, "no breaker": res.NoBreaker} {
		if f.SickSent == 0 {
			t.Errorf("%s: nothing went to the sick endpoint", name)
		}
	}
	if res.BreakerP99Ratio <= 0 || res.BreakerThroughputRatio <= 0 || res.NoBreakerP99Ratio <= 0 || res.NoBreakerThroughputRatio <= 0 {
		t.Errorf("ratios not all positive: %+v", res)
	}
	if p99 := res.Breaker.Latency.P99; p99 >= res.Options.Timeout/4 {
		t.Errorf("with the breaker, the healthy p99 is %s, want far below the sick endpoint's timeout %s", p99, res.Options.Timeout)
	}
}
