package store_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/internal/store/storetest"
)

// TestExplain shows the plans of the main statements, with -v, over
// HISTORY_EXPLAIN_N seeded notifications (2000 by default). On SQLite,
// whose planner does not weigh table sizes much, it also checks that they
// use the indexes meant for them; PostgreSQL rightly scans tables this
// small, so run it with HISTORY_EXPLAIN_N=1000000 to see its plans at size.
func TestExplain(t *testing.T) {
	n := 2000
	if v := os.Getenv("HISTORY_EXPLAIN_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			t.Fatalf("HISTORY_EXPLAIN_N=%q: want a positive number", v)
		}
	}
	mid := store.SeedID(n / 2)
	created := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Millisecond) }

	cases := []struct {
		name string
		list *store.Query
		// page2 lists the page after the first.
		page2 bool
		sql   string
		args  func(s *store.Store) (string, []any)
		// sqliteWant are fragments SQLite's plan must hold, sqliteNot
		// fragments it must not.
		sqliteWant []string
		sqliteNot  []string
	}{
		{name: "get notification", sql: store.GetNotificationSQL, sqliteWant: []string{"SEARCH notifications USING INDEX sqlite_autoindex_notifications_1 (id=?)"}},
		{name: "get copies and attempts", sql: store.GetCopiesSQL, sqliteWant: []string{"SEARCH c USING PRIMARY KEY (notification_id=?)", "SEARCH a USING PRIMARY KEY (notification_id=? AND channel=? AND recipient=?)"}},
		{name: "list, first page", list: &store.Query{}, sqliteWant: []string{"SEARCH n USING INDEX notifications_tenant_created_at_id (tenant=?)"}, sqliteNot: []string{"TEMP B-TREE"}},
		{name: "list, a later page", page2: true, sqliteWant: []string{"SEARCH n USING INDEX notifications_tenant_created_at_id (tenant=? AND (created_at,id)<(?,?))"}, sqliteNot: []string{"TEMP B-TREE"}},
		{name: "list, since and until", list: &store.Query{Since: created(n / 4), Until: created(n / 2)}, sqliteWant: []string{"SEARCH n USING INDEX notifications_tenant_created_at_id (tenant=? AND created_at>? AND created_at<?)"}, sqliteNot: []string{"TEMP B-TREE"}},
		{name: "list, every tenant's", list: &store.Query{AllTenants: true}, sqliteWant: []string{"SCAN n USING INDEX notifications_created_at_id"}, sqliteNot: []string{"TEMP B-TREE"}},
		{name: "list, status parked", list: &store.Query{Status: "parked"}},
		{name: "list, email retrying", list: &store.Query{Channel: "email", Status: "retrying"}},
		{name: "list, search a recipient", list: &store.Query{Search: "user12345@"}},
		{name: "list, search an id", list: &store.Query{Search: mid}},
		{name: "list, a visitor's search", list: &store.Query{Search: "user12345@", Public: true}},
		{name: "record, read back a batch's events", args: func(s *store.Store) (string, []any) {
			return store.LoadEventsQuery(s, []string{store.SeedID(1), store.SeedID(n / 3), mid})
		}, sqliteWant: []string{"SEARCH events USING PRIMARY KEY (notification_id=?)"}},
		{name: "prune a batch", sql: store.PruneNotificationsSQL, sqliteWant: []string{"SEARCH notifications USING COVERING INDEX notifications_created_at_id (created_at<?)"}, sqliteNot: []string{"TEMP B-TREE"}},
	}
	for _, backend := range storetest.Backends() {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s := storetest.Open(t, backend)
			ctx := ctxOf(t)
			if err := store.Seed(ctx, s, n, created); err != nil {
				t.Fatal(err)
			}
			// A later page: the cursor of the first.
			first, err := s.List(ctx, store.Query{Limit: 50})
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					var plan []string
					var err error
					switch {
					case tc.page2:
						plan, err = store.ExplainList(ctx, s, store.Query{Limit: 50, Cursor: first.Next})
					case tc.list != nil:
						plan, err = store.ExplainList(ctx, s, *tc.list)
					case tc.args != nil:
						query, args := tc.args(s)
						plan, err = store.Explain(ctx, s, query, args...)
					case strings.Contains(tc.sql, "$2"):
						plan, err = store.Explain(ctx, s, tc.sql, seedTime(s, created(n/10)), 1000)
					default:
						plan, err = store.Explain(ctx, s, tc.sql, mid)
					}
					if err != nil {
						t.Fatal(err)
					}
					text := strings.Join(plan, "\n")
					took := ""
					if tc.list != nil {
						start := time.Now()
						if _, err := s.List(ctx, *tc.list); err != nil {
							t.Fatal(err)
						}
						took = fmt.Sprintf(" (List took %s)", time.Since(start).Round(time.Microsecond))
					}
					t.Logf("%s, %d notifications%s:\n%s", backend, n, took, text)
					if backend != storetest.SQLite {
						return
					}
					for _, w := range tc.sqliteWant {
						if !strings.Contains(text, w) {
							t.Errorf("plan lacks %q", w)
						}
					}
					for _, w := range tc.sqliteNot {
						if strings.Contains(text, w) {
							t.Errorf("plan has %q", w)
						}
					}
				})
			}
		})
	}
}

// seedTime is t as the backend of s takes it as an argument.
func seedTime(s *store.Store, t time.Time) any {
	if s.Backend() == storetest.SQLite {
		return t.UnixMicro()
	}
	return t
}
