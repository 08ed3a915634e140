package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/internal/store/storetest"
)

func TestClaim(t *testing.T) {
	const ttl = 24 * time.Hour
	type step struct {
		op       string // "claim", "complete" or "release"
		scope    string // "tenant" when empty
		fp       string
		id       string
		after    time.Duration // since t0
		response string
		want     store.Claim
	}
	claim := func(fp, id string, after time.Duration, want store.Claim) step {
		return step{op: "claim", fp: fp, id: id, after: after, want: want}
	}
	complete := func(response string) step { return step{op: "complete", response: response} }
	release := step{op: "release"}
	isNew := func(id string, after time.Duration) store.Claim {
		return store.Claim{State: store.ClaimNew, ID: id, CreatedAt: t0.Add(after)}
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"new", []step{claim("fp1", "ntf_1", 0, isNew("ntf_1", 0))}},
		{"pending", []step{
			claim("fp1", "ntf_1", 0, isNew("ntf_1", 0)),
			claim("fp1", "ntf_2", time.Second, store.Claim{State: store.ClaimPending, ID: "ntf_1", CreatedAt: t0}),
		}},
		{"done", []step{
			claim("fp1", "ntf_1", 0, isNew("ntf_1", 0)),
			complete(`{"id":"ntf_1"}`),
			claim("fp1", "ntf_2", time.Hour, store.Claim{State: store.ClaimDone, ID: "ntf_1", Response: []byte(`{"id":"ntf_1"}`), CreatedAt: t0}),
		}},
		{"mismatch while pending", []step{
			claim("fp1", "ntf_1", 0, isNew("ntf_1", 0)),
			claim("fp2", "ntf_2", time.Second, store.Claim{State: store.ClaimMismatch, ID: "ntf_1", CreatedAt: t0}),
		}},
		{"mismatch once done, without the response", []step{
			claim("fp1", "ntf_1", 0, isNew("ntf_1", 0)),
			complete(`{"id":"ntf_1"}`),
			claim("fp2", "ntf_2", time.Second, store.Claim{State: store.ClaimMismatch, ID: "ntf_1", CreatedAt: t0}),
		}},
		{"expired pending claim is taken over", []step{
			claim("fp1", "ntf_1", 0, isNew("ntf_1", 0)),
			claim("fp2", "ntf_2", ttl+time.Second, isNew("ntf_2", ttl+time.Second)),
			claim("fp1", "ntf_3", ttl+2*time.Second, store.Claim{State: store.ClaimMismatch, ID: "ntf_2", CreatedAt: t0.Add(ttl + time.Second)}),
		}},
		{"expired completed claim counts as absent", []step{
			claim("fp1", "ntf_1", 0, isNew("ntf_1", 0)),
			complete("ok"),
			claim("fp1", "ntf_2", ttl+time.Second, isNew("ntf_2", ttl+time.Second)),
		}},
		{"not expired at ttl exactly", []step{
			claim("fp1", "ntf_1", 0, isNew("ntf_1", 0)),
			claim("fp1", "ntf_2", ttl, store.Claim{State: store.ClaimPending, ID: "ntf_1", CreatedAt: t0}),
		}},
		{"released claim can be claimed again", []step{
			claim("fp1", "ntf_1", 0, isNew("ntf_1", 0)),
			release,
			claim("fp1", "ntf_1", time.Second, isNew("ntf_1", time.Second)),
		}},
		{"release keeps a completed claim", []step{
			claim("fp1", "ntf_1", 0, isNew("ntf_1", 0)),
			complete("ok"),
			release,
			claim("fp1", "ntf_2", time.Second, store.Claim{State: store.ClaimDone, ID: "ntf_1", Response: []byte("ok"), CreatedAt: t0}),
		}},
		{"scopes do not share keys", []step{
			claim("fp1", "ntf_1", 0, isNew("ntf_1", 0)),
			{op: "claim", scope: "other", fp: "fp2", id: "ntf_2", want: isNew("ntf_2", 0)},
		}},
	}
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				ctx := ctxOf(t)
				key := fmt.Sprintf("key-%d", i)
				for k, st := range tc.steps {
					scope := st.scope
					if scope == "" {
						scope = "tenant"
					}
					switch st.op {
					case "claim":
						got, err := s.Claim(ctx, scope, key, []byte(st.fp), st.id, t0.Add(st.after), ttl)
						if err != nil {
							t.Fatalf("step %d: %v", k, err)
						}
						if diff := cmp.Diff(st.want, got, cmpOpts...); diff != "" {
							t.Fatalf("step %d: claim (-want +got):\n%s", k, diff)
						}
					case "complete":
						if err := s.Complete(ctx, scope, key, []byte(st.response)); err != nil {
							t.Fatalf("step %d: %v", k, err)
						}
					case "release":
						if err := s.Release(ctx, scope, key); err != nil {
							t.Fatalf("step %d: %v", k, err)
						}
					}
				}
			})
		}
		t.Run("complete an unknown key", func(t *testing.T) {
			if err := s.Complete(ctxOf(t), "tenant", "nobody", []byte("x")); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("got %v, want ErrNotFound", err)
			}
		})
	})
}

// TestClaimConcurrent claims one key from 50 goroutines, over several
// connections and, on PostgreSQL, two stores as two replicas would: exactly
// one may win.
func TestClaimConcurrent(t *testing.T) {
	for _, backend := range storetest.Backends() {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			dsn := storetest.DSN(t, backend)
			if backend == storetest.Postgres {
				dsn += "&pool_max_conns=25"
			}
			var stores []*store.Store
			for range 2 {
				s, err := store.Open(ctxOf(t), dsn)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				stores = append(stores, s)
			}
			for round := range 5 {
				key := fmt.Sprintf("race-%d", round)
				start := make(chan struct{})
				results := make([]store.Claim, 50)
				errs := make([]error, 50)
				var wg sync.WaitGroup
				for g := range 50 {
					wg.Go(func() {
						<-start
						s := stores[g%len(stores)]
						results[g], errs[g] = s.Claim(context.Background(), "tenant", key, []byte("fp"), fmt.Sprintf("ntf_%d", g), t0, time.Hour)
					})
				}
				close(start)
				wg.Wait()
				counts := map[store.ClaimState]int{}
				var winner string
				for g := range 50 {
					if errs[g] != nil {
						t.Fatalf("goroutine %d: %v", g, errs[g])
					}
					counts[results[g].State]++
					if results[g].State == store.ClaimNew {
						winner = results[g].ID
					}
				}
				if counts[store.ClaimNew] != 1 || counts[store.ClaimPending] != 49 {
					t.Fatalf("round %d: got %v, want 1 new and 49 pending", round, counts)
				}
				for g := range 50 {
					if results[g].ID != winner {
						t.Fatalf("round %d: goroutine %d sees id %q, the winner is %q", round, g, results[g].ID, winner)
					}
				}
			}
		})
	}
}
