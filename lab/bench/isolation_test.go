package bench

import (
	"context"
	"testing"
	"time"
)

// TestIsolation runs a small isolation measurement: every figure is
// there, and with the breaker the sick endpoint gets its probes and
// nothing else, where without it the deliveries keep reaching it. The
// healthy endpoint's latency is a figure of the bench, not asserted.
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
	t.Logf("requests that reached the sick endpoint while measured: %d with the breaker, %d without", res.Breaker.SickReached, res.NoBreaker.SickReached)
	// The breaker holds the sick endpoint's deliveries back, probes
	// aside: an open circuit lets one through after its cooldown, and
	// then after twice as long while they fail.
	if probes := int(res.Options.Duration/isolationCooldown) + 1; res.Breaker.SickReached > probes {
		t.Errorf("with the breaker, %d requests reached the sick endpoint in the measured %s; want its probes alone, %d at most",
			res.Breaker.SickReached, res.Options.Duration, probes)
	}
	if res.NoBreaker.SickReached == 0 {
		t.Error("without the breaker, no request reached the sick endpoint in the measured window: the scenario tests nothing")
	}
}
