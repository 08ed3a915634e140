package strategy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
)

// Strategy is one retry design: the broker objects it needs and the
// consumers that move a failed message on. Every strategy takes
// notifications on the same ingress and parks (where it parks at all) in
// the same dead-letter queue, so a runner can put them side by side.
type Strategy interface {
	// Name is the strategy's name, as the workshop selects it.
	Name() string
	// Describe says in a few lines where the design comes from and how it
	// retries.
	Describe() string
	// Layout names the queues a runner publishes to and counts.
	Layout() Layout
	// Plan is the full declaration: what Declare creates and Delete
	// removes, and what the diagrams draw.
	Plan() retry.Plan
	// Declare creates the strategy's exchanges and queues. It fails with
	// ErrUnsupported when the broker lacks what the strategy needs.
	Declare(ctx context.Context, conn *amqp.Connection) error
	// Run consumes the work queue with h, and runs whatever retry
	// machinery the strategy has, until ctx is done or the connection is
	// lost. observe, if not nil, is told every decision the strategy's own
	// consumers make.
	Run(ctx context.Context, conn *amqp.Connection, h retry.Handler, observe func(Event)) error
	// Delete removes everything Declare created, messages included.
	Delete(conn *amqp.Connection) error
}

// ErrUnsupported means the broker cannot run the strategy (for example, it
// has no delayed-message plugin). It is never worked around: the strategy
// does not run.
var ErrUnsupported = errors.New("the broker cannot run this strategy")

// NotRunnable is the ErrUnsupported of a strategy that needs a newer broker
// than the one it was declared on: it names the version the broker's
// connection reported and what the strategy needs.
type NotRunnable struct {
	// Version is the broker's version, as its connection reported it.
	Version string
	// Needs says what the strategy needs, such as "4.3 with quorum queues".
	Needs string
}

// Error says what the broker is and what it would need to be.
func (e *NotRunnable) Error() string {
	v := e.Version
	if v == "" {
		v = "(version not reported)"
	}
	return fmt.Sprintf("not runnable on RabbitMQ %s: needs %s", v, e.Needs)
}

// Is makes a NotRunnable an ErrUnsupported.
func (e *NotRunnable) Is(target error) bool { return target == ErrUnsupported }

// NativeSupport reports whether a broker that reports version (the
// "version" property of its connection, such as "4.3.0") can run
// native-delayed-retry: nil if it can, else a *NotRunnable. Delayed retry
// for quorum queues arrived in RabbitMQ 4.3; an older broker would take the
// queue arguments it does not know and requeue at once, so the strategy is
// refused rather than run without its delays.
func NativeSupport(version string) error {
	if retry.VersionAtLeast(version, 4, 3) {
		return nil
	}
	return &NotRunnable{Version: version, Needs: "4.3 with quorum queues"}
}

// Layout is where a strategy's notifications enter and where they end.
type Layout struct {
	// Exchange and Key are where producers publish a notification.
	Exchange, Key string
	// WorkQueue is the queue the handler consumes.
	WorkQueue string
	// DeadQueue is the catch-all park: every message the strategy gives up
	// on lands there. Empty when the strategy never parks.
	DeadQueue string
	// Copies are further dead-letter queues that receive copies of some
	// parked messages (bound on business headers); a runner counts them
	// but must not count them as in flight.
	Copies []string
	// Consumed are the queues Run consumes, the work queue first. Run
	// does not wait for all of them to have a consumer (relay's stages
	// declare their topology first): a runner that times retries waits
	// until each has one.
	Consumed []string
}

// Event is one decision a strategy's consumers made about a message.
type Event struct {
	// ID is the message id.
	ID string
	// Outcome is what was decided: retry.Retrying (another attempt after
	// Delay), retry.Parked, retry.Requeued or retry.Waiting (a hop on the
	// way back, no new decision), or retry.Failed (a consumer handing a
	// failure on).
	Outcome retry.Outcome
	// Delay is the wait scheduled before the next attempt, for Retry.
	Delay time.Duration
	// Published counts the confirmed publishes the step made: zero when
	// the broker itself moved the message (a requeue, a dead-lettering).
	Published int
	// Reason says why a message was parked.
	Reason string
}

// Options configure a strategy for one run.
type Options struct {
	// Prefix namespaces every exchange and queue, so runs and tests share
	// a broker without meeting.
	Prefix string
	// URL is the broker's address. Only the delayed-exchange strategy
	// needs it, to probe for the plugin on a connection of its own.
	URL string
	// Policy gives the retry delays and how many retries a message gets.
	// Strategies with one fixed delay use Policy.Delay(1); per-message-ttl
	// waits Delay(1) × n before retry n.
	Policy retry.Policy
	// Concurrency is the number of messages each consumer handles at once;
	// zero means 4.
	Concurrency int
	// Prefetch is each consumer's unacked window; zero means twice
	// Concurrency.
	Prefetch int
}

func (o Options) concurrency() int {
	if o.Concurrency <= 0 {
		return 4
	}
	return o.Concurrency
}

func (o Options) prefetch() int {
	if o.Prefetch <= 0 {
		return 2 * o.concurrency()
	}
	return o.Prefetch
}

// The names every strategy shares, before the prefix.
const (
	// IngressExchange is where notifications are published.
	IngressExchange = retry.DefaultExchange
	// RoutingKey routes a notification to the work queue.
	RoutingKey = "webhook"
	// WorkQueue is the queue the handler consumes.
	WorkQueue = "webhook-queue"
	// ErrorExchange receives what the work queue dead-letters.
	ErrorExchange = retry.ErrorExchange
	// ErrorQueue holds failed messages until a consumer decides.
	ErrorQueue = retry.ErrorQueue
	// RequeueQueue holds messages on their way back.
	RequeueQueue = retry.RequeueQueue
	// WaitExchange routes messages into a wait queue.
	WaitExchange = retry.WaitExchange
	// WaitQueue holds messages until their TTL expires.
	WaitQueue = "wait-queue"
	// RequeueExchange routes expired messages back to the queue named by
	// their routing key.
	RequeueExchange = "requeue-exchange"
	// DeadExchange is the headers exchange parked messages go through.
	DeadExchange = retry.DeadExchange
	// DeadQueue is the catch-all park.
	DeadQueue = retry.DeadQueue
)

// Names lists every strategy, in the order the workshop tells them: the
// article's three options first, then the other designs.
func Names() []string {
	return []string{
		"naive-requeue", "naive-requeue-once", "dlx-requeue", "delayed-exchange",
		"ttl-wait-queue", "per-message-ttl", "ttl-tiers", "quorum-delivery-limit", "retry-aware-dlx",
		"delay-levels", "native-delayed-retry",
	}
}

// DirectSuffix names a pipeline strategy run with the direct hand-off
// (retry.Direct) instead of the stages: "delay-levels/direct" is
// delay-levels whose worker publishes each retry to wait itself.
const DirectSuffix = "/direct"

// Handoffs lists the strategies that run with either hand-off: relay's
// pipeline on the backends that wait outside the work queue. Each also
// runs as its name + DirectSuffix.
func Handoffs() []string { return []string{"delayed-exchange", "ttl-tiers", "delay-levels"} }

// New returns the named strategy: one of Names, or one of Handoffs with
// DirectSuffix.
func New(name string, o Options) (Strategy, error) {
	if err := o.Policy.Validate(); err != nil {
		return nil, err
	}
	if base, direct := strings.CutSuffix(name, DirectSuffix); direct {
		if !slices.Contains(Handoffs(), base) {
			return nil, fmt.Errorf("strategy %q has no direct hand-off: only %s do", base, strings.Join(Handoffs(), ", "))
		}
		s, err := New(base, o)
		if err != nil {
			return nil, err
		}
		s.(*pipeline).handoff = retry.Direct
		return s, nil
	}
	switch name {
	case "naive-requeue":
		return &naive{o: o}, nil
	case "naive-requeue-once":
		return &naive{o: o, once: true}, nil
	case "dlx-requeue":
		return &dlxRequeue{o: o}, nil
	case "delayed-exchange":
		return &pipeline{o: o, backend: retry.Plugin}, nil
	case "ttl-wait-queue":
		return &waitQueue{o: o}, nil
	case "per-message-ttl":
		return &messageTTL{o: o}, nil
	case "ttl-tiers":
		return &pipeline{o: o, backend: retry.TTL}, nil
	case "quorum-delivery-limit":
		return &deliveryLimit{o: o}, nil
	case "retry-aware-dlx":
		return &retryAware{o: o}, nil
	case "delay-levels":
		return &pipeline{o: o, backend: retry.Levels}, nil
	case "native-delayed-retry":
		return &pipeline{o: o, backend: retry.Native}, nil
	}
	return nil, fmt.Errorf("unknown strategy %q: want one of %v, or %s after one of %v", name, Names(), DirectSuffix, Handoffs())
}

// Known reports whether name is a strategy New accepts.
func Known(name string) bool {
	if base, direct := strings.CutSuffix(name, DirectSuffix); direct {
		return slices.Contains(Handoffs(), base)
	}
	return slices.Contains(Names(), name)
}

// names is the prefixed naming every strategy shares.
type names struct{ prefix string }

func (n names) of(base string) string { return n.prefix + base }

// layout is the shared layout, with the queues the strategy consumes
// besides the work queue; copies are added by the strategies that have
// them.
func (n names) layout(parks bool, consumed ...string) Layout {
	l := Layout{Exchange: n.of(IngressExchange), Key: RoutingKey, WorkQueue: n.of(WorkQueue), Consumed: []string{n.of(WorkQueue)}}
	for _, q := range consumed {
		l.Consumed = append(l.Consumed, n.of(q))
	}
	if parks {
		l.DeadQueue = n.of(DeadQueue)
	}
	return l
}
