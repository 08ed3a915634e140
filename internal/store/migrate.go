package store

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// migrations holds one directory of numbered .sql files per backend:
// NNNN_name.sql, applied in order and never edited once released.
//
//go:embed migrations
var migrations embed.FS

// migration is one file of migrations/<backend>.
type migration struct {
	version int
	name    string
	sql     string
}

func (d dialect) migrations() ([]migration, error) {
	dir := path.Join("migrations", d.String())
	entries, err := fs.ReadDir(migrations, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var out []migration
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %q: name must start with a positive number and an underscore", name)
		}
		b, err := fs.ReadFile(migrations, path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("read migration %q: %w", name, err)
		}
		out = append(out, migration{version: v, name: strings.TrimSuffix(name, ".sql"), sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i := 1; i < len(out); i++ {
		if out[i].version == out[i-1].version {
			return nil, fmt.Errorf("migrations %q and %q share version %d", out[i-1].name, out[i].name, out[i].version)
		}
	}
	return out, nil
}

// migrate applies the migrations the database lacks, all in one
// transaction, and records each in schema_migrations. On PostgreSQL a
// transaction-scoped advisory lock, keyed by the schema, makes replicas
// that open at once take turns: the first migrates, the others find
// nothing left to do. On SQLite the writer's BEGIN IMMEDIATE does the same.
func (s *Store) migrate(ctx context.Context) error { return s.migrateTo(ctx, 0) }

// migrateTo is migrate up to version upTo, or all the way when upTo is 0:
// tests make a database as an older release left it.
func (s *Store) migrateTo(ctx context.Context, upTo int) error {
	all, err := s.d.migrations()
	if err != nil {
		return err
	}
	if upTo > 0 {
		all = slices.DeleteFunc(all, func(m migration) bool { return m.version > upTo })
	}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin migration: %w", err)
	}
	defer tx.Rollback()
	tsType := "INTEGER"
	if s.d == postgres {
		tsType = "timestamptz"
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtext('relay/history/migrate:' || coalesce(current_schema(), '')))`); err != nil {
			return fmt.Errorf("lock for migration: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at `+tsType+` NOT NULL
	)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	applied := map[int]bool{}
	rows, err := tx.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return fmt.Errorf("read schema_migrations: %w", err)
	}
	err = each(rows, func() error {
		var v int
		if err := rows.Scan(&v); err != nil {
			return err
		}
		applied[v] = true
		return nil
	})
	if err != nil {
		return fmt.Errorf("read schema_migrations: %w", err)
	}
	for _, m := range all {
		if applied[m.version] {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("apply migration %q: %w", m.name, err)
		}
		if _, err := tx.ExecContext(ctx, s.d.q(`INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`),
			m.version, m.name, s.d.ts(time.Now())); err != nil {
			return fmt.Errorf("record migration %q: %w", m.name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit migrations: %w", err)
	}
	return nil
}
