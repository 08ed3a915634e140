package store_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/internal/store/storetest"
)

func TestOpenSQLiteForms(t *testing.T) {
	cases := []struct {
		name string
		dsn  func(dir string) string
		file func(dir string) string
	}{
		{"plain path, parents created", func(d string) string { return filepath.Join(d, "a", "b", "h.db") }, func(d string) string { return filepath.Join(d, "a", "b", "h.db") }},
		{"sqlite: prefix", func(d string) string { return "sqlite:" + filepath.Join(d, "h.db") }, func(d string) string { return filepath.Join(d, "h.db") }},
		{"sqlite:// URL", func(d string) string { return "sqlite://" + filepath.Join(d, "h.db") }, func(d string) string { return filepath.Join(d, "h.db") }},
		{"file: prefix", func(d string) string { return "file:" + filepath.Join(d, "x", "h.db") }, func(d string) string { return filepath.Join(d, "x", "h.db") }},
		{"a space in the path", func(d string) string { return filepath.Join(d, "my dir", "h.db") }, func(d string) string { return filepath.Join(d, "my dir", "h.db") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := store.Open(ctxOf(t), tc.dsn(dir))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Ping(ctxOf(t)); err != nil {
				t.Fatal(err)
			}
			if got := s.Backend(); got != "sqlite" {
				t.Errorf("backend %q, want sqlite", got)
			}
			if _, err := os.Stat(tc.file(dir)); err != nil {
				t.Errorf("database file: %v", err)
			}
		})
	}
}

func TestOpenBadDSN(t *testing.T) {
	cases := []struct {
		name, dsn string
	}{
		{"empty", ""},
		{"other scheme, with a password", "mysql://relay:s3cret@db:3306/relay"},
		{"in memory", ":memory:"},
		{"query parameters", "file:/tmp/h.db?mode=ro"},
		{"sqlite URL with a host", "sqlite://host/h.db"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := store.Open(ctxOf(t), tc.dsn)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.Contains(msg, "postgres://") || !strings.Contains(msg, "sqlite:") {
				t.Errorf("error %q does not say which DSNs are accepted", msg)
			}
			if strings.Contains(msg, "s3cret") {
				t.Errorf("error %q shows the password", msg)
			}
		})
	}
}

// TestMigrate opens one database several times, one after the other and
// at once: every Open succeeds, and each migration is applied once.
func TestMigrate(t *testing.T) {
	for _, backend := range storetest.Backends() {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			dsn := storetest.DSN(t, backend)
			var wg sync.WaitGroup
			errs := make([]error, 4)
			for i := range errs {
				wg.Go(func() {
					s, err := store.Open(ctxOf(t), dsn)
					if err == nil {
						err = s.Close()
					}
					errs[i] = err
				})
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("concurrent open %d: %v", i, err)
				}
			}
			for range 2 {
				s, err := store.Open(ctxOf(t), dsn)
				if err != nil {
					t.Fatalf("open again: %v", err)
				}
				n, err := store.CountRows(ctxOf(t), s, "schema_migrations")
				want := store.MigrationCount(s)
				s.Close()
				if err != nil || n != int64(want) || want == 0 {
					t.Fatalf("schema_migrations: %d rows (%v), want %d", n, err, want)
				}
			}
		})
	}
}

func TestPing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		if err := s.Ping(ctxOf(t)); err != nil {
			t.Fatal(err)
		}
	})
}
