package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/store"
)

func TestDeadLetterJobLease(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		ctx := ctxOf(t)
		j := store.DeadLetterJob{ID: "job1", Action: "replay", Selection: []byte(`{"reason":"permanent"}`), CreatedAt: t0,
			LeaseOwner: "a", LeaseUntil: t0.Add(10 * time.Second)}
		if err := s.CreateDeadLetterJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := s.TakeOverDeadLetterJob(ctx, "b", t0.Add(5*time.Second), t0.Add(20*time.Second)); ok || err != nil {
			t.Fatalf("took over a job whose lease holds: %v, %v", ok, err)
		}
		p := store.JobProgress{Matched: 10, Done: 4}
		if err := s.RenewDeadLetterJob(ctx, "job1", "a", t0.Add(15*time.Second), p); err != nil {
			t.Fatal(err)
		}
		got, ok, err := s.TakeOverDeadLetterJob(ctx, "b", t0.Add(16*time.Second), t0.Add(30*time.Second))
		if !ok || err != nil {
			t.Fatalf("no takeover of a lapsed lease: %v, %v", ok, err)
		}
		want := j
		want.State, want.JobProgress, want.LeaseOwner, want.LeaseUntil, want.Takeovers = store.JobRunning, p, "b", t0.Add(30*time.Second), 1
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("taken over (-want +got):\n%s", diff)
		}
		if err := s.RenewDeadLetterJob(ctx, "job1", "a", t0.Add(40*time.Second), p); !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("the old owner renewed: %v", err)
		}
		if err := s.FinishDeadLetterJob(ctx, "job1", "a", store.JobDone, p, t0); !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("the old owner finished it: %v", err)
		}
		r := store.JobReplay{MessageID: "m1", Copy: "ada@example.com", Source: "email-queue", Round: 0}
		for range 2 {
			if err := s.RecordJobReplay(ctx, "job1", r); err != nil {
				t.Fatal(err)
			}
		}
		if done, err := s.JobReplayed(ctx, "job1", r); !done || err != nil {
			t.Errorf("journaled replay not found: %v, %v", done, err)
		}
		next := r
		next.Round = 1
		if done, err := s.JobReplayed(ctx, "job1", next); done || err != nil {
			t.Errorf("the next round found: %v, %v", done, err)
		}
		if n, err := s.JobReplays(ctx, "job1"); n != 1 || err != nil {
			t.Errorf("JobReplays = %d, %v; want 1", n, err)
		}
		end := t0.Add(time.Minute)
		if err := s.FinishDeadLetterJob(ctx, "job1", "b", store.JobDone, store.JobProgress{Matched: 10, Done: 10}, end); err != nil {
			t.Fatal(err)
		}
		got, err = s.DeadLetterJob(ctx, "job1")
		if err != nil || got.State != store.JobDone || got.FinishedAt == nil || !got.FinishedAt.Equal(end) || got.Done != 10 {
			t.Errorf("finished job: %+v, %v", got, err)
		}
		if _, ok, err := s.TakeOverDeadLetterJob(ctx, "c", end.Add(time.Hour), end.Add(2*time.Hour)); ok || err != nil {
			t.Errorf("took over a finished job: %v, %v", ok, err)
		}
		if _, err := s.DeadLetterJob(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown job: %v", err)
		}
	})
}

func TestCancelDeadLetterJob(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		ctx := ctxOf(t)
		j := store.DeadLetterJob{ID: "job1", Action: "purge", Selection: []byte(`{"all":true}`), CreatedAt: t0, LeaseOwner: "a", LeaseUntil: t0.Add(time.Minute)}
		if err := s.CreateDeadLetterJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		got, err := s.CancelDeadLetterJob(ctx, "job1", t0.Add(time.Second))
		if err != nil || got.State != store.JobCancelled || got.FinishedAt == nil || got.LeaseOwner != "a" {
			t.Fatalf("cancel: %+v, %v", got, err)
		}
		if err := s.RenewDeadLetterJob(ctx, "job1", "a", t0.Add(2*time.Minute), store.JobProgress{}); !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("its process renewed a cancelled job: %v", err)
		}
		// Its run stops and settles what it did; another run cannot.
		if err := s.SettleCancelledJob(ctx, "job1", "b", store.JobProgress{Matched: 9, Done: 9}); err != nil {
			t.Fatal(err)
		}
		done := store.JobProgress{Matched: 40, Done: 37, Failed: 1}
		if err := s.SettleCancelledJob(ctx, "job1", "a", done); err != nil {
			t.Fatal(err)
		}
		got, err = s.DeadLetterJob(ctx, "job1")
		if err != nil || got.State != store.JobCancelled || got.Matched != 40 || got.Done != 37 || got.Failed != 1 || got.LeaseOwner != "" {
			t.Errorf("settled: %+v, %v; want cancelled with 40 matched, 37 done, 1 failed", got, err)
		}
		if _, err := s.CancelDeadLetterJob(ctx, "job1", t0.Add(2*time.Second)); !errors.Is(err, store.ErrJobEnded) {
			t.Errorf("cancel twice: %v", err)
		}
		if _, err := s.CancelDeadLetterJob(ctx, "nope", t0); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("cancel an unknown job: %v", err)
		}
	})
}

func TestPruneDeadLetterJobs(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		ctx := ctxOf(t)
		for _, id := range []string{"ended", "running"} {
			if err := s.CreateDeadLetterJob(ctx, store.DeadLetterJob{ID: id, Action: "replay", Selection: []byte(`{}`), CreatedAt: t0,
				LeaseOwner: "a", LeaseUntil: t0.Add(time.Minute)}); err != nil {
				t.Fatal(err)
			}
			if err := s.RecordJobReplay(ctx, id, store.JobReplay{MessageID: "m1", Source: "q"}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.FinishDeadLetterJob(ctx, "ended", "a", store.JobDone, store.JobProgress{Matched: 1, Done: 1}, t0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Prune(ctx, t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.DeadLetterJob(ctx, "ended"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the ended job after a prune: %v", err)
		}
		if n, err := s.JobReplays(ctx, "ended"); n != 0 || err != nil {
			t.Errorf("its journal after a prune: %d, %v", n, err)
		}
		if _, err := s.DeadLetterJob(ctx, "running"); err != nil {
			t.Errorf("the running job after a prune: %v", err)
		}
		if n, err := s.JobReplays(ctx, "running"); n != 1 || err != nil {
			t.Errorf("the running job's journal after a prune: %d, %v", n, err)
		}
	})
}

func TestDeadLetterJobTenant(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		ctx := ctxOf(t)
		tests := []struct {
			name       string
			tenant     string
			allTenants bool
		}{
			{"a named tenant's", "acme", false},
			{"the default tenant's", "", false},
			{"every tenant's", "", true},
		}
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				id := "job" + string(rune('a'+i))
				j := store.DeadLetterJob{ID: id, Action: "purge", Selection: []byte(`{"all":true}`), CreatedAt: t0.Add(time.Duration(i) * time.Second),
					LeaseOwner: "a", LeaseUntil: t0, Tenant: tt.tenant, AllTenants: tt.allTenants}
				if err := s.CreateDeadLetterJob(ctx, j); err != nil {
					t.Fatal(err)
				}
				got, err := s.DeadLetterJob(ctx, id)
				if err != nil || got.Tenant != tt.tenant || got.AllTenants != tt.allTenants {
					t.Fatalf("stored: tenant %q, all %v, %v; want %q, %v", got.Tenant, got.AllTenants, err, tt.tenant, tt.allTenants)
				}
				// Another process that takes the job over keeps its scope.
				got, ok, err := s.TakeOverDeadLetterJob(ctx, "b", t0.Add(time.Hour), t0.Add(2*time.Hour))
				if !ok || err != nil || got.ID != id || got.Tenant != tt.tenant || got.AllTenants != tt.allTenants {
					t.Errorf("taken over: %s, tenant %q, all %v, %v, %v; want %s, %q, %v", got.ID, got.Tenant, got.AllTenants, ok, err, id, tt.tenant, tt.allTenants)
				}
			})
		}
		bad := store.DeadLetterJob{ID: "jobz", Action: "replay", Selection: []byte(`{}`), CreatedAt: t0, LeaseUntil: t0, Tenant: "acme", AllTenants: true}
		if err := s.CreateDeadLetterJob(ctx, bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("a job of one tenant and every tenant: %v, want ErrInvalid", err)
		}
	})
}
