//go:build integration && timing

package all_test

import (
	"testing"
	"time"
)

// TestScheduleAccuracy is TestScheduledSends held to the promise of the
// levels backend: 200 notifications scheduled 2 to 20 s ahead arrive within
// 100 ms of their due time at p99, none early, with classic and with
// quorum queues. It runs in make test-timing, on a quiet broker.
func TestScheduleAccuracy(t *testing.T) {
	for _, qt := range []string{"classic", "quorum"} {
		t.Run(qt, func(t *testing.T) {
			r := runScheduled(t, qt, 200)
			t.Logf("%s queues: %s", qt, r)
			if p99 := quantile(r.late, 0.99); p99 > 100*time.Millisecond {
				t.Errorf("p99 lateness %s, want at most 100ms", p99)
			}
		})
	}
}
