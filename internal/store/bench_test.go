package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/internal/store/storetest"
)

// BenchmarkRecord stores batches of events about new notifications, and
// reports events stored per second. Each notification has a webhook copy
// delivered at once and an email copy that fails, is retried, requeued and
// delivered (or, one in ten, parked after three failures): 5 or 9 events.
func BenchmarkRecord(b *testing.B) {
	for _, backend := range storetest.Backends() {
		b.Run(backend, func(b *testing.B) {
			s := storetest.Open(b, backend)
			// Start from a store in use, with planner statistics, not an
			// empty one whose plans suit ten rows.
			if err := store.Seed(context.Background(), s, 10000, func(i int) time.Time { return t0.Add(-time.Duration(i) * time.Millisecond) }); err != nil {
				b.Fatal(err)
			}
			next := 10000
			for _, size := range []int{100, 500} {
				b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
					// A stream of events cut into batches, as a consumer would:
					// a notification's events may straddle two batches.
					var stream []notification.Event
					for len(stream) < b.N*size {
						stream = append(stream, store.SeedEvents(next*10, t0.Add(time.Duration(next)*time.Millisecond))...)
						next++
					}
					batches := slices.Collect(slices.Chunk(stream[:b.N*size], size))
					ctx := context.Background()
					b.ResetTimer()
					for i := range b.N {
						if err := s.Record(ctx, batches[i]); err != nil {
							b.Fatal(err)
						}
					}
					events := 0
					for _, batch := range batches {
						events += len(batch)
					}
					b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
				})
			}
		})
	}
}

// BenchmarkGet reads notifications by id, at random, from a store holding
// HISTORY_BENCH_N of them (10000 by default), and reports the median and
// 99th-percentile latency, and how long seeding the store took.
func BenchmarkGet(b *testing.B) {
	n := 10000
	if v := os.Getenv("HISTORY_BENCH_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			b.Fatalf("HISTORY_BENCH_N=%q: want a positive number", v)
		}
	}
	for _, backend := range storetest.Backends() {
		b.Run(backend, func(b *testing.B) {
			s := storetest.Open(b, backend)
			ctx := context.Background()
			start := time.Now()
			if err := store.Seed(ctx, s, n, func(i int) time.Time { return t0.Add(time.Duration(i) * time.Millisecond) }); err != nil {
				b.Fatal(err)
			}
			seeding := time.Since(start)
			// b.Logf of a benchmark with sub-benchmarks shows only with -v.
			fmt.Fprintf(os.Stderr, "%s: seeded %d notifications in %s\n", backend, n, seeding.Round(time.Millisecond))
			b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(uint64(b.N), 7))
				took := make([]time.Duration, b.N)
				b.ResetTimer()
				for i := range b.N {
					id := store.SeedID(rng.IntN(n))
					t := time.Now()
					got, err := s.Get(ctx, id)
					took[i] = time.Since(t)
					if err != nil {
						b.Fatal(err)
					}
					if len(got.Copies) != 2 {
						b.Fatalf("%s: %d copies, want 2", id, len(got.Copies))
					}
				}
				b.StopTimer()
				slices.Sort(took)
				pct := func(p float64) float64 {
					return float64(took[int(p*float64(len(took)-1))].Nanoseconds()) / 1e3
				}
				b.ReportMetric(pct(0.50), "p50-µs")
				b.ReportMetric(pct(0.99), "p99-µs")
				b.ReportMetric(seeding.Seconds(), "seed-s")
			})
		})
	}
}
