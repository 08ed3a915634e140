package store_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/internal/store/storetest"
)

func TestTakeRateTickets(t *testing.T) {
	s := storetest.Open(t, storetest.SQLite)
	ctx := context.Background()
	r := store.Rate{Per: 10, Burst: 2}
	t0 := time.Unix(1_700_000_000, 0)
	ms := time.Millisecond
	steps := []struct {
		name   string
		ticket string
		at     time.Duration
		hold   time.Duration
		want   time.Duration
	}{
		{"the burst goes at once", "a", 0, 0, 0},
		{"the burst goes at once, second", "b", 0, 0, 0},
		{"the third waits one interval", "c", 0, 0, 100 * ms},
		{"the fourth waits two", "d", 0, 0, 200 * ms},
		{"back early, the same slot", "c", 50 * ms, 0, 50 * ms},
		{"back on its slot, it goes", "c", 100 * ms, 0, 0},
		{"back within the grace, it goes", "d", 200*ms + store.TicketGrace, 0, 0},
		{"a newcomer queues behind the slots held", "e", 250 * ms, 0, 50 * ms},
		{"back too late, a new slot", "e", 300*ms + store.TicketGrace + ms, 0, 49 * ms},
		{"a wait within hold is the caller's", "f", 450 * ms, 100 * ms, 50 * ms},
		{"so it holds no ticket: a new slot", "f", 450 * ms, 0, 150 * ms},
		{"back early within hold, the slot to wait for", "f", 500 * ms, 100 * ms, 100 * ms},
		{"after which the ticket is spent", "f", 600 * ms, 0, 100 * ms},
	}
	for _, st := range steps {
		got, err := s.TakeRate(ctx, "email:a", st.ticket, r, st.hold, t0.Add(st.at))
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got != st.want {
			t.Errorf("%s: wait %v, want %v", st.name, got, st.want)
		}
	}
	if _, err := s.TakeRate(ctx, "email:a", "x", store.Rate{Per: 0, Burst: 1}, 0, t0); err == nil {
		t.Error("a rate of 0/s was taken, want an error")
	}
}

// TestTakeRateShared has three takers share a limit, each coming back
// when told, as deferred messages do, and checks the sends they were let
// through: every ticket goes, and no second holds more than the rate
// allows.
func TestTakeRateShared(t *testing.T) {
	for _, backend := range storetest.Backends() {
		t.Run(backend, func(t *testing.T) {
			s := storetest.Open(t, backend)
			ctx := context.Background()
			r := store.Rate{Per: 100, Burst: 1}
			const takers, each = 3, 50
			var (
				mu    sync.Mutex
				sends []time.Time
				wg    sync.WaitGroup
			)
			for w := range takers {
				wg.Go(func() {
					for i := range each {
						ticket := fmt.Sprintf("%d-%d", w, i)
						for tries := 0; ; tries++ {
							wait, err := s.TakeRate(ctx, "rate-shared", ticket, r, 0, time.Now())
							if err != nil {
								t.Error(err)
								return
							}
							if wait == 0 {
								break
							}
							if tries > 20 {
								t.Errorf("ticket %s still waits after %d tries", ticket, tries)
								return
							}
							time.Sleep(wait) // the delay backend's wait, played here
						}
						mu.Lock()
						sends = append(sends, time.Now())
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if len(sends) != takers*each {
				t.Fatalf("%d sends, want %d", len(sends), takers*each)
			}
			slices.SortFunc(sends, func(a, b time.Time) int { return a.Compare(b) })
			most := 0
			for i := range sends {
				j := i
				for j < len(sends) && sends[j].Sub(sends[i]) < time.Second {
					j++
				}
				most = max(most, j-i)
			}
			// 100/s, bursts of 1, the grace, and 10 % for the clocks of a
			// loaded machine.
			if limit := int(r.Per*1.1) + r.Burst; most > limit {
				t.Errorf("%d sends in one second, want at most %d", most, limit)
			}
			t.Logf("%s: at most %d sends in any second at %g/s", backend, most, r.Per)
		})
	}
}
