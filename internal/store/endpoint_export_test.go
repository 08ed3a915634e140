package store

import "context"

// Exec runs a statement on the store's writer, for tests that set up a
// database by hand.
func Exec(ctx context.Context, s *Store, query string) error {
	_, err := s.write.ExecContext(ctx, query)
	return err
}
