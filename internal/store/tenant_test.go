package store_test

import (
	"slices"
	"testing"
	"time"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
)

func TestTenants(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		// ntf_x is learnt from an event first (tenant unknown), then
		// accepted as acme's: the record's tenant wins.
		record(t, s, notification.Event{ID: "ntf_x", Channel: "sms", Attempt: 1, Outcome: "failed", At: t0, DelayMS: 1000})
		var accepted []notification.Accepted
		for i, n := range []struct{ id, tenant string }{{"ntf_d", ""}, {"ntf_a1", "acme"}, {"ntf_g", "globex"}, {"ntf_a2", "acme"}, {"ntf_x", "acme"}} {
			accepted = append(accepted, notification.Accepted{ID: n.id, Tenant: n.tenant, CreatedAt: t0.Add(time.Duration(i) * time.Minute), Channels: []string{"sms"}})
		}
		if err := s.Accept(ctxOf(t), accepted); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			q    store.Query
			want []string
		}{
			{"the default tenant's", store.Query{}, []string{"ntf_d"}},
			{"acme's", store.Query{Tenant: "acme"}, []string{"ntf_x", "ntf_a2", "ntf_a1"}},
			{"acme's, a page at a time", store.Query{Tenant: "acme", Limit: 1}, []string{"ntf_x", "ntf_a2", "ntf_a1"}},
			{"globex's, searched", store.Query{Tenant: "globex", Search: "ntf_"}, []string{"ntf_g"}},
			{"nobody's", store.Query{Tenant: "initech"}, nil},
			{"every tenant's", store.Query{AllTenants: true}, []string{"ntf_x", "ntf_a2", "ntf_g", "ntf_a1", "ntf_d"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var got []string
				q := tc.q
				for {
					page, err := s.List(ctxOf(t), q)
					if err != nil {
						t.Fatal(err)
					}
					for _, n := range page.Items {
						if !tc.q.AllTenants && n.Tenant != tc.q.Tenant {
							t.Errorf("%s has tenant %q", n.ID, n.Tenant)
						}
						got = append(got, n.ID)
					}
					if page.Next == "" {
						break
					}
					q.Cursor = page.Next
				}
				if !slices.Equal(got, tc.want) {
					t.Errorf("List = %q, want %q", got, tc.want)
				}
			})
		}
		for id, want := range map[string]string{"ntf_d": "", "ntf_a1": "acme", "ntf_g": "globex", "ntf_x": "acme"} {
			v, err := s.Get(ctxOf(t), id)
			if err != nil {
				t.Fatal(err)
			}
			if v.Tenant != want {
				t.Errorf("Get(%s).Tenant = %q, want %q", id, v.Tenant, want)
			}
		}
	})
}
