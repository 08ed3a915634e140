package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/relay-demo/relay/internal/store"
)

// TestLazy checks that a Lazy opens its store at the first use only, hands
// every caller the same one, and tries again after a failure.
func TestLazy(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "history.db")
	opens, fail := 0, true
	l := store.NewLazy(func(ctx context.Context) (*store.Store, error) {
		opens++
		if fail {
			return nil, errors.New("down")
		}
		return store.Open(ctx, dsn)
	})
	if opens != 0 {
		t.Fatalf("opened %d times before its first use", opens)
	}
	if _, err := l.Open(t.Context()); err == nil {
		t.Fatal("Open succeeded while the store is down")
	}
	fail = false
	first, err := l.Open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	again, err := l.Open(t.Context())
	if err != nil || again != first || opens != 2 {
		t.Errorf("second use: %p, %v after %d opens; want the first store, %p, after 2", again, err, opens, first)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}
