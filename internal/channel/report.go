package channel

import (
	"context"

	"github.com/relay-demo/relay/internal/notification"
)

// Reporter takes the operational events a sender sees happen: an
// endpoint disabled, a provider's circuit opened. The events Emitter's
// Operate is one.
type Reporter func(notification.Operational)

type reporterKey struct{}

// WithReporter returns ctx carrying r, which the senders report
// operational events to.
func WithReporter(ctx context.Context, r Reporter) context.Context {
	return context.WithValue(ctx, reporterKey{}, r)
}

// report hands op to ctx's reporter, if it has one.
func report(ctx context.Context, op notification.Operational) {
	if r, ok := ctx.Value(reporterKey{}).(Reporter); ok && r != nil {
		r(op)
	}
}
