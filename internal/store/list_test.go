package store_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/retry"
)

// listFixture stores five notifications, a minute apart, and returns
// their ids, oldest first.
func listFixture(t *testing.T, s *store.Store) []string {
	t.Helper()
	type copyEvent struct {
		channel string
		outcome retry.Outcome
	}
	fixture := []struct {
		id         string
		channels   []string
		recipients []string
		events     []copyEvent
	}{
		{"ntf_aa1", []string{"email"}, []string{"Alice@Example.com"}, []copyEvent{{"email", "delivered"}}},
		{"ntf_aa2", []string{"email", "sms"}, []string{"bob@example.com", "+15551234567"}, []copyEvent{{"email", "delivered"}, {"sms", "parked"}}},
		{"ntf_b3", []string{"webhook"}, []string{"https://hooks.example.org/x"}, []copyEvent{{"webhook", "failed"}}},
		{"ntf_b4", []string{"email"}, []string{"carol@example.net"}, nil},
		{"ntf_c5", []string{"sms"}, []string{"+15559876543"}, []copyEvent{{"sms", "delivered"}}},
	}
	var ids []string
	for i, f := range fixture {
		created := t0.Add(time.Duration(i) * time.Minute)
		err := s.Accept(ctxOf(t), []notification.Accepted{{ID: f.id, CreatedAt: created, Channels: f.channels, Recipients: f.recipients}})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range f.events {
			record(t, s, notification.Event{ID: f.id, Channel: e.channel, Attempt: 1, Outcome: e.outcome, At: created.Add(time.Second), DelayMS: 1000})
		}
		ids = append(ids, f.id)
	}
	return ids
}

func TestList(t *testing.T) {
	cases := []struct {
		name string
		q    store.Query
		want []string
	}{
		{"everything, newest first", store.Query{}, []string{"ntf_c5", "ntf_b4", "ntf_b3", "ntf_aa2", "ntf_aa1"}},
		{"status parked", store.Query{Status: "parked"}, []string{"ntf_aa2"}},
		{"status delivered", store.Query{Status: "delivered"}, []string{"ntf_c5", "ntf_aa2", "ntf_aa1"}},
		{"status retrying", store.Query{Status: "retrying"}, []string{"ntf_b3"}},
		{"status queued", store.Query{Status: "queued"}, []string{"ntf_b4"}},
		{"channel sms", store.Query{Channel: "sms"}, []string{"ntf_c5", "ntf_aa2"}},
		{"channel email, delivered", store.Query{Channel: "email", Status: "delivered"}, []string{"ntf_aa2", "ntf_aa1"}},
		{"channel sms, delivered: the same copy must match both", store.Query{Channel: "sms", Status: "delivered"}, []string{"ntf_c5"}},
		{"since, inclusive", store.Query{Since: t0.Add(3 * time.Minute)}, []string{"ntf_c5", "ntf_b4"}},
		{"until, exclusive", store.Query{Until: t0.Add(2 * time.Minute)}, []string{"ntf_aa2", "ntf_aa1"}},
		{"since and until", store.Query{Since: t0.Add(time.Minute), Until: t0.Add(3 * time.Minute)}, []string{"ntf_b3", "ntf_aa2"}},
		{"search a whole id", store.Query{Search: "ntf_b3"}, []string{"ntf_b3"}},
		{"search an id prefix, any case", store.Query{Search: "NTF_AA"}, []string{"ntf_aa2", "ntf_aa1"}},
		{"search is no id substring", store.Query{Search: "aa2"}, nil},
		{"search a recipient substring", store.Query{Search: "example.com"}, []string{"ntf_aa2", "ntf_aa1"}},
		{"search a recipient, any case", store.Query{Search: "ALICE@example"}, []string{"ntf_aa1"}},
		{"search a phone number", store.Query{Search: "5551234"}, []string{"ntf_aa2"}},
		{"search a webhook URL", store.Query{Search: "hooks.example.org"}, []string{"ntf_b3"}},
		{"search wildcards match themselves", store.Query{Search: "%"}, nil},
		{"search underscore matches itself", store.Query{Search: "a_1"}, nil},
		{"search and status", store.Query{Search: "example.com", Status: "parked"}, []string{"ntf_aa2"}},
		{"a visitor's search: an id", store.Query{Search: "ntf_b", Public: true}, []string{"ntf_b4", "ntf_b3"}},
		{"a visitor's search: an address", store.Query{Search: "example.com", Public: true}, []string{"ntf_aa2", "ntf_aa1"}},
		{"a visitor's search: a webhook URL's host", store.Query{Search: "https://hooks.example.org", Public: true}, []string{"ntf_b3"}},
		{"a visitor's search: a webhook URL's path", store.Query{Search: "example.org/x", Public: true}, nil},
		{"a visitor's search: what stands for the path", store.Query{Search: "example.org/***", Public: true}, []string{"ntf_b3"}},
		{"limit", store.Query{Limit: 2}, []string{"ntf_c5", "ntf_b4"}},
	}
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		listFixture(t, s)
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				page, err := s.List(ctxOf(t), tc.q)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, ids(page.Items), cmpOpts...); diff != "" {
					t.Errorf("ids (-want +got):\n%s", diff)
				}
			})
		}

		t.Run("summary", func(t *testing.T) {
			page, err := s.List(ctxOf(t), store.Query{Search: "ntf_aa2"})
			if err != nil {
				t.Fatal(err)
			}
			want := []store.Summary{{
				ID: "ntf_aa2", CreatedAt: t0.Add(time.Minute), Accepted: true,
				Channels: []string{"email", "sms"}, Recipients: []string{"bob@example.com", "+15551234567"},
				Copies: []notification.CopyStatus{{Channel: "email", Status: "delivered"}, {Channel: "sms", Status: "parked"}},
			}}
			if diff := cmp.Diff(want, page.Items, cmpOpts...); diff != "" {
				t.Errorf("summary (-want +got):\n%s", diff)
			}
			if page.Next != "" {
				t.Errorf("next cursor %q on the only page", page.Next)
			}
		})
	})
}

func TestListErrors(t *testing.T) {
	cases := []struct {
		name string
		q    store.Query
		want error
	}{
		{"unknown status", store.Query{Status: "lost"}, store.ErrBadQuery},
		{"search across lines", store.Query{Search: "a.com\nb"}, store.ErrBadQuery},
		{"cursor not base64", store.Query{Cursor: "!!!"}, store.ErrBadCursor},
		{"cursor without id", store.Query{Cursor: "MTIz"}, store.ErrBadCursor},            // "123"
		{"cursor with a bad time", store.Query{Cursor: "eCxudGZfMQ"}, store.ErrBadCursor}, // "x,ntf_1"
	}
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				if _, err := s.List(ctxOf(t), tc.q); !errors.Is(err, tc.want) {
					t.Fatalf("got %v, want %v", err, tc.want)
				}
			})
		}
	})
}

// TestListPages reads every page while new notifications arrive between
// reads, and wants each notification there was at the start exactly
// once, in order.
func TestListPages(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		ctx := ctxOf(t)
		var want []string
		var batch []notification.Accepted
		for i := range 25 {
			// Pairs share a creation time, so that pages also break between
			// two notifications of the same time.
			created := t0.Add(time.Duration(i/2) * time.Second)
			id := fmt.Sprintf("ntf_page_%02d", i)
			batch = append(batch, notification.Accepted{ID: id, CreatedAt: created, Channels: []string{"email"}})
			want = append([]string{id}, want...)
		}
		if err := s.Accept(ctx, batch); err != nil {
			t.Fatal(err)
		}
		// Newer notifications, created later than all the others at
		// one time, sort by id descending among themselves.
		var newcomers []string
		for _, limit := range []int{1, 2, 7, 25, 100} {
			t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
				start := append(slices.Sorted(slices.Values(newcomers)), want...)
				slices.Reverse(start[:len(newcomers)])
				var got []string
				q := store.Query{Limit: limit}
				for pages := 0; ; pages++ {
					if pages > 30 {
						t.Fatal("more pages than notifications")
					}
					page, err := s.List(ctx, q)
					if err != nil {
						t.Fatal(err)
					}
					if len(page.Items) > limit {
						t.Fatalf("page of %d, limit %d", len(page.Items), limit)
					}
					got = append(got, ids(page.Items)...)
					// A newer notification arrives between page reads.
					newer := notification.Accepted{ID: fmt.Sprintf("ntf_new_%03d_%02d", limit, pages), CreatedAt: t0.Add(time.Hour), Channels: []string{"sms"}}
					if err := s.Accept(ctx, []notification.Accepted{newer}); err != nil {
						t.Fatal(err)
					}
					newcomers = append(newcomers, newer.ID)
					if page.Next == "" {
						break
					}
					q.Cursor = page.Next
				}
				if diff := cmp.Diff(start, got); diff != "" {
					t.Errorf("ids over all pages (-want +got):\n%s", diff)
				}
			})
		}
	})
}

func ids(items []store.Summary) []string {
	var out []string
	for _, n := range items {
		out = append(out, n.ID)
	}
	return out
}
