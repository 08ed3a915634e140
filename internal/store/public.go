package store

import (
	"context"
	"database/sql"
	"fmt"
)

// fillBatch is how many notifications one statement of fillPublicSearch
// fills in.
const fillBatch = 1000

// fillPublicSearch makes the public_search of every notification that has
// none: those stored before the column existed, and those a migration
// cleared because notification.PublicRecipient changed. Until then a
// visitor's search (Query.Public) does not find them, which hides them
// rather than show what it should not. Open runs it once the migrations
// are done; replicas that run it at once fill in the same text.
func (s *Store) fillPublicSearch(ctx context.Context) error {
	for {
		var (
			args []any
			n    int
		)
		rows, err := s.write.QueryContext(ctx, s.d.q(`SELECT id, recipients FROM notifications WHERE public_search IS NULL ORDER BY id LIMIT $1`), fillBatch)
		if err != nil {
			return fmt.Errorf("read notifications without public search text: %w", err)
		}
		err = each(rows, func() error {
			var (
				id         string
				recipients []byte
				list       []string
			)
			if err := rows.Scan(&id, &recipients); err != nil {
				return err
			}
			if err := unmarshalStrings(recipients, &list); err != nil {
				return err
			}
			args = append(args, id, publicSearchText(id, list))
			n++
			return nil
		})
		if err != nil {
			return fmt.Errorf("read notifications without public search text: %w", err)
		}
		if n == 0 {
			return nil
		}
		// SQLite and PostgreSQL both name the columns of VALUES column1,
		// column2, ….
		err = s.inTx(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE notifications SET public_search = v.column2 FROM (VALUES `+s.d.values(n, 2, 1)+`) AS v
				WHERE notifications.id = v.column1 AND notifications.public_search IS NULL`, args...)
			return err
		})
		if err != nil {
			return fmt.Errorf("fill in public search text: %w", err)
		}
		if n < fillBatch {
			return nil
		}
	}
}
