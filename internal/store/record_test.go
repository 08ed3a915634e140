package store_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/retry"
)

const s503 = "503 Service Unavailable"

// twoFailuresThenDelivered is the email copy of ntf_1 failing twice and
// delivered at the third attempt, as the worker and the retrier report it.
var twoFailuresThenDelivered = []notification.Event{
	ev(1, retry.Failed, time.Second, withErr(s503), withDelay(1000), withDur(100)),
	ev(1, retry.Retrying, time.Second+10*time.Millisecond, withErr(s503), withDelay(1200)),
	ev(2, retry.Requeued, 2200*time.Millisecond),
	ev(2, retry.Failed, 2500*time.Millisecond, withErr("timeout"), withDelay(2000), withDur(150)),
	ev(2, retry.Retrying, 2510*time.Millisecond, withErr("timeout"), withDelay(2400)),
	ev(3, retry.Requeued, 4900*time.Millisecond),
	ev(3, retry.Delivered, 5200*time.Millisecond, withDur(80)),
}

var twoFailuresThenDeliveredTimeline = []notification.Attempt{
	{Round: 0, N: 1, At: t0.Add(time.Second), Outcome: "failed", Error: s503, Service: "test", DelayMS: i64(1200), DurationMS: i64(100)},
	// Started at 2.5s - 150ms, 1350ms after the first failure.
	{Round: 0, N: 2, At: t0.Add(2500 * time.Millisecond), Outcome: "failed", Error: "timeout", Service: "test", DelayMS: i64(2400), WaitedMS: i64(1350), DurationMS: i64(150)},
	{Round: 0, N: 3, At: t0.Add(5200 * time.Millisecond), Outcome: "delivered", Service: "test", WaitedMS: i64(2620), DurationMS: i64(80)},
}

// parkedAfterRetries fails three times and is parked by the retrier.
var parkedAfterRetries = []notification.Event{
	ev(1, retry.Failed, time.Second, withErr(s503), withDelay(1000)),
	ev(1, retry.Retrying, time.Second+10*time.Millisecond, withErr(s503), withDelay(1000)),
	ev(2, retry.Requeued, 2010*time.Millisecond),
	ev(2, retry.Failed, 2100*time.Millisecond, withErr(s503), withDelay(2000)),
	ev(2, retry.Retrying, 2110*time.Millisecond, withErr(s503), withDelay(2000)),
	ev(3, retry.Requeued, 4110*time.Millisecond),
	ev(3, retry.Failed, 4200*time.Millisecond, withErr("connection refused"), withDelay(4000)),
	ev(3, retry.Parked, 4210*time.Millisecond, withErr("connection refused"), withReason("max-retries")),
}

func TestRecord(t *testing.T) {
	type step struct {
		record []notification.Event
		want   notification.Copy
	}
	cases := []struct {
		name  string
		steps []step
	}{{
		name: "accepted, nothing happened yet",
		steps: []step{{
			want: notification.Copy{Channel: "email", Status: "queued", UpdatedAt: t0},
		}},
	}, {
		name: "delivered at once",
		steps: []step{{
			record: []notification.Event{ev(1, retry.Delivered, 300*time.Millisecond, withDur(120))},
			want: notification.Copy{Channel: "email", Status: "delivered", AttemptCount: 1, UpdatedAt: t0.Add(300 * time.Millisecond),
				Attempts: []notification.Attempt{{N: 1, At: t0.Add(300 * time.Millisecond), Outcome: "delivered", Service: "test", DurationMS: i64(120)}}},
		}},
	}, {
		name: "failed, retrying",
		steps: []step{{
			record: twoFailuresThenDelivered[:2],
			want: notification.Copy{Channel: "email", Status: "retrying", AttemptCount: 1, LastError: s503,
				NextAttemptAt: at(2200 * time.Millisecond), UpdatedAt: t0.Add(time.Second + 10*time.Millisecond),
				Attempts: twoFailuresThenDeliveredTimeline[:1]},
		}},
	}, {
		name: "failed twice, then delivered",
		steps: []step{{
			record: twoFailuresThenDelivered,
			want: notification.Copy{Channel: "email", Status: "delivered", AttemptCount: 3, LastError: "timeout",
				UpdatedAt: t0.Add(5200 * time.Millisecond), Attempts: twoFailuresThenDeliveredTimeline},
		}},
	}, {
		name: "parked after max retries, with its last error",
		steps: []step{{
			record: parkedAfterRetries,
			want: notification.Copy{Channel: "email", Status: "parked", Reason: "max-retries", AttemptCount: 3, LastError: "connection refused",
				UpdatedAt: t0.Add(4210 * time.Millisecond), Attempts: []notification.Attempt{
					{N: 1, At: t0.Add(time.Second), Outcome: "failed", Error: s503, Service: "test", DelayMS: i64(1000)},
					{N: 2, At: t0.Add(2100 * time.Millisecond), Outcome: "failed", Error: s503, Service: "test", DelayMS: i64(1000 * 2), WaitedMS: i64(1100)},
					{N: 3, At: t0.Add(4200 * time.Millisecond), Outcome: "parked", Error: "connection refused", Reason: "max-retries", Service: "test", WaitedMS: i64(2100)},
				}},
		}},
	}, {
		name: "parked for good at attempt 1",
		steps: []step{{
			record: []notification.Event{ev(1, retry.Parked, 400*time.Millisecond, withErr("550 no such user"), withReason("permanent"), withDur(90))},
			want: notification.Copy{Channel: "email", Status: "parked", Reason: "permanent", AttemptCount: 1, LastError: "550 no such user",
				UpdatedAt: t0.Add(400 * time.Millisecond), Attempts: []notification.Attempt{
					{N: 1, At: t0.Add(400 * time.Millisecond), Outcome: "parked", Error: "550 no such user", Reason: "permanent", Service: "test", DurationMS: i64(90)},
				}},
		}},
	}, {
		name: "replayed after parking, then delivered",
		steps: []step{{
			record: []notification.Event{ev(1, retry.Parked, time.Second, withErr("550 mailbox full"), withReason("permanent"))},
			want: notification.Copy{Channel: "email", Status: "parked", Reason: "permanent", AttemptCount: 1, LastError: "550 mailbox full",
				UpdatedAt: t0.Add(time.Second), Attempts: []notification.Attempt{
					{N: 1, At: t0.Add(time.Second), Outcome: "parked", Error: "550 mailbox full", Reason: "permanent", Service: "test"},
				}},
		}, {
			record: []notification.Event{ev(1, retry.Replayed, time.Hour, withRound(1))},
			want: notification.Copy{Channel: "email", Status: "queued", Round: 1, AttemptCount: 1, LastError: "550 mailbox full",
				UpdatedAt: t0.Add(time.Hour), Attempts: []notification.Attempt{
					{N: 1, At: t0.Add(time.Second), Outcome: "parked", Error: "550 mailbox full", Reason: "permanent", Service: "test"},
					{Round: 1, N: 0, At: t0.Add(time.Hour), Outcome: "replayed", Service: "test"},
				}},
		}, {
			record: []notification.Event{ev(1, retry.Delivered, time.Hour+time.Second, withRound(1), withDur(200))},
			want: notification.Copy{Channel: "email", Status: "delivered", Round: 1, AttemptCount: 2, LastError: "550 mailbox full",
				UpdatedAt: t0.Add(time.Hour + time.Second), Attempts: []notification.Attempt{
					{N: 1, At: t0.Add(time.Second), Outcome: "parked", Error: "550 mailbox full", Reason: "permanent", Service: "test"},
					{Round: 1, N: 0, At: t0.Add(time.Hour), Outcome: "replayed", Service: "test"},
					{Round: 1, N: 1, At: t0.Add(time.Hour + time.Second), Outcome: "delivered", Service: "test", DurationMS: i64(200)},
				}},
		}},
	}, {
		name: "within an attempt, the outcome outranks the clock",
		steps: []step{{
			// The retrier's clock runs 100ms behind the worker's.
			record: []notification.Event{
				ev(1, retry.Failed, 2*time.Second, withErr(s503), withDelay(1000)),
				ev(1, retry.Parked, 1900*time.Millisecond, withErr(s503), withReason("max-retries")),
			},
			want: notification.Copy{Channel: "email", Status: "parked", Reason: "max-retries", AttemptCount: 1, LastError: s503,
				UpdatedAt: t0.Add(2 * time.Second), Attempts: []notification.Attempt{
					{N: 1, At: t0.Add(1900 * time.Millisecond), Outcome: "parked", Error: s503, Reason: "max-retries", Service: "test"},
				}},
		}},
	}, {
		name: "retrying of attempt 2 after the delivery of attempt 3",
		steps: []step{{
			record: []notification.Event{twoFailuresThenDelivered[6], twoFailuresThenDelivered[4]},
			want: notification.Copy{Channel: "email", Status: "delivered", AttemptCount: 2, LastError: "timeout",
				UpdatedAt: t0.Add(5200 * time.Millisecond), Attempts: []notification.Attempt{
					{N: 2, At: t0.Add(2510 * time.Millisecond), Outcome: "failed", Error: "timeout", Service: "test", DelayMS: i64(2400)},
					{N: 3, At: t0.Add(5200 * time.Millisecond), Outcome: "delivered", Service: "test", WaitedMS: i64(2610), DurationMS: i64(80)},
				}},
		}},
	}}
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				id := fmt.Sprintf("ntf_record_%d", i)
				accept(t, s, id, "email")
				for k, st := range tc.steps {
					evs := withID(st.record, id)
					record(t, s, evs...)
					got := get(t, s, id)
					if len(got.Copies) != 1 {
						t.Fatalf("step %d: got %d copies, want 1", k, len(got.Copies))
					}
					if diff := cmp.Diff(st.want, got.Copies[0], cmpOpts...); diff != "" {
						t.Errorf("step %d: copy (-want +got):\n%s", k, diff)
					}
				}
			})
		}
	})
}

// withID returns a copy of events about notification id.
func withID(events []notification.Event, id string) []notification.Event {
	out := make([]notification.Event, len(events))
	for i, e := range events {
		e.ID = id
		out[i] = e
	}
	return out
}

// TestRecordAnyOrder records the same events in every order, in batches
// of every size, each event any number of times, and wants what recording
// them in order gives.
func TestRecordAnyOrder(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		ctx := ctxOf(t)
		want := func(t *testing.T, events []notification.Event) notification.Copy {
			t.Helper()
			id := "ntf_in_order_" + t.Name()
			accept(t, s, id, "email")
			record(t, s, withID(events, id)...)
			return get(t, s, id).Copies[0]
		}
		check := func(t *testing.T, id string, want notification.Copy, order any) {
			t.Helper()
			got := get(t, s, id)
			if len(got.Copies) != 1 {
				t.Fatalf("%v: got %d copies, want 1", order, len(got.Copies))
			}
			if diff := cmp.Diff(want, got.Copies[0], cmpOpts...); diff != "" {
				t.Fatalf("order %v: copy (-in order +this order):\n%s", order, diff)
			}
		}

		t.Run("every permutation of five events, one a batch", func(t *testing.T) {
			five := []notification.Event{parkedAfterRetries[0], parkedAfterRetries[1], parkedAfterRetries[2], parkedAfterRetries[3],
				ev(2, retry.Parked, 2110*time.Millisecond, withErr(s503), withReason("max-retries"))}
			wantCopy := want(t, five)
			if wantCopy.Status != "parked" || wantCopy.AttemptCount != 2 {
				t.Fatalf("in order: got %s after %d attempts, want parked after 2", wantCopy.Status, wantCopy.AttemptCount)
			}
			n := 0
			permute([]int{0, 1, 2, 3, 4}, func(order []int) {
				n++
				id := fmt.Sprintf("ntf_perm_%03d", n)
				accept(t, s, id, "email")
				for _, i := range order {
					record(t, s, withID(five[i:i+1], id)...)
				}
				check(t, id, wantCopy, order)
			})
			if n != 120 {
				t.Fatalf("tried %d orders, want 120", n)
			}
		})

		t.Run("random orders, batches and duplicates", func(t *testing.T) {
			all := append(append([]notification.Event{}, twoFailuresThenDelivered...),
				ev(3, retry.Replayed, 10*time.Second, withRound(1)),
				ev(1, retry.Failed, 11*time.Second, withRound(1), withErr("reset by peer"), withDelay(500), withDur(30)),
				ev(1, retry.Retrying, 11*time.Second+5*time.Millisecond, withRound(1), withErr("reset by peer"), withDelay(600)),
				ev(2, retry.Requeued, 12*time.Second, withRound(1)),
			)
			wantCopy := want(t, all)
			if wantCopy.Status != "retrying" || wantCopy.Round != 1 || wantCopy.NextAttemptAt == nil {
				t.Fatalf("in order: got %+v, want retrying in round 1 with a next attempt", wantCopy)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			for run := range 100 {
				id := fmt.Sprintf("ntf_rand_%03d", run)
				evs := withID(all, id)
				// Every event once, some twice.
				for _, e := range evs {
					if rng.IntN(3) == 0 {
						evs = append(evs, e)
					}
				}
				rng.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
				// Events before the notification.Accepted, half the time.
				early := 0
				if run%2 == 0 {
					early = 1 + rng.IntN(len(evs))
				}
				acceptAt := func(i int) {
					if i == early {
						accept(t, s, id, "email")
					}
				}
				for i := 0; i < len(evs); {
					acceptAt(i)
					n := 1 + rng.IntN(4)
					if i < early && i+n > early {
						n = early - i
					}
					n = min(n, len(evs)-i)
					if err := s.Record(ctx, evs[i:i+n]); err != nil {
						t.Fatalf("run %d: record: %v", run, err)
					}
					i += n
				}
				acceptAt(len(evs))
				check(t, id, wantCopy, fmt.Sprintf("run %d", run))
			}
		})

		t.Run("every event twice", func(t *testing.T) {
			wantCopy := want(t, twoFailuresThenDelivered)
			id := "ntf_twice"
			accept(t, s, id, "email")
			evs := withID(twoFailuresThenDelivered, id)
			record(t, s, evs...)
			record(t, s, evs...) // the same batch again
			for _, e := range evs {
				record(t, s, e, e) // and each event twice in a batch
			}
			check(t, id, wantCopy, "twice")
			counts := map[string]int64{}
			for _, table := range []string{"events", "attempts", "copies"} {
				n, err := store.CountRows(ctx, s, table)
				if err != nil {
					t.Fatal(err)
				}
				counts[table] = n
			}
			record(t, s, evs...)
			for table, before := range counts {
				if n, _ := store.CountRows(ctx, s, table); n != before {
					t.Errorf("%s: %d rows after recording again, want %d", table, n, before)
				}
			}
		})

		t.Run("two versions of one event, either first", func(t *testing.T) {
			a := ev(1, retry.Failed, time.Second, withErr("first"), withDelay(1000))
			b := ev(1, retry.Failed, 2*time.Second, withErr("second"), withDelay(3000))
			accept(t, s, "ntf_ab", "email")
			accept(t, s, "ntf_ba", "email")
			record(t, s, withID([]notification.Event{a}, "ntf_ab")...)
			record(t, s, withID([]notification.Event{b}, "ntf_ab")...)
			record(t, s, withID([]notification.Event{b}, "ntf_ba")...)
			record(t, s, withID([]notification.Event{a}, "ntf_ba")...)
			ab := get(t, s, "ntf_ab").Copies
			ba := get(t, s, "ntf_ba").Copies
			if diff := cmp.Diff(ab, ba, cmpOpts...); diff != "" {
				t.Errorf("a then b (-) differs from b then a (+):\n%s", diff)
			}
		})
	})
}

// permute calls fn with every permutation of s.
func permute(s []int, fn func([]int)) {
	var rec func(k int)
	rec = func(k int) {
		if k == len(s) {
			fn(s)
			return
		}
		for i := k; i < len(s); i++ {
			s[k], s[i] = s[i], s[k]
			rec(k + 1)
			s[k], s[i] = s[i], s[k]
		}
	}
	rec(0)
}

func TestRecordBeforeAccept(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		ctx := ctxOf(t)
		id := "ntf_early"
		evs := withID(twoFailuresThenDelivered[:2], id)
		record(t, s, evs...)
		got := get(t, s, id)
		want := &notification.View{ID: id, CreatedAt: t0.Add(time.Second), Accepted: false, Copies: []notification.Copy{{
			Channel: "email", Status: "retrying", AttemptCount: 1, LastError: s503, NextAttemptAt: at(2200 * time.Millisecond),
			UpdatedAt: t0.Add(time.Second + 10*time.Millisecond), Attempts: twoFailuresThenDeliveredTimeline[:1],
		}}}
		if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
			t.Errorf("placeholder (-want +got):\n%s", diff)
		}
		if page, err := s.List(ctx, store.Query{Search: "NTF_EARL"}); err != nil || len(page.Items) != 1 {
			t.Errorf("search the placeholder by id: %+v, %v; want it", page, err)
		}

		acc := notification.Accepted{ID: id, CreatedAt: t0, Channels: []string{"email", "sms"}, Recipients: []string{"a@example.com", "+15550001111"},
			Payload: []byte(`{"email":{"to":"a@example.com"},"sms":{"to":"+15550001111"}}`)}
		if err := s.Accept(ctx, []notification.Accepted{acc}); err != nil {
			t.Fatal(err)
		}
		// A second Accept of the id, even with other content, is a no-op.
		again := acc
		again.Channels, again.Payload = []string{"webhook"}, []byte(`{"other":true}`)
		if err := s.Accept(ctx, []notification.Accepted{again, acc}); err != nil {
			t.Fatal(err)
		}
		got = get(t, s, id)
		want.CreatedAt, want.Accepted, want.Channels, want.Recipients, want.Payload = t0, true, acc.Channels, acc.Recipients, acc.Payload
		want.Copies = append(want.Copies, notification.Copy{Channel: "sms", Status: "queued", UpdatedAt: t0})
		if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
			t.Errorf("accepted (-want +got):\n%s", diff)
		}
	})
}

// TestRecordBeforeAcceptTenant: a placeholder belongs to the tenant its
// events name, so the default tenant never lists another's notification
// before the API's record of it arrives; that record confirms the tenant.
func TestRecordBeforeAcceptTenant(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		ctx := ctxOf(t)
		inTenant := func(tenant string) func(*notification.Event) {
			return func(e *notification.Event) { e.Tenant = tenant }
		}
		listed := func(q store.Query) []string {
			t.Helper()
			page, err := s.List(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, n := range page.Items {
				ids = append(ids, n.ID+"@"+n.Tenant)
			}
			return ids
		}

		// The first event of ntf_acme names no tenant (as one from before
		// tenants would), the next names acme: the placeholder is acme's.
		record(t, s, withID([]notification.Event{ev(1, retry.Failed, 2*time.Second, withErr(s503))}, "ntf_acme")...)
		record(t, s, withID([]notification.Event{ev(1, retry.Retrying, 3*time.Second, withErr(s503), withDelay(1000), inTenant("acme"))}, "ntf_acme")...)
		// A later event that names no tenant leaves it acme's.
		record(t, s, withID([]notification.Event{ev(2, retry.Requeued, 4*time.Second)}, "ntf_acme")...)
		record(t, s, withID([]notification.Event{ev(1, retry.Delivered, time.Second)}, "ntf_default")...)

		if got := get(t, s, "ntf_acme"); got.Tenant != "acme" || got.Accepted {
			t.Errorf("placeholder of ntf_acme: tenant %q, accepted %v; want acme's, not accepted", got.Tenant, got.Accepted)
		}
		if diff := cmp.Diff([]string{"ntf_default@"}, listed(store.Query{})); diff != "" {
			t.Errorf("the default tenant's list (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"ntf_acme@acme"}, listed(store.Query{Tenant: "acme"})); diff != "" {
			t.Errorf("acme's list (-want +got):\n%s", diff)
		}

		if err := s.Accept(ctx, []notification.Accepted{{ID: "ntf_acme", Tenant: "acme", CreatedAt: t0, Channels: []string{"email"}, Payload: []byte(`{}`)}}); err != nil {
			t.Fatal(err)
		}
		if got := get(t, s, "ntf_acme"); got.Tenant != "acme" || !got.Accepted {
			t.Errorf("ntf_acme once accepted: tenant %q, accepted %v; want acme's, accepted", got.Tenant, got.Accepted)
		}
		// Once accepted, an event naming another tenant changes nothing.
		record(t, s, withID([]notification.Event{ev(2, retry.Delivered, 5*time.Second, inTenant("globex"))}, "ntf_acme")...)
		if got := get(t, s, "ntf_acme"); got.Tenant != "acme" {
			t.Errorf("ntf_acme after an event naming globex: tenant %q, want acme", got.Tenant)
		}
	})
}

func TestRecordInvalid(t *testing.T) {
	good := ev(1, retry.Delivered, time.Second)
	cases := []struct {
		name  string
		event notification.Event
	}{
		{"no id", notification.Event{Channel: "email", Attempt: 1, Outcome: "delivered", At: t0}},
		{"no channel", notification.Event{ID: "ntf_1", Attempt: 1, Outcome: "delivered", At: t0}},
		{"unknown outcome", notification.Event{ID: "ntf_1", Channel: "email", Attempt: 1, Outcome: "exploded", At: t0}},
		{"attempt 0", notification.Event{ID: "ntf_1", Channel: "email", Outcome: "delivered", At: t0}},
		{"replay of round 0", notification.Event{ID: "ntf_1", Channel: "email", Outcome: "replayed", At: t0}},
		{"no time", notification.Event{ID: "ntf_1", Channel: "email", Attempt: 1, Outcome: "delivered"}},
		{"a recipient too long", notification.Event{ID: "ntf_1", Channel: "email", Recipient: strings.Repeat("a", store.MaxRecipient+1), Attempt: 1, Outcome: "delivered", At: t0}},
		{"a recipient not UTF-8", notification.Event{ID: "ntf_1", Channel: "email", Recipient: "\xff@example.com", Attempt: 1, Outcome: "delivered", At: t0}},
	}
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				err := s.Record(ctxOf(t), []notification.Event{good, tc.event})
				var ie *store.InputError
				if !errors.Is(err, store.ErrInvalid) || !errors.As(err, &ie) || ie.Index != 1 {
					t.Fatalf("got %v, want an InputError for item 1", err)
				}
				if _, err := s.Get(ctxOf(t), "ntf_1"); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("the valid event of the batch was stored: %v", err)
				}
			})
		}
	})
}

func TestGetNotFound(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		if _, err := s.Get(ctxOf(t), "ntf_nobody"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
	})
}
