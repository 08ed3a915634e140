// Package storetest opens real history stores for tests: a SQLite file
// in the test's temporary directory, or a PostgreSQL schema of its own
// that is dropped when the test ends.
//
// PostgreSQL is HISTORY_TEST_DSN if set, else DefaultPostgresDSN. When it
// cannot be reached the test is skipped, unless CI=true, where it fails
// (testenv.Unavailable): CI must never pass by skipping.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/internal/testenv"
)

// The backends a store can have, as Open and DSN take them.
const (
	SQLite   = "sqlite"
	Postgres = "postgres"
)

// DefaultPostgresDSN is the PostgreSQL tests use when HISTORY_TEST_DSN is
// not set: a local server with trust authentication.
const DefaultPostgresDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// Backends lists every backend, for tests that run against each.
func Backends() []string { return []string{SQLite, Postgres} }

// Open opens a store on backend that is closed when the test ends.
func Open(tb testing.TB, backend string) *store.Store {
	tb.Helper()
	dsn := DSN(tb, backend)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := store.Open(ctx, dsn)
	if err != nil {
		tb.Fatalf("open %s store: %v", backend, err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("close %s store: %v", backend, err)
		}
	})
	return s
}

// DSN returns the DSN of an empty database on backend for this test: a
// new SQLite file, or a new PostgreSQL schema (named in the DSN's
// search_path) dropped with all it holds when the test ends.
func DSN(tb testing.TB, backend string) string {
	tb.Helper()
	switch backend {
	case SQLite:
		return filepath.Join(tb.TempDir(), "history.db")
	case Postgres:
		return postgresSchema(tb)
	}
	tb.Fatalf("unknown backend %q, want %q or %q", backend, SQLite, Postgres)
	return ""
}

func postgresSchema(tb testing.TB) string {
	tb.Helper()
	base, where := os.Getenv("HISTORY_TEST_DSN"), "HISTORY_TEST_DSN"
	if base == "" {
		base, where = DefaultPostgresDSN, DefaultPostgresDSN
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		testenv.Unavailable(tb, "PostgreSQL unreachable at %s (set HISTORY_TEST_DSN to test against another): %v", where, err)
	}
	defer conn.Close(ctx)
	var b [6]byte
	rand.Read(b[:])
	schema := "history_test_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		tb.Fatalf("create schema %s: %v", schema, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatalf("parse HISTORY_TEST_DSN: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
