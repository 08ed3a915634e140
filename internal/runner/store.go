package runner

import (
	"context"

	"github.com/relay-demo/relay/internal/config"
	"github.com/relay-demo/relay/internal/store"
)

type storeKey struct{}

// WithStore makes every service started with ctx share the history store
// s, which the caller closes once they have stopped: relay all's one.
func WithStore(ctx context.Context, s *store.Lazy) context.Context {
	return context.WithValue(ctx, storeKey{}, s)
}

// Store returns the process's history store: the one ctx carries
// (WithStore), which closeStore leaves open, or else cfg's, opened on
// first use with opts, which closeStore closes.
func Store(ctx context.Context, cfg config.Store, opts ...store.Option) (s *store.Lazy, closeStore func() error) {
	if s, ok := ctx.Value(storeKey{}).(*store.Lazy); ok {
		return s, func() error { return nil }
	}
	s = cfg.Lazy(opts...)
	return s, s.Close
}
