//go:build integration && timing

package all_test

import (
	"testing"
)

// TestScheduleAccuracy is TestScheduledSends as scheduled sends come from
// many clients, run alone (make test-timing, -p 1) on a quiet broker so that
// its figures are relay's: 200 notifications scheduled 2 to 20 s ahead on
// the levels backend, in batches of ten, one every 100 ms, half of them
// cancelled, with classic and with quorum queues. It asserts what holds
// however loaded the machine (none early, none cancelled delivered, none
// lost: runScheduled checks them) and logs how late the others arrived, at
// p50, p99 and at most. Lateness is a figure, never a bound the test holds:
// docs/api.md and docs/benchmarks.md report it (relay-lab bench measures
// scheduled sends with 10,000 waiting).
func TestScheduleAccuracy(t *testing.T) {
	for _, qt := range []string{"classic", "quorum"} {
		t.Run(qt, func(t *testing.T) {
			r := runScheduled(t, qt, 200, 10)
			t.Logf("%s queues, batches of ten: %s", qt, r)
		})
	}
}
