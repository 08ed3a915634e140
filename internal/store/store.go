// Package store is relay's database, opened once per process (Lazy) and
// handed to what needs it. Each file is one concept:
//
//   - the history (record.go, list.go, get.go, public.go, prune.go,
//     load.go): what was accepted, every decision the pipeline made about
//     each channel copy, and the state derived from them;
//   - the Idempotency-Key claims of the ingest API (claim.go);
//   - the webhook endpoints (endpoint.go, seal.go): their URLs, sealed
//     secrets and circuit state, and which notifications name each;
//   - the holds of copies on their way to a worker, which cancellation
//     reads (cancel.go);
//   - the rate limits (rate.go) and the providers' circuits and limits
//     (providers.go) that worker replicas share;
//   - the dead-letter jobs (deadjob.go).
//
// A Store is backed by SQLite (the default, a file on local disk) or by
// PostgreSQL (for several replicas). Events may arrive in any order and
// any number of times: the state of a copy is derived from the set of
// events received, never from their arrival order.
//
// A copy is (notification, channel, recipient): one per channel, or, for a
// channel that delivers to each recipient on its own (email), one per
// recipient, whose recipient is then part of its key (empty otherwise).
//
// Every event is kept in the events table, one row per (copy, round,
// attempt, outcome); copies and attempts are derived from it in the
// transaction that records a batch. Times are stored to the microsecond.
//
// On PostgreSQL the store counts on autovacuum (on by default) for planner
// statistics; Prune refreshes them too, after deleting.
package store

import (
	"context"
	"crypto/cipher"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	moderncsqlite "modernc.org/sqlite" // registers the "sqlite" database/sql driver
	sqlite3 "modernc.org/sqlite/lib"
)

// ErrNotFound is returned for an id or key the store does not hold.
var ErrNotFound = errors.New("not found")

// Store is the history of notifications, on SQLite or PostgreSQL. It is
// safe for concurrent use.
type Store struct {
	d dialect
	// write takes every write. On SQLite it holds one connection, since
	// SQLite serialises writers anyway; on PostgreSQL it is the same pool
	// as read.
	write *sql.DB
	// read serves Get and List. On SQLite its connections are read-only
	// and, in WAL mode, never wait for the writer.
	read *sql.DB
	// pool is the pgx pool under write and read on PostgreSQL, nil on
	// SQLite.
	pool *pgxpool.Pool
	// pruneBatch bounds how many notifications one Prune statement
	// deletes.
	pruneBatch int
	// sealer seals the endpoints' secrets (WithSealKey); nil stores them
	// in plaintext.
	sealer cipher.AEAD
	// fallbacks open secrets sealed with an earlier (or a later) key
	// (WithSealKeyFallbacks); they never seal.
	fallbacks []cipher.AEAD
	// reseal seals secrets a fallback opens with the store's key as Open
	// opens it (WithReseal); resealed counts them.
	reseal   bool
	resealed int
	// path is the SQLite database file, "" on PostgreSQL.
	path string
}

// Open opens the store the DSN names, applies its migrations and fills in
// the text a visitor's search looks in where they left none.
//
// The DSN is one of:
//   - postgres://… or postgresql://…: PostgreSQL (pgx connection string;
//     pool settings such as pool_max_conns are honoured);
//   - sqlite:/path/file.db, file:/path/file.db, or a plain file path:
//     SQLite, creating the file (and its write-ahead log) readable by its
//     owner only, and its parent directories likewise.
//
// Options, such as WithSealKey, apply before the migrations.
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	kind, target, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	var s *Store
	switch kind {
	case postgres:
		s, err = openPostgres(ctx, target)
	default:
		s, err = openSQLite(ctx, target)
	}
	if err != nil {
		return nil, err
	}
	for _, opt := range opts {
		if err := opt(s); err != nil {
			s.Close()
			return nil, err
		}
	}
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.sealStored(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.fillPublicSearch(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if s.d == sqlite {
		// SQLite keeps no planner statistics unless asked; this gathers
		// them where missing or stale (and Prune refreshes them).
		if _, err := s.write.ExecContext(ctx, "PRAGMA optimize=0x10002"); err != nil {
			s.Close()
			return nil, fmt.Errorf("optimize sqlite database: %w", err)
		}
	}
	return s, nil
}

// acceptedDSNs says what Open understands, for errors about a DSN.
const acceptedDSNs = "want postgres://…, postgresql://…, sqlite:/path/file.db, file:/path/file.db or a file path"

// parseDSN tells the backend a DSN names and what to hand its driver: the
// DSN itself for PostgreSQL, a file path for SQLite. Errors never quote the
// DSN, which may hold a password.
func parseDSN(dsn string) (dialect, string, error) {
	switch {
	case strings.TrimSpace(dsn) == "":
		return 0, "", fmt.Errorf("empty DSN: %s", acceptedDSNs)
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return postgres, dsn, nil
	}
	path := dsn
	switch {
	case strings.HasPrefix(dsn, "sqlite:"):
		path = strings.TrimPrefix(dsn, "sqlite:")
	case strings.HasPrefix(dsn, "file:"):
		path = strings.TrimPrefix(dsn, "file:")
	default:
		if scheme, _, ok := strings.Cut(dsn, "://"); ok {
			return 0, "", fmt.Errorf("unsupported DSN scheme %q: %s", scheme, acceptedDSNs)
		}
	}
	// sqlite:///abs/path and file:///abs/path are URL spellings of /abs/path.
	if strings.HasPrefix(path, "///") {
		path = path[2:]
	}
	switch {
	case strings.ContainsAny(path, "?#"):
		return 0, "", fmt.Errorf("DSN holds query parameters, which the store sets itself: %s", acceptedDSNs)
	case path == "", path == ":memory:", strings.HasPrefix(path, "//"):
		return 0, "", fmt.Errorf("DSN names no database file: %s", acceptedDSNs)
	}
	return sqlite, path, nil
}

// CheckDSN reports whether Open understands dsn, without opening it, for
// a process that opens its store only when it first needs it. Its errors
// never quote the DSN.
func CheckDSN(dsn string) error {
	_, _, err := parseDSN(dsn)
	return err
}

func openPostgres(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's message can quote the DSN, password and all.
		return nil, fmt.Errorf("parse postgres DSN: %s", redact(err, dsn))
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		pool.Close()
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	return &Store{d: postgres, write: db, read: db, pool: pool, pruneBatch: defaultPruneBatch}, nil
}

// redact stands in for pgx's error message, which may contain the DSN.
func redact(err error, dsn string) string {
	msg := err.Error()
	if u, perr := url.Parse(dsn); perr == nil && u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			msg = strings.ReplaceAll(msg, p, "xxxxx")
		}
	}
	return msg
}

func openSQLite(ctx context.Context, path string) (*Store, error) {
	if err := checkTempDir(sqliteTempDirs(os.Getenv)); err != nil {
		return nil, err
	}
	// The database holds payloads, recipients, idempotency keys and the
	// endpoints' secrets: what relay creates only its user may read.
	// SQLite gives the write-ahead log and its index the database file's
	// mode.
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create directory for sqlite database: %w", err)
		}
	}
	if f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
	} else if !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("create sqlite database %q: %w", path, err)
	}
	uri := "file:" + (&url.URL{Path: path}).EscapedPath()
	// The writer begins its transactions IMMEDIATE: it takes the write
	// lock up front instead of failing with SQLITE_BUSY when a read
	// transaction turns into a write.
	write, err := sql.Open("sqlite", uri+"?_busy_timeout=10000&_journal_mode=WAL&_synchronous=NORMAL&_foreign_keys=1&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("open sqlite database %q: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)
	// The writer's first connection creates the file and turns WAL on
	// before any reader opens it.
	if err := pingSQLite(ctx, write); err != nil {
		write.Close()
		return nil, fmt.Errorf("open sqlite database %q: %w", path, err)
	}
	read, err := sql.Open("sqlite", uri+"?_busy_timeout=10000&_foreign_keys=1&_query_only=1")
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("open sqlite database %q: %w", path, err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	read.SetMaxOpenConns(n)
	read.SetMaxIdleConns(n)
	read.SetConnMaxIdleTime(0)
	return &Store{d: sqlite, write: write, read: read, pruneBatch: defaultPruneBatch, path: path}, nil
}

// Exposed lists the files of a SQLite store that users other than its
// owner may read or write, with their modes ("data/history.db 0644"):
// files an earlier release created, or someone opened up since. Open
// creates them for their owner only, and leaves existing ones as they
// are. Nil on PostgreSQL.
func (s *Store) Exposed() []string {
	if s.path == "" {
		return nil
	}
	var out []string
	for _, name := range []string{s.path, s.path + "-wal", s.path + "-shm"} {
		if fi, err := os.Stat(name); err == nil && fi.Mode().Perm()&0o077 != 0 {
			out = append(out, fmt.Sprintf("%s %04o", name, fi.Mode().Perm()))
		}
	}
	return out
}

// pingSQLite opens the writer's first connection. Turning WAL on needs
// the database to itself, and SQLite answers SQLITE_BUSY at once, busy
// timeout or not, while another process is opening or migrating the same
// file (every service of the demo opens the shared history at start): it
// tries again for up to ten seconds.
func pingSQLite(ctx context.Context, db *sql.DB) error {
	deadline := time.Now().Add(10 * time.Second)
	for pause := 5 * time.Millisecond; ; pause = min(2*pause, 250*time.Millisecond) {
		err := db.PingContext(ctx)
		var busy *moderncsqlite.Error
		if err == nil || !errors.As(err, &busy) || busy.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
	}
}

// Close closes the store's connections.
func (s *Store) Close() error {
	err := s.write.Close()
	if s.read != s.write {
		err = errors.Join(err, s.read.Close())
	}
	if s.pool != nil {
		s.pool.Close()
	}
	return err
}

// Ping reports whether the database answers, for readiness checks.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.write.PingContext(ctx); err != nil {
		return fmt.Errorf("ping %s: %w", s.d, err)
	}
	if s.read != s.write {
		if err := s.read.PingContext(ctx); err != nil {
			return fmt.Errorf("ping %s: %w", s.d, err)
		}
	}
	return nil
}

// Backend names the database behind the store: "sqlite" or "postgres".
func (s *Store) Backend() string { return s.d.String() }
