package store

import (
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// dialect is what differs between the backends once both speak
// database/sql: placeholders and how a time is stored. Queries are written
// once, with PostgreSQL's $N placeholders.
type dialect int

const (
	sqlite dialect = iota
	postgres
)

func (d dialect) String() string {
	if d == postgres {
		return "postgres"
	}
	return "sqlite"
}

// maxParams bounds the placeholders of one statement: SQLite allows 32766,
// PostgreSQL 65535.
const maxParams = 30000

// q rewrites a query's $N placeholders for d: SQLite reads ?N as the same
// numbered parameter. No query of this package has a $ elsewhere.
func (d dialect) q(query string) string {
	if d == sqlite {
		return strings.ReplaceAll(query, "$", "?")
	}
	return query
}

// arg is placeholder n, in a statement whose placeholders appear in the
// order of their numbers. SQLite gets an anonymous "?": its driver looks
// the name of every numbered parameter up in a list, which made a
// multi-row insert of a few thousand "?NNN" quadratic.
func (d dialect) arg(n int) string {
	if d == sqlite {
		return "?"
	}
	return "$" + strconv.Itoa(n)
}

// values returns rows groups of cols placeholders, "($1,$2),($3,$4)",
// numbered from first.
func (d dialect) values(rows, cols, first int) string {
	var b strings.Builder
	n := first
	for r := range rows {
		if r > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('(')
		for c := range cols {
			if c > 0 {
				b.WriteByte(',')
			}
			b.WriteString(d.arg(n))
			n++
		}
		b.WriteByte(')')
	}
	return b.String()
}

// list returns n placeholders "$1,$2,…" numbered from first.
func (d dialect) list(n, first int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(d.arg(first + i))
	}
	return b.String()
}

// ts is t as a query argument: timestamptz on PostgreSQL, microseconds
// since the epoch on SQLite.
func (d dialect) ts(t time.Time) any {
	if d == sqlite {
		return t.UnixMicro()
	}
	return t.UTC()
}

// nullTS is ts, or NULL for nil.
func (d dialect) nullTS(t *time.Time) any {
	if t == nil {
		return nil
	}
	return d.ts(*t)
}

// bool is b as a query argument.
func (d dialect) bool(b bool) any {
	if d == sqlite {
		if b {
			return int64(1)
		}
		return int64(0)
	}
	return b
}

// timeCol scans a time column from either backend.
type timeCol struct{ t *time.Time }

func (c timeCol) Scan(src any) error {
	switch v := src.(type) {
	case int64:
		*c.t = time.UnixMicro(v).UTC()
	case time.Time:
		*c.t = v.UTC()
	default:
		return fmt.Errorf("scan time from %T", src)
	}
	return nil
}

// nullTimeCol scans a nullable time column into a *time.Time.
type nullTimeCol struct{ t **time.Time }

func (c nullTimeCol) Scan(src any) error {
	if src == nil {
		*c.t = nil
		return nil
	}
	var t time.Time
	if err := (timeCol{&t}).Scan(src); err != nil {
		return err
	}
	*c.t = &t
	return nil
}

// nullInt is a nullable integer as a query argument.
func nullInt(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// ptrInt converts a scanned nullable integer.
func ptrInt(n sql.NullInt64) *int64 {
	if !n.Valid {
		return nil
	}
	return &n.Int64
}

// micro is how precisely both backends store a time.
func micro(t time.Time) time.Time { return t.Truncate(time.Microsecond).UTC() }
