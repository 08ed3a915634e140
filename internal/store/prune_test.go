package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
)

// pruneFixture stores old notifications (a week before t0, a placeholder
// among them), new ones (at t0), and an expired and a live idempotency
// key. It returns the ids of each.
func pruneFixture(t *testing.T, s *store.Store, old, young int) (oldIDs, newIDs []string) {
	t.Helper()
	ctx := ctxOf(t)
	add := func(prefix string, n int, created time.Time) []string {
		var ids []string
		var batch []notification.Accepted
		var events []notification.Event
		for i := range n {
			id := fmt.Sprintf("ntf_%s_%03d", prefix, i)
			ids = append(ids, id)
			batch = append(batch, notification.Accepted{ID: id, CreatedAt: created, Channels: []string{"email", "sms"}})
			events = append(events,
				notification.Event{ID: id, Channel: "email", Attempt: 1, Outcome: "failed", At: created.Add(time.Second), DelayMS: 1000},
				notification.Event{ID: id, Channel: "email", Attempt: 2, Outcome: "delivered", At: created.Add(3 * time.Second)})
		}
		if err := s.Accept(ctx, batch); err != nil {
			t.Fatal(err)
		}
		if err := s.Record(ctx, events); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	weekAgo := t0.Add(-7 * 24 * time.Hour)
	oldIDs = add("old", old, weekAgo)
	newIDs = add("new", young, t0)
	// A placeholder: events whose notification.Accepted never came.
	record(t, s, notification.Event{ID: "ntf_orphan", Channel: "sms", Attempt: 1, Outcome: "delivered", At: weekAgo})
	oldIDs = append(oldIDs, "ntf_orphan")
	for _, k := range []struct {
		key string
		at  time.Time
	}{{"expired", weekAgo}, {"live", t0}} {
		if _, err := s.Claim(ctx, "tenant", k.key, []byte("fp"), "ntf_x", k.at, 24*time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	return oldIDs, newIDs
}

func TestPrune(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		ctx := ctxOf(t)
		store.SetPruneBatch(s, 4) // so that 11 old notifications take 3 batches
		oldIDs, newIDs := pruneFixture(t, s, 10, 5)

		n, err := s.Prune(ctx, t0.Add(-24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(len(oldIDs) + 1); n != want {
			t.Errorf("pruned %d rows, want %d (%d notifications and a key)", n, want, len(oldIDs))
		}
		for _, id := range oldIDs {
			if _, err := s.Get(ctx, id); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("get %s after pruning: %v, want ErrNotFound", id, err)
			}
		}
		for _, id := range newIDs {
			if n := get(t, s, id); len(n.Copies) != 2 || len(n.Copies[0].Attempts) != 2 {
				t.Errorf("get %s after pruning: %+v, want 2 copies, the email one with 2 attempts", id, n)
			}
		}
		// Copies, events and attempts went with their notifications.
		for table, want := range map[string]int64{
			"notifications": 5, "copies": 10, "events": 10, "attempts": 10, "idempotency_keys": 1,
		} {
			if got, err := store.CountRows(ctx, s, table); err != nil || got != want {
				t.Errorf("%s: %d rows (%v), want %d", table, got, err, want)
			}
		}
		if c, err := s.Claim(ctx, "tenant", "live", []byte("fp"), "ntf_y", t0, 24*time.Hour); err != nil || c.State != store.ClaimPending {
			t.Errorf("live key after pruning: %+v, %v; want it pending still", c, err)
		}
		if n, err := s.Prune(ctx, t0.Add(-24*time.Hour)); err != nil || n != 0 {
			t.Errorf("pruning again: %d, %v; want 0, nil", n, err)
		}
	})
}

func TestRunPruner(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		oldIDs, _ := pruneFixture(t, s, 3, 2)
		var log syncBuffer
		ctx, cancel := context.WithCancel(ctxOf(t))
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.RunPruner(ctx, 10*time.Millisecond, 24*time.Hour, func() time.Time { return t0 }, slog.New(slog.NewTextHandler(&log, nil)))
		}()
		want := fmt.Sprintf("rows=%d", len(oldIDs)+1)
		eventually(t, 10*time.Second, func() bool { return strings.Contains(log.String(), want) })
		eventually(t, 10*time.Second, func() bool { return strings.Count(log.String(), "pruned history") >= 2 })
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("RunPruner did not return after its context ended")
		}
		if !strings.Contains(log.String(), "rows=0") {
			t.Errorf("log %q: want a later run that pruned nothing", log.String())
		}
	})
}

// eventually polls cond until it holds, or fails the test at the deadline.
func eventually(t *testing.T, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", within)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestPruneHolds: the holds on the copies of pruned notifications go with
// them once as old; a hold on a copy of a notification the history has
// not heard of yet stays, since the history may still hear of it.
func TestPruneHolds(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		ctx := ctxOf(t)
		oldIDs, newIDs := pruneFixture(t, s, 3, 2)
		weekAgo := t0.Add(-7 * 24 * time.Hour)
		hold := func(id string, at time.Time) {
			t.Helper()
			if _, err := s.HoldCopy(ctx, id, "email", "", time.Minute, at); err != nil {
				t.Fatal(err)
			}
			if err := s.ReleaseCopy(ctx, id, "email", "", store.AttemptEnd{Attempt: 2, Delivered: true}, at); err != nil {
				t.Fatal(err)
			}
		}
		hold(oldIDs[0], weekAgo)
		hold(newIDs[0], weekAgo) // a long scheduled notification's
		hold("ntf_unheard", t0)
		hold("ntf_unheard_long_ago", weekAgo)
		if _, err := s.Prune(ctx, t0.Add(-24*time.Hour)); err != nil {
			t.Fatal(err)
		}
		rows, err := store.QueryText(ctx, s, "SELECT notification_id FROM copy_holds ORDER BY notification_id")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rows {
			got = append(got, r[0])
		}
		if want := []string{newIDs[0], "ntf_unheard"}; strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("holds after pruning: %v, want %v", got, want)
		}
	})
}
