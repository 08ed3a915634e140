package store

import (
	"context"
	"database/sql"
	"strings"
)

// The column types of the multi-row statements, for PostgreSQL's unnest.
var (
	eventTypes   = []string{"text", "text", "text", "integer", "integer", "text", "timestamptz", "text", "text", "bigint", "bigint", "text", "text", "boolean"}
	copyTypes    = []string{"text", "text", "text", "text", "text", "integer", "integer", "text", "timestamptz", "timestamptz"}
	attemptTypes = []string{"text", "text", "text", "integer", "integer", "timestamptz", "text", "text", "text", "text", "bigint", "bigint", "bigint", "text", "boolean"}
)

// execRows runs head + rows + tail, where rows is the source of a
// multi-row INSERT: args holds len(types) values a row.
//
// On SQLite the rows are a VALUES list, split into statements of at most
// maxParams arguments. On PostgreSQL they are unnest() of one array per
// column: a single statement whose text does not depend on the number of
// rows, so that pgx prepares it once per connection, not once per batch
// size, and whose parameters are a handful of arrays, not thousands.
func execRows(ctx context.Context, tx *sql.Tx, d dialect, head, tail string, types []string, args []any) error {
	return queryRows(ctx, tx, d, head, tail, types, args, nil)
}

// queryRows is execRows for a statement that returns rows (RETURNING),
// each handed to scan.
func queryRows(ctx context.Context, tx *sql.Tx, d dialect, head, tail string, types []string, args []any, scan func(*sql.Rows) error) error {
	cols := len(types)
	if len(args) == 0 {
		return nil
	}
	if d == postgres {
		n := len(args) / cols
		columns := make([]any, cols)
		var src strings.Builder
		src.WriteString("SELECT * FROM unnest(")
		for c := range cols {
			col := make([]any, n)
			for r := range n {
				col[r] = args[r*cols+c]
			}
			columns[c] = col
			if c > 0 {
				src.WriteString(", ")
			}
			src.WriteString(d.arg(c+1) + "::" + types[c] + "[]")
		}
		src.WriteString(")")
		return run(ctx, tx, head+src.String()+tail, columns, scan)
	}
	per := maxParams / cols
	for len(args) > 0 {
		n := min(per, len(args)/cols)
		chunk := args[:n*cols]
		args = args[n*cols:]
		if err := run(ctx, tx, head+"VALUES "+d.values(n, cols, 1)+tail, chunk, scan); err != nil {
			return err
		}
	}
	return nil
}

func run(ctx context.Context, tx *sql.Tx, query string, args []any, scan func(*sql.Rows) error) error {
	if scan == nil {
		_, err := tx.ExecContext(ctx, query, args...)
		return err
	}
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	return each(rows, func() error { return scan(rows) })
}

// in is the condition "col is one of values", with its arguments: an IN
// list on SQLite, = ANY of one array on PostgreSQL, whose statement text
// then does not depend on the number of values.
func (d dialect) in(col string, values []string) (string, []any) {
	if d == postgres {
		return col + " = ANY($1)", []any{values}
	}
	args := make([]any, len(values))
	for i, v := range values {
		args[i] = v
	}
	return col + " IN (" + d.list(len(values), 1) + ")", args
}

// each calls fn for every row of rows, then closes them.
func each(rows *sql.Rows, fn func() error) error {
	defer rows.Close()
	for rows.Next() {
		if err := fn(); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return rows.Close()
}
