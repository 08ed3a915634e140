package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/internal/store/storetest"
	"github.com/relay-demo/relay/retry"
)

// TestCopyRecipientsMigration fills a database at schema version 3, where
// a copy is (notification, channel), and opens it with this release: every
// row is kept, as the copy of its channel with no recipient, and reads
// back as the same rows written at the current version do; the indexes,
// the foreign key from attempts to copies and the cascades are there, and
// the store keeps one copy per recipient.
func TestCopyRecipientsMigration(t *testing.T) {
	const n = 300 // SeedEvents parks notifications 0, 100 and 200
	created := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	tables := []string{"notifications", "copies", "events", "attempts"}
	for _, backend := range storetest.Backends() {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx := ctxOf(t)
			dsn := storetest.DSN(t, backend)
			old, err := store.OpenAt(ctx, dsn, 3)
			if err != nil {
				t.Fatal(err)
			}
			// Seed names no recipient column: it writes the old schema.
			if err := store.Seed(ctx, old, n, created); err != nil {
				t.Fatalf("seed the version 3 schema: %v", err)
			}
			before := map[string]int64{}
			for _, table := range tables {
				if before[table], err = store.CountRows(ctx, old, table); err != nil || before[table] == 0 {
					t.Fatalf("%s before the migration: %d rows, %v", table, before[table], err)
				}
			}
			if _, err := old.Get(ctx, store.SeedID(1)); err == nil {
				t.Fatal("Get works on the version 3 schema: the database was migrated too far to test the migration")
			}
			old.Close()

			s, err := store.Open(ctx, dsn)
			if err != nil {
				t.Fatalf("migrate: %v", err)
			}
			t.Cleanup(func() { s.Close() })
			for _, table := range tables {
				if got, err := store.CountRows(ctx, s, table); err != nil || got != before[table] {
					t.Errorf("%s after the migration: %d rows (%v), want the %d there were", table, got, err, before[table])
				}
			}
			for _, table := range []string{"copies", "events", "attempts"} {
				rows, err := store.QueryText(ctx, s, "SELECT count(*) FROM "+table+" WHERE recipient <> ''")
				if err != nil || rows[0][0] != "0" {
					t.Errorf("%s rows with a recipient after the migration: %v, %v; want none", table, rows, err)
				}
			}

			// The same rows written at the current version read back alike.
			fresh := storetest.Open(t, backend)
			if err := store.Seed(ctx, fresh, n, created); err != nil {
				t.Fatal(err)
			}
			for _, i := range []int{0, 1, 10, 100, n - 1} {
				id := store.SeedID(i)
				if diff := cmp.Diff(get(t, fresh, id), get(t, s, id), cmpOpts...); diff != "" {
					t.Errorf("Get(%s) (-written now +migrated):\n%s", id, diff)
				}
			}
			for _, q := range []store.Query{{Status: notification.StatusParked}, {Channel: "email", Status: notification.StatusDelivered, Limit: 20}, {Search: "user10@"}} {
				want, err := fresh.List(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				got, err := s.List(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				if len(want.Items) == 0 {
					t.Errorf("List(%+v) is empty: the case proves nothing", q)
				}
				if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
					t.Errorf("List(%+v) (-written now +migrated):\n%s", q, diff)
				}
			}

			// The indexes are on the new copies, and no old table is left.
			indexes := map[string]string{
				storetest.SQLite:   "SELECT name, tbl_name FROM sqlite_master WHERE type = 'index' AND name LIKE 'copies%' ORDER BY name",
				storetest.Postgres: "SELECT indexname, tablename FROM pg_indexes WHERE schemaname = current_schema() AND indexname LIKE 'copies%' ORDER BY indexname",
			}[backend]
			rows, err := store.QueryText(ctx, s, indexes)
			if err != nil {
				t.Fatal(err)
			}
			wantIndexes := [][]string{{"copies_channel_status", "copies"}, {"copies_status", "copies"}}
			if backend == storetest.Postgres {
				wantIndexes = append(wantIndexes[:1:1], []string{"copies_pkey", "copies"}, wantIndexes[1])
			}
			if diff := cmp.Diff(wantIndexes, rows); diff != "" {
				t.Errorf("indexes of copies (-want +got):\n%s", diff)
			}
			leftovers := map[string]string{
				storetest.SQLite:   "SELECT name FROM sqlite_master WHERE name LIKE '%_old'",
				storetest.Postgres: "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename LIKE '%_old'",
			}[backend]
			if rows, err := store.QueryText(ctx, s, leftovers); err != nil || len(rows) > 0 {
				t.Errorf("old tables left: %v, %v", rows, err)
			}
			if backend == storetest.SQLite {
				if rows, err := store.QueryText(ctx, s, "PRAGMA foreign_key_check"); err != nil || len(rows) > 0 {
					t.Errorf("foreign key violations: %v, %v", rows, err)
				}
			}

			// An attempt needs its copy, recipient and all.
			orphan := `INSERT INTO attempts (notification_id, channel, recipient, round, attempt, at, outcome)
				SELECT notification_id, channel, 'nobody@example.com', round, attempt, at, outcome FROM attempts LIMIT 1`
			if err := store.Exec(ctx, s, orphan); err == nil || !strings.Contains(strings.ToLower(err.Error()), "foreign key") {
				t.Errorf("an attempt of a copy that does not exist: %v, want a foreign key violation", err)
			}
			// Deleting a copy deletes its attempts.
			parked := store.SeedID(100)
			if err := store.Exec(ctx, s, "DELETE FROM copies WHERE notification_id = '"+parked+"' AND channel = 'email'"); err != nil {
				t.Fatal(err)
			}
			if rows, err := store.QueryText(ctx, s, "SELECT count(*) FROM attempts WHERE notification_id = '"+parked+"' AND channel = 'email'"); err != nil || rows[0][0] != "0" {
				t.Errorf("attempts of a deleted copy: %v, %v; want none", rows, err)
			}

			// One copy per recipient, each on its own.
			accepted := notification.Accepted{ID: "ntf_split", CreatedAt: t0.Add(time.Hour), Channels: []string{"email", "webhook"},
				Copies: []notification.CopyRef{{Channel: "email", Recipient: "ok1@example.com"}, {Channel: "email", Recipient: "reject@example.com"}, {Channel: "webhook", Recipient: ""}}}
			if err := s.Accept(ctx, []notification.Accepted{accepted}); err != nil {
				t.Fatal(err)
			}
			record(t, s,
				notification.Event{ID: "ntf_split", Channel: "email", Recipient: "ok1@example.com", Attempt: 1, Outcome: retry.Delivered, At: t0.Add(time.Hour + time.Second)},
				notification.Event{ID: "ntf_split", Channel: "email", Recipient: "reject@example.com", Attempt: 1, Outcome: retry.Parked,
					Reason: "permanent", Error: "550 no such user", At: t0.Add(time.Hour + time.Second)})
			var got []string
			for _, c := range get(t, s, "ntf_split").Copies {
				got = append(got, c.Channel+" "+c.Recipient+" "+string(c.Status))
			}
			want := []string{"email ok1@example.com delivered", "email reject@example.com parked", "webhook  queued"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("copies after the migration (-want +got):\n%s", diff)
			}

			// Pruning everything leaves nothing behind.
			if _, err := s.Prune(ctx, t0.Add(365*24*time.Hour)); err != nil {
				t.Fatal(err)
			}
			for _, table := range tables {
				if got, err := store.CountRows(ctx, s, table); err != nil || got != 0 {
					t.Errorf("%s after pruning everything: %d rows (%v), want none", table, got, err)
				}
			}
		})
	}
}

// TestPublicSearchMigration fills a database at schema version 9, before
// a visitor's search had a text of its own, and opens it with this
// release: Open fills in that text for every notification, a batch at a
// time, so that a visitor's search finds the old notifications by what
// it sees of them, and not by what it does not; a text cleared again, as
// a migration does when notification.PublicRecipient changes, is filled
// in at the next Open.
func TestPublicSearchMigration(t *testing.T) {
	const n = 2500 // more than one batch, and a part of one
	created := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	for _, backend := range storetest.Backends() {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx := ctxOf(t)
			dsn := storetest.DSN(t, backend)
			old, err := store.OpenAt(ctx, dsn, 9)
			if err != nil {
				t.Fatal(err)
			}
			if err := store.Seed(ctx, old, n, created); err != nil {
				t.Fatalf("seed the version 9 schema: %v", err)
			}
			old.Close()

			open := func() *store.Store {
				t.Helper()
				s, err := store.Open(ctx, dsn)
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			}
			check := func(s *store.Store) {
				t.Helper()
				if rows, err := store.QueryText(ctx, s, "SELECT count(*) FROM notifications WHERE public_search IS NULL"); err != nil || rows[0][0] != "0" {
					t.Errorf("notifications without public search text after Open: %v, %v", rows, err)
				}
				id := store.SeedID(7)
				rows, err := store.QueryText(ctx, s, "SELECT public_search FROM notifications WHERE id = '"+id+"'")
				if want := id + "\nuser7@example.com\nhttps://hooks.example.com/***"; err != nil || len(rows) != 1 || rows[0][0] != want {
					t.Errorf("public search text of %s = %q, %v; want %q", id, rows, err, want)
				}
				for _, tc := range []struct {
					q    store.Query
					want int
				}{
					{store.Query{Search: "user1234@", Public: true}, 1},
					{store.Query{Search: "hooks.example.com/***", Public: true, Limit: store.MaxLimit}, store.MaxLimit},
					{store.Query{Search: "hooks.example.com/1234", Public: true}, 0},
					{store.Query{Search: "hooks.example.com/1234"}, 1},
				} {
					page, err := s.List(ctx, tc.q)
					if err != nil {
						t.Fatal(err)
					}
					if len(page.Items) != tc.want {
						t.Errorf("List(%+v): %d notifications, want %d", tc.q, len(page.Items), tc.want)
					}
				}
			}
			s := open()
			check(s)
			if backend == storetest.Postgres {
				// Where search has its trigram index, the visitor's text has one too.
				rows, err := store.QueryText(ctx, s, `SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()
					AND indexname IN ('notifications_search_trgm', 'notifications_public_search_trgm') ORDER BY indexname`)
				if err != nil {
					t.Fatal(err)
				}
				if len(rows) == 1 {
					t.Errorf("trigram indexes %q: one without the other", rows)
				}
			}
			if err := store.Exec(ctx, s, "UPDATE notifications SET public_search = NULL"); err != nil {
				t.Fatal(err)
			}
			if page, err := s.List(ctx, store.Query{Search: "user1234@", Public: true}); err != nil || len(page.Items) != 0 {
				t.Errorf("a visitor's search found %d notifications without public search text (%v), want none", len(page.Items), err)
			}
			s.Close()
			check(open())
		})
	}
}
