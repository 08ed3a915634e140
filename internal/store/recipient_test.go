package store_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/retry"
)

// split is a notification whose email goes to two recipients, a copy
// each, and whose webhook is one copy.
func split(id string) notification.Accepted {
	return notification.Accepted{ID: id, CreatedAt: t0, Channels: []string{"email", "webhook"},
		Recipients: []string{"ok1@example.com", "reject@example.com", "https://hooks.example.com/x"},
		Copies:     []notification.CopyRef{{Channel: "email", Recipient: "reject@example.com"}, {Channel: "email", Recipient: "ok1@example.com"}, {Channel: "webhook", Recipient: ""}},
		Payload:    []byte(`{}`)}
}

// to is an event of the email copy of id that goes to recipient.
func to(id, recipient string, e notification.Event) notification.Event {
	e.ID, e.Recipient = id, recipient
	return e
}

// TestRecipientCopies: each recipient's copy is delivered, retried and
// parked on its own, and Get shows each one's outcome, by channel and
// recipient.
func TestRecipientCopies(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		ctx := ctxOf(t)
		if err := s.Accept(ctx, []notification.Accepted{split("ntf_split")}); err != nil {
			t.Fatal(err)
		}
		queued := get(t, s, "ntf_split")
		want := []notification.Copy{
			{Channel: "email", Recipient: "ok1@example.com", Status: "queued", UpdatedAt: t0},
			{Channel: "email", Recipient: "reject@example.com", Status: "queued", UpdatedAt: t0},
			{Channel: "webhook", Status: "queued", UpdatedAt: t0},
		}
		if diff := cmp.Diff(want, queued.Copies, cmpOpts...); diff != "" {
			t.Fatalf("copies as accepted (-want +got):\n%s", diff)
		}

		// The same attempt numbers for both recipients: each copy counts
		// its own.
		var evs []notification.Event
		for _, e := range twoFailuresThenDelivered {
			evs = append(evs, to("ntf_split", "ok1@example.com", e))
		}
		evs = append(evs,
			to("ntf_split", "reject@example.com", ev(1, retry.Parked, 400*time.Millisecond, withErr("550 no such user"), withReason("permanent"))),
			notification.Event{ID: "ntf_split", Channel: "webhook", Attempt: 1, Outcome: retry.Delivered, At: t0.Add(time.Second)})
		record(t, s, evs...)
		got := get(t, s, "ntf_split")
		want = []notification.Copy{
			{Channel: "email", Recipient: "ok1@example.com", Status: "delivered", AttemptCount: 3, LastError: "timeout",
				UpdatedAt: t0.Add(5200 * time.Millisecond), Attempts: twoFailuresThenDeliveredTimeline},
			{Channel: "email", Recipient: "reject@example.com", Status: "parked", Reason: "permanent", AttemptCount: 1, LastError: "550 no such user",
				UpdatedAt: t0.Add(400 * time.Millisecond), Attempts: []notification.Attempt{
					{N: 1, At: t0.Add(400 * time.Millisecond), Outcome: "parked", Error: "550 no such user", Reason: "permanent", Service: "test"},
				}},
			{Channel: "webhook", Status: "delivered", AttemptCount: 1, UpdatedAt: t0.Add(time.Second),
				Attempts: []notification.Attempt{{N: 1, At: t0.Add(time.Second), Outcome: "delivered"}}},
		}
		if diff := cmp.Diff(want, got.Copies, cmpOpts...); diff != "" {
			t.Errorf("copies after their events (-want +got):\n%s", diff)
		}

		// The parked recipient replayed and delivered: the other's copy
		// does not move.
		record(t, s,
			to("ntf_split", "reject@example.com", ev(1, retry.Replayed, time.Minute, withRound(1))),
			to("ntf_split", "reject@example.com", ev(1, retry.Delivered, time.Minute+time.Second, withRound(1))))
		got = get(t, s, "ntf_split")
		if c := got.Copies[1]; c.Recipient != "reject@example.com" || c.Status != "delivered" || c.Round != 1 || len(c.Attempts) != 3 {
			t.Errorf("the replayed copy: %+v", c)
		}
		if diff := cmp.Diff(want[0], got.Copies[0], cmpOpts...); diff != "" {
			t.Errorf("the other recipient's copy changed (-before +after):\n%s", diff)
		}
	})
}

// TestRecipientEventsFirst: events about a recipient's copy that arrive
// before the notification.Accepted make that copy; the notification.Accepted adds the others.
func TestRecipientEventsFirst(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		record(t, s, to("ntf_early", "reject@example.com", ev(1, retry.Parked, time.Second, withReason("permanent"))))
		if err := s.Accept(ctxOf(t), []notification.Accepted{split("ntf_early")}); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range get(t, s, "ntf_early").Copies {
			got = append(got, c.Channel+"/"+c.Recipient+" "+string(c.Status))
		}
		want := []string{"email/ok1@example.com queued", "email/reject@example.com parked", "webhook/ queued"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("copies (-want +got):\n%s", diff)
		}
	})
}

func TestAcceptInvalid(t *testing.T) {
	long := strings.Repeat("a", store.MaxRecipient-len("@example.com")+1) + "@example.com"
	ok := split("ntf_ok")
	cases := []struct {
		name   string
		copies []notification.CopyRef
		want   string
	}{
		{"a copy with no channel", []notification.CopyRef{{Channel: "", Recipient: "ada@example.com"}}, "has a copy with no channel"},
		{"a copy of another channel", []notification.CopyRef{{Channel: "sms", Recipient: "+15550001111"}}, `has a copy for "sms", which is not one of its channels`},
		{"a recipient too long", []notification.CopyRef{{Channel: "email", Recipient: long}}, "321 bytes long, more than 320"},
		{"a recipient not UTF-8", []notification.CopyRef{{Channel: "email", Recipient: "ada\xff@example.com"}}, "not UTF-8 text"},
		{"a recipient with a NUL", []notification.CopyRef{{Channel: "email", Recipient: "ada\x00@example.com"}}, "not UTF-8 text"},
	}
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				bad := split("ntf_bad")
				bad.Copies = append(bad.Copies, tc.copies...)
				err := s.Accept(ctxOf(t), []notification.Accepted{ok, bad})
				var ie *store.InputError
				if !errors.Is(err, store.ErrInvalid) || !errors.As(err, &ie) || ie.Index != 1 || !strings.Contains(ie.Problem, tc.want) {
					t.Fatalf("got %v, want an InputError for item 1 saying %q", err, tc.want)
				}
				if _, err := s.Get(ctxOf(t), "ntf_ok"); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("the valid notification of the batch was stored: %v", err)
				}
			})
		}
		t.Run("a recipient of the longest length", func(t *testing.T) {
			good := split("ntf_long")
			good.Copies = []notification.CopyRef{{Channel: "email", Recipient: long[1:]}}
			if err := s.Accept(ctxOf(t), []notification.Accepted{good}); err != nil {
				t.Fatal(err)
			}
			if c := get(t, s, "ntf_long").Copies; len(c) != 1 || c[0].Recipient != long[1:] {
				t.Errorf("copies %+v, want one to the %d-byte recipient", c, len(long)-1)
			}
		})
	})
}

func TestListRecipients(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		ctx := ctxOf(t)
		if err := s.Accept(ctx, []notification.Accepted{split("ntf_split")}); err != nil {
			t.Fatal(err)
		}
		record(t, s,
			to("ntf_split", "ok1@example.com", ev(1, retry.Delivered, time.Second)),
			to("ntf_split", "reject@example.com", ev(1, retry.Parked, time.Second, withReason("permanent"))))
		for _, q := range []store.Query{
			{Status: notification.StatusParked}, {Status: notification.StatusDelivered}, {Status: notification.StatusQueued},
			{Channel: "email", Status: notification.StatusParked}, {Search: "reject@"},
		} {
			page, err := s.List(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"ntf_split"}, ids(page.Items)); diff != "" {
				t.Errorf("List(%+v) (-want +got):\n%s", q, diff)
			}
		}
		if page, err := s.List(ctx, store.Query{Channel: "webhook", Status: notification.StatusParked}); err != nil || len(page.Items) != 0 {
			t.Errorf("List(webhook, parked) = %+v, %v; want nothing: only an email copy is parked", page.Items, err)
		}
		page, err := s.List(ctx, store.Query{})
		if err != nil {
			t.Fatal(err)
		}
		want := []notification.CopyStatus{
			{Channel: "email", Recipient: "ok1@example.com", Status: "delivered"},
			{Channel: "email", Recipient: "reject@example.com", Status: "parked"},
			{Channel: "webhook", Status: "queued"},
		}
		if diff := cmp.Diff(want, page.Items[0].Copies); diff != "" {
			t.Errorf("summary copies (-want +got):\n%s", diff)
		}
	})
}

func TestChannelStatus(t *testing.T) {
	email := func(statuses ...notification.Status) store.Summary {
		var n store.Summary
		for _, st := range statuses {
			n.Copies = append(n.Copies, notification.CopyStatus{Channel: "email", Recipient: string(st) + "@example.com", Status: st})
		}
		return n
	}
	cases := []struct {
		name string
		n    store.Summary
		want map[string]notification.Status
	}{
		{"no copies", store.Summary{}, map[string]notification.Status{}},
		{"one copy a channel", store.Summary{Copies: []notification.CopyStatus{{Channel: "email", Status: "delivered"}, {Channel: "webhook", Status: "parked"}}},
			map[string]notification.Status{"email": "delivered", "webhook": "parked"}},
		{"all delivered", email("delivered", "delivered"), map[string]notification.Status{"email": "delivered"}},
		{"one queued: not delivered yet", email("delivered", "queued"), map[string]notification.Status{"email": "queued"}},
		{"one retrying", email("queued", "retrying", "delivered"), map[string]notification.Status{"email": "retrying"}},
		{"one parked shows, whatever the others", email("delivered", "retrying", "parked", "queued"), map[string]notification.Status{"email": "parked"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.n.ChannelStatus()); diff != "" {
				t.Errorf("ChannelStatus (-want +got):\n%s", diff)
			}
		})
	}
}
