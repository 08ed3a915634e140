package store_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/store"
)

func TestProviders(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		ctx := ctxOf(t)
		at := func(d time.Duration) time.Time { return t0.Add(d) }
		decl := []store.ProviderDecl{{Name: "primary"}, {Name: "backup", Rate: &store.Rate{Per: 1, Burst: 2}}}
		if _, err := s.DeclareProviders(ctx, "email", decl, at(0)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.DeclareProviders(ctx, "sms", []store.ProviderDecl{{Name: "sms1"}}, at(0)); err != nil {
			t.Fatal(err)
		}
		since := at(time.Second)
		recorded, err := s.RecordProviderCircuit(ctx, "email", "primary", store.CircuitChange{
			State: store.CircuitOpen, Since: since, LastError: "dial tcp: connection refused", FailingSince: &since, At: since})
		if err != nil {
			t.Fatal(err)
		}
		if recorded.State != store.CircuitOpen || !recorded.Opened || recorded.FailingSince == nil || !recorded.FailingSince.Equal(since) {
			t.Errorf("recorded circuit = %+v, want open, opened by this record, failing since %v", recorded, since)
		}
		// A second worker trips too: the circuit was open already.
		again, err := s.RecordProviderCircuit(ctx, "email", "primary", store.CircuitChange{
			State: store.CircuitOpen, Since: since, LastError: "dial tcp: connection refused", FailingSince: &since, At: since})
		if err != nil {
			t.Fatal(err)
		}
		if again.Opened {
			t.Errorf("a second worker's open record says it opened the circuit: %+v", again)
		}
		// Another replica saw the run start later: the earliest stays,
		// and an empty error keeps the one stored.
		later, half := at(2*time.Second), at(6*time.Second)
		if _, err := s.RecordProviderCircuit(ctx, "email", "primary", store.CircuitChange{
			State: store.CircuitHalfOpen, Since: half, FailingSince: &later, At: half}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.RecordProviderCircuit(ctx, "email", "nobody", store.CircuitChange{State: store.CircuitOpen, Since: half, At: half}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("recording an undeclared provider: %v, want ErrNotFound", err)
		}
		if _, err := s.RecordProviderCircuit(ctx, "email", "primary", store.CircuitChange{State: "ajar", Since: half, At: half}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("recording state ajar: %v, want ErrInvalid", err)
		}
		// Three sends take the backup's burst of two and one slot more.
		for _, ticket := range []string{"a", "b", "c"} {
			if _, err := s.TakeRate(ctx, "email:backup", ticket, *decl[1].Rate, 0, time.Now()); err != nil {
				t.Fatal(err)
			}
		}

		got, err := s.Providers(ctx, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 {
			t.Fatalf("Providers = %+v, want three", got)
		}
		backup := got[1]
		// The next slot is some 2 s ahead, less the time the test took
		// since (on PostgreSQL at the database's clock): a second a slot,
		// so that however slow the machine, the third send still waits.
		if backup.NextSlot <= 0 || backup.NextSlot > 2*time.Second {
			t.Errorf("backup's next slot in %v, want within (0, 2s]", backup.NextSlot)
		}
		if backup.Waiting != 1 {
			t.Errorf("backup has %d sends waiting, want 1 (the third, deferred)", backup.Waiting)
		}
		for i := range got {
			got[i].NextSlot, got[i].Waiting = 0, 0
		}
		want := []store.Provider{
			{Channel: "email", Name: "primary", Position: 0, SeenAt: half, Circuit: store.Circuit{State: store.CircuitHalfOpen,
				Since: &half, LastError: "dial tcp: connection refused", FailingSince: &since, UpdatedAt: &half}},
			{Channel: "email", Name: "backup", Position: 1, Rate: &store.Rate{Per: 1, Burst: 2}, SeenAt: at(0),
				Circuit: store.Circuit{State: store.CircuitClosed}},
			{Channel: "sms", Name: "sms1", Position: 0, SeenAt: at(0), Circuit: store.Circuit{State: store.CircuitClosed}},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Providers (-want +got):\n%s", diff)
		}

		// Declared again in another order, with another limit: the
		// circuits stay.
		stored, err := s.DeclareProviders(ctx, "email", []store.ProviderDecl{{Name: "backup"}, {Name: "primary"}}, at(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if len(stored) != 2 || stored["primary"].State != store.CircuitHalfOpen || stored["backup"].State != store.CircuitClosed {
			t.Errorf("declaring returned the circuits %+v, want primary half-open and backup closed", stored)
		}
		got, err = s.Providers(ctx, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if got[0].Name != "backup" || got[0].Rate != nil || got[1].Name != "primary" || got[1].Circuit.State != store.CircuitHalfOpen {
			t.Errorf("after declaring again: %+v, want backup (no limit) then primary, half-open still", got[:2])
		}
	})
}

// TestProviderOpenedOnce records the same provider's circuit open from
// several workers at once: one of the records opened it.
func TestProviderOpenedOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		ctx := ctxOf(t)
		half := t0.Add(time.Second)
		if _, err := s.DeclareProviders(ctx, "sms", []store.ProviderDecl{{Name: "sms1"}}, t0); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var opened atomic.Int32
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := s.RecordProviderCircuit(ctx, "sms", "sms1", store.CircuitChange{State: store.CircuitOpen, Since: half, At: half})
				if err != nil {
					t.Error(err)
					return
				}
				if c.Opened {
					opened.Add(1)
				}
			}()
		}
		wg.Wait()
		if n := opened.Load(); n != 1 {
			t.Errorf("%d of 6 workers tripping at once say they opened the circuit, want 1", n)
		}
	})
}
