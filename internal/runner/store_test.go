package runner_test

import (
	"testing"

	"github.com/relay-demo/relay/internal/config"
	"github.com/relay-demo/relay/internal/runner"
)

// TestStoreShared checks that a service started with a shared store uses
// it and leaves it open, and one without opens its own.
func TestStoreShared(t *testing.T) {
	shared := config.Store{DataDir: t.TempDir()}.Lazy()
	t.Cleanup(func() { _ = shared.Close() })
	ctx := runner.WithStore(t.Context(), shared)

	got, closeStore := runner.Store(ctx, config.Store{DataDir: t.TempDir()})
	if got != shared {
		t.Fatal("the service opened a store of its own beside the shared one")
	}
	s, err := got.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := closeStore(); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Errorf("the service closed the shared store: %v", err)
	}

	own, closeOwn := runner.Store(t.Context(), config.Store{DataDir: t.TempDir()})
	if own == shared {
		t.Error("a service without a shared store was given one")
	}
	if err := closeOwn(); err != nil {
		t.Error(err)
	}
}
