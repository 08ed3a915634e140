package bench

import (
	"context"
	"errors"
	"sync"
)

// group runs the services of a figure (an API, a retrier, workers) until
// stop, and gathers what they returned other than their cancellation.
type group struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	errs   error
}

func startGroup(ctx context.Context) *group {
	g := &group{}
	g.ctx, g.cancel = context.WithCancel(ctx)
	return g
}

// run runs f under the group's context.
func (g *group) run(f func(context.Context) error) {
	g.wg.Go(func() {
		if err := f(g.ctx); err != nil && !errors.Is(err, context.Canceled) {
			g.mu.Lock()
			g.errs = errors.Join(g.errs, err)
			g.mu.Unlock()
		}
	})
}

// stop cancels the group's context, waits for every service and returns
// what they returned.
func (g *group) stop() error {
	g.cancel()
	g.wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.errs
}
