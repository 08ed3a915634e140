package store_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/internal/store/storetest"
	"github.com/relay-demo/relay/retry"
)

// loaded is one notification for Load, with its events.
type loaded struct {
	a   notification.Accepted
	evs []notification.Event
}

func seq(ns []loaded) iter.Seq2[notification.Accepted, []notification.Event] {
	return func(yield func(notification.Accepted, []notification.Event) bool) {
		for _, n := range ns {
			if !yield(n.a, n.evs) {
				return
			}
		}
	}
}

// loadCases are notifications in every shape the pipeline leaves them.
func loadCases() []loaded {
	acc := func(id string, channels ...string) notification.Accepted {
		return notification.Accepted{ID: id, CreatedAt: t0.Add(123456789 * time.Nanosecond), Channels: channels,
			Recipients: []string{"Ada@Example.com", "https://hooks.example.com/" + id}, Payload: []byte(`{"k":"` + id + `"}`)}
	}
	on := func(id, channel string, evs ...notification.Event) []notification.Event {
		for i := range evs {
			evs[i].ID, evs[i].Channel = id, channel
		}
		return evs
	}
	retried := on("ntf_retried", "email",
		ev(1, retry.Failed, time.Second, withErr("503"), withDelay(1000), withDur(120)),
		ev(1, retry.Retrying, time.Second+10*time.Millisecond, withErr("503"), withDelay(1100)),
		ev(2, retry.Requeued, 2*time.Second),
		ev(2, retry.Delivered, 2*time.Second+200*time.Millisecond, withDur(80)),
		// The same event twice, the later copy with an earlier time: the
		// store keeps the smaller.
		ev(2, retry.Delivered, 2*time.Second+100*time.Millisecond, withDur(80)),
	)
	parked := on("ntf_parked", "webhook",
		ev(1, retry.Failed, time.Second, withErr("timeout"), withDelay(500)),
		ev(1, retry.Retrying, time.Second+time.Millisecond, withDelay(500)),
		ev(2, retry.Requeued, 2*time.Second),
		ev(2, retry.Failed, 3*time.Second, withErr("timeout"), withDelay(1000)),
		ev(2, retry.Parked, 3*time.Second+time.Millisecond, withErr("timeout"), withReason("max-retries")),
	)
	// A replay carries whatever attempt its sender put there; the store
	// makes it 0.
	replayed := on("ntf_replayed", "email",
		ev(1, retry.Parked, time.Second, withErr("550 no such user"), withReason("permanent")),
		ev(7, retry.Replayed, time.Minute, withRound(1)),
		ev(1, retry.Delivered, time.Minute+time.Second, withRound(1), withDur(40)),
	)
	shuffled := on("ntf_shuffled", "webhook",
		ev(2, retry.Delivered, 3*time.Second),
		ev(1, retry.Retrying, time.Second+time.Millisecond, withDelay(2000)),
		ev(1, retry.Failed, time.Second, withErr("502"), withDelay(2000)),
	)
	waiting := on("ntf_waiting", "email",
		ev(1, retry.Failed, time.Second, withErr("429"), withDelay(60000)),
		ev(1, retry.Waiting, time.Second+time.Millisecond, withDelay(60000)),
	)
	// One email copy per recipient: one delivered, one parked, one
	// replayed and one that only its events name.
	recipients := acc("ntf_recipients", "email", "webhook")
	recipients.Copies = []notification.CopyRef{{Channel: "email", Recipient: "ok1@example.com"}, {Channel: "email", Recipient: "reject@example.com"}, {Channel: "email", Recipient: "late@example.com"}, {Channel: "webhook", Recipient: ""}}
	perRecipient := append(append(
		on("ntf_recipients", "email",
			to("ntf_recipients", "ok1@example.com", ev(1, retry.Delivered, time.Second)),
			to("ntf_recipients", "reject@example.com", ev(1, retry.Parked, time.Second, withErr("550 no such user"), withReason("permanent"))),
			to("ntf_recipients", "extra@example.com", ev(1, retry.Failed, time.Second, withErr("452"), withDelay(1000)))),
		on("ntf_recipients", "webhook", ev(1, retry.Delivered, 2*time.Second))...),
		replayed...)
	for i := len(perRecipient) - len(replayed); i < len(perRecipient); i++ {
		perRecipient[i] = to("ntf_recipients", "late@example.com", perRecipient[i])
	}
	return []loaded{
		{recipients, perRecipient},
		{acc("ntf_none", "email", "webhook"), nil},
		{acc("ntf_delivered", "webhook"), on("ntf_delivered", "webhook", ev(1, retry.Delivered, 200*time.Millisecond, withDur(80)))},
		{acc("ntf_retried", "email", "webhook"), retried},
		{acc("ntf_parked", "webhook"), parked},
		{acc("ntf_replayed", "email"), replayed},
		{acc("ntf_shuffled", "webhook"), shuffled},
		{acc("ntf_waiting", "email", "email"), waiting},
		// Events about a channel the notification was not accepted for.
		{acc("ntf_extra", "email"), on("ntf_extra", "sms", ev(1, retry.Delivered, time.Second))},
		{notification.Accepted{ID: "ntf_bare", CreatedAt: t0}, nil},
	}
}

// TestLoadMatchesAcceptAndRecord loads notifications into one store and
// accepts and records them into another: both must read back alike, by
// Get and by List.
func TestLoadMatchesAcceptAndRecord(t *testing.T) {
	forEachBackend(t, func(t *testing.T, loadedStore *store.Store) {
		ctx := ctxOf(t)
		ns := loadCases()
		if err := loadedStore.Load(ctx, seq(ns)); err != nil {
			t.Fatalf("Load: %v", err)
		}
		recorded := openLike(t, loadedStore)
		var accepted []notification.Accepted
		var evs []notification.Event
		for _, n := range ns {
			accepted = append(accepted, n.a)
			evs = append(evs, n.evs...)
		}
		if err := recorded.Accept(ctx, accepted); err != nil {
			t.Fatal(err)
		}
		if err := recorded.Record(ctx, evs); err != nil {
			t.Fatal(err)
		}
		for _, n := range ns {
			want, got := get(t, recorded, n.a.ID), get(t, loadedStore, n.a.ID)
			if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
				t.Errorf("Get(%s) after Load (-Accept and Record +Load):\n%s", n.a.ID, diff)
			}
		}
		for _, q := range []store.Query{{}, {Status: notification.StatusRetrying}, {Channel: "sms"}, {Search: "ada@"}, {Search: "hooks.example.com/***", Public: true}} {
			want, err := recorded.List(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			got, err := loadedStore.List(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(want.Items) == 0 {
				t.Errorf("List(%+v) is empty: the case proves nothing", q)
			}
			if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
				t.Errorf("List(%+v) after Load (-Accept and Record +Load):\n%s", q, diff)
			}
		}
		for _, table := range []string{"notifications", "copies", "events", "attempts"} {
			want, err := store.CountRows(ctx, recorded, table)
			if err != nil {
				t.Fatal(err)
			}
			got, err := store.CountRows(ctx, loadedStore, table)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("%s: %d rows after Load, %d after Accept and Record", table, got, want)
			}
		}
	})
}

// openLike opens a second, empty store on the backend of s.
func openLike(t *testing.T, s *store.Store) *store.Store {
	t.Helper()
	return storetest.Open(t, s.Backend())
}

func TestLoadRejects(t *testing.T) {
	good := func(id string) loaded {
		return loaded{notification.Accepted{ID: id, CreatedAt: t0, Channels: []string{"email"}},
			[]notification.Event{{ID: id, Channel: "email", Attempt: 1, Outcome: retry.Delivered, At: t0}}}
	}
	tests := []struct {
		name      string
		ns        []loaded
		wantIndex int
	}{
		{"an event of another notification", []loaded{good("ntf_a"), {good("ntf_b").a, good("ntf_a").evs}}, 1},
		{"a notification without id", []loaded{{notification.Accepted{CreatedAt: t0}, nil}}, 0},
		{"a notification without time", []loaded{good("ntf_a"), good("ntf_b"), {notification.Accepted{ID: "ntf_c"}, nil}}, 2},
		{"an event without time", []loaded{{good("ntf_a").a, []notification.Event{{ID: "ntf_a", Channel: "email", Attempt: 1, Outcome: retry.Delivered}}}}, 0},
		{"an unknown outcome", []loaded{{good("ntf_a").a, []notification.Event{{ID: "ntf_a", Channel: "email", Attempt: 1, Outcome: "lost", At: t0}}}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := storetest.Open(t, storetest.SQLite)
			err := s.Load(ctxOf(t), seq(tt.ns))
			var bad *store.InputError
			if !errors.As(err, &bad) || !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("Load = %v, want an *InputError", err)
			}
			if bad.Index != tt.wantIndex {
				t.Errorf("InputError.Index = %d, want %d (%s)", bad.Index, tt.wantIndex, bad.Problem)
			}
			// The chunk with the invalid notification is not written.
			if n, err := store.CountRows(ctxOf(t), s, "notifications"); err != nil || n != 0 {
				t.Errorf("notifications stored = %d, %v; want none", n, err)
			}
		})
	}
}

// TestLoadExistingID checks that Load refuses an id the store holds,
// rather than merging with it.
func TestLoadExistingID(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		accept(t, s, "ntf_1", "email")
		err := s.Load(ctxOf(t), seq([]loaded{{notification.Accepted{ID: "ntf_1", CreatedAt: t0.Add(time.Hour)}, nil}}))
		if err == nil || errors.Is(err, store.ErrInvalid) {
			t.Fatalf("Load of a stored id = %v, want the database's error", err)
		}
		if got := get(t, s, "ntf_1"); !got.CreatedAt.Equal(t0) || len(got.Copies) != 1 {
			t.Errorf("the stored notification changed: %+v", got)
		}
	})
}

// TestLoadChunks loads more than one transaction's worth and checks every
// notification arrived, and that a cancelled load stops.
func TestLoadChunks(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		ctx := ctxOf(t)
		n := store.LoadChunk + 3
		all := func(yield func(notification.Accepted, []notification.Event) bool) {
			for i := range n {
				at := t0.Add(time.Duration(i) * time.Millisecond)
				if !yield(store.SeedAccepted(i, at), store.SeedEvents(i, at)) {
					return
				}
			}
		}
		if err := s.Load(ctx, all); err != nil {
			t.Fatal(err)
		}
		for table, want := range map[string]int64{"notifications": int64(n), "copies": 2 * int64(n)} {
			if got, err := store.CountRows(ctx, s, table); err != nil || got != want {
				t.Errorf("%s: %d rows (%v), want %d", table, got, err, want)
			}
		}
		last := get(t, s, store.SeedID(n-1))
		if len(last.Copies) != 2 || last.Copies[0].Status != notification.StatusDelivered {
			t.Errorf("the last notification loaded: %+v", last)
		}

		cctx, cancel := context.WithCancel(ctx)
		stopped := func(yield func(notification.Accepted, []notification.Event) bool) {
			for i := n; ; i++ {
				if i == n+10 {
					cancel()
				}
				if !yield(notification.Accepted{ID: fmt.Sprintf("ntf_more%d", i), CreatedAt: t0}, nil) {
					return
				}
			}
		}
		if err := s.Load(cctx, stopped); !errors.Is(err, context.Canceled) {
			t.Errorf("Load with its context cancelled = %v, want context.Canceled", err)
		}
	})
}
