package retry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Backend is how the pipeline makes a message wait before its next attempt.
type Backend string

// The delay backends.
const (
	// Plugin waits in an x-delayed-message exchange, from the
	// rabbitmq_delayed_message_exchange plugin: any delay, per message, on
	// one node, RabbitMQ 4.2 at most.
	Plugin Backend = "plugin"
	// TTL waits in one queue per delay step whose x-message-ttl expires
	// the message on: any broker, clusters, quorum queues; a delay is
	// rounded up to a step.
	TTL Backend = "ttl"
	// Levels waits in binary delay levels: level k is a queue whose
	// messages expire after 2^k ms, and exchanges route a message through
	// the levels of the bits set in its delay, so it waits exactly that
	// long: any delay from 1 ms to 2^32-1 ms (49 days), on any broker,
	// clusters and quorum queues, every waiting message in an ordinary
	// queue.
	Levels Backend = "levels"
	// Native is RabbitMQ 4.3's delayed retry for quorum queues: a rejected
	// message waits inside its own queue, min(first delay × attempt, last
	// delay), and is dead-lettered past the delivery limit.
	Native Backend = "native"
	// Auto picks, against the broker: Native on RabbitMQ 4.3 or later with
	// quorum queues and a schedule it can express, else Plugin where the
	// broker has it, else Levels.
	Auto Backend = "auto"
)

// Handoff is how a failed message reaches its wait.
type Handoff string

// The hand-offs.
const (
	// ViaStages is the article's topology: the worker hands a failure to
	// error-exchange, the error stage counts it and publishes it to wait,
	// and the requeue stage sends it back to its work queue: two consumer
	// hops per retry, every decision in one place (the retrier).
	ViaStages Handoff = ""
	// Direct has the worker count the failure and publish it to wait
	// itself, and the broker route it back to the work queue when the wait
	// is over: one confirmed publish per retry, the broker's own floor.
	// The error stage stays, for the nack a worker falls back to.
	Direct Handoff = "direct"
)

// MaxDelay is the longest wait any backend can express: 2^32-1 ms, about
// 49.7 days (the delayed-message plugin's and x-message-ttl's limit, and
// Levels' 32 levels).
const MaxDelay = (1<<32 - 1) * time.Millisecond

// levelCount is the number of binary delay levels: 2^32-1 ms at most.
const levelCount = 32

// requeues reports whether the topology has requeue-queue and its stage.
func (t Topology) requeues() bool { return t.Handoff == ViaStages && t.Backend != Native }

// HasRequeueStage reports whether the topology has requeue-queue, and so
// needs the requeue stage: with the stages hand-off, on every backend but
// Native.
func (t Topology) HasRequeueStage() bool { return t.requeues() }

// waitDestinations are the queues a wait ends in: requeue-queue with the
// stages, each work queue with a direct hand-off.
func (t Topology) waitDestinations() []string {
	if t.requeues() {
		return []string{t.Name(RequeueQueue)}
	}
	var out []string
	for _, r := range t.WorkRoutes() {
		out = append(out, r.Queue)
	}
	return out
}

// levelExchange and levelQueue name delay level k (0..31).
func (t Topology) levelExchange(k int) string { return t.Name(fmt.Sprintf("wait.level.%02d", k)) }

func (t Topology) levelQueue(k int) string { return t.levelExchange(k) }

// deliverExchange routes a message whose levels are over to its
// destination, by the last words of its routing key.
func (t Topology) deliverExchange() string { return t.Name("wait.deliver") }

// directWaitQueue is the TTL backend's wait queue of one step for one
// destination, with a direct hand-off.
func (t Topology) directWaitQueue(step time.Duration, dest string) string {
	return t.Name("wait." + StepName(step) + "." + strings.TrimPrefix(dest, t.Prefix))
}

// waitPlan adds the backend's exchanges, queues and bindings.
func (t Topology) waitPlan(p *Plan) {
	dests := t.waitDestinations()
	switch t.Backend {
	case Native:
		return
	case Plugin:
		p.Exchanges = append(p.Exchanges, Exchange{Name: t.Name(WaitExchange), Kind: "x-delayed-message",
			Args: amqp.Table{"x-delayed-type": amqp.ExchangeDirect}})
		for _, d := range dests {
			p.Bindings = append(p.Bindings, Binding{Exchange: t.Name(WaitExchange), Queue: d, Key: t.waitKey(d)})
		}
	case TTL:
		p.Exchanges = append(p.Exchanges, Exchange{Name: t.Name(WaitExchange), Kind: amqp.ExchangeDirect})
		for _, s := range t.Policy.Steps() {
			for _, d := range dests {
				q := t.WaitQueue(s)
				key := StepName(s)
				if !t.requeues() {
					q = t.directWaitQueue(s, d)
					key = q
				}
				args := t.queueArgs(true)
				args["x-message-ttl"] = s.Milliseconds()
				args["x-dead-letter-exchange"] = "" // the default exchange,
				args["x-dead-letter-routing-key"] = d
				p.Queues = append(p.Queues, Queue{Name: q, Args: args})
				p.Bindings = append(p.Bindings, Binding{Exchange: t.Name(WaitExchange), Queue: q, Key: key})
			}
		}
	case Levels:
		// A message the deliver exchange cannot route (its queue was
		// deleted) goes to the dead-letter exchange rather than nowhere.
		p.Exchanges = append(p.Exchanges, Exchange{Name: t.deliverExchange(), Kind: amqp.ExchangeTopic,
			Args: amqp.Table{"alternate-exchange": t.Name(DeadExchange)}})
		for k := levelCount - 1; k >= 0; k-- {
			next := t.deliverExchange()
			if k > 0 {
				next = t.levelExchange(k - 1)
			}
			args := t.queueArgs(true)
			args["x-message-ttl"] = int64(1) << k
			args["x-dead-letter-exchange"] = next
			p.Exchanges = append(p.Exchanges, Exchange{Name: t.levelExchange(k), Kind: amqp.ExchangeTopic})
			p.Queues = append(p.Queues, Queue{Name: t.levelQueue(k), Args: args})
			// The word of level k in the routing key says whether the
			// message waits here (1) or passes on at once (0).
			stars := strings.Repeat("*.", levelCount-1-k)
			p.Bindings = append(p.Bindings,
				Binding{Exchange: t.levelExchange(k), Queue: t.levelQueue(k), Key: stars + "1.#"},
				Binding{Exchange: t.levelExchange(k), ToExchange: next, Key: stars + "0.#"})
		}
		for _, d := range dests {
			p.Bindings = append(p.Bindings, Binding{Exchange: t.deliverExchange(), Queue: d,
				Key: strings.Repeat("*.", levelCount) + d})
		}
	}
}

// waitKey is the plugin's routing key for a destination: requeue-queue's
// is "requeue", a work queue's is its name.
func (t Topology) waitKey(dest string) string {
	if dest == t.Name(RequeueQueue) {
		return requeueKey
	}
	return dest
}

// nativeArgs are the work queues' arguments for RabbitMQ 4.3's delayed
// retry: a rejected message waits min(first × attempt, last) in its own
// queue, and past the limit the queue dead-letters it to error-exchange,
// whose stage parks it.
func (t Topology) nativeArgs() amqp.Table {
	first, last := t.Policy.Delay(1), t.Policy.Delay(t.Policy.Retries())
	return amqp.Table{
		"x-delayed-retry-type": "failed",
		"x-delayed-retry-min":  first.Milliseconds(),
		"x-delayed-retry-max":  last.Milliseconds(),
		"x-delivery-limit":     int64(t.Policy.Retries()),
	}
}

// validateBackend reports what the backend cannot do with this topology.
func (t Topology) validateBackend() error {
	for n := 1; n <= t.Policy.Retries(); n++ {
		if d := t.Policy.Delay(n); d > MaxDelay {
			return fmt.Errorf("%w: retry %d waits %s, but the longest wait any delay backend expresses is %s (2^32-1 ms)",
				ErrDelayTooLong, n, d, MaxDelay)
		}
	}
	switch t.Backend {
	case Levels:
		for _, d := range t.waitDestinations() {
			if len(d)+2*levelCount > 255 || strings.ContainsAny(d, "*#") {
				return fmt.Errorf("queue %q: the levels backend routes on its name, which must be at most %d bytes without * or #", d, 255-2*levelCount)
			}
		}
	case Native:
		if t.QueueType != Quorum {
			return errors.New("the native delay backend is RabbitMQ 4.3's delayed retry for quorum queues: set the queue type to quorum")
		}
		first, last := t.Policy.Delay(1), t.Policy.Delay(t.Policy.Retries())
		for n := 1; n <= t.Policy.Retries(); n++ {
			if want := min(first*time.Duration(n), last); t.Policy.Delay(n) != want {
				return fmt.Errorf("%w: the native backend waits min(first × attempt, last), here %s, but the schedule is %s",
					ErrNotLinear, linear(first, last, t.Policy.Retries()), t.Policy)
			}
		}
	}
	return nil
}

// linear writes the schedule the native backend would wait.
func linear(first, last time.Duration, n int) string {
	parts := make([]string, n)
	for i := range n {
		parts[i] = min(first*time.Duration(i+1), last).String()
	}
	return strings.Join(parts, ",")
}

// ErrBrokerTooOld means the configured backend needs a newer RabbitMQ
// than the broker's.
var ErrBrokerTooOld = errors.New("broker too old for the delay backend")

// ErrNoPlugin is returned when the Plugin backend is asked for and the
// broker has no delayed-message plugin. Reconnecting cannot fix it.
var ErrNoPlugin = errors.New("no delayed-message plugin on the broker")

// ErrDelayTooLong means a schedule asks for a wait no backend expresses.
var ErrDelayTooLong = errors.New("delay too long")

// ErrNotLinear means a schedule the native backend cannot follow.
var ErrNotLinear = errors.New("schedule not linear")

// schedule publishes d, with headers h, to wait delay and then go to dest
// (requeue-queue, or with a direct hand-off a work queue), and waits for
// the broker's confirm. It returns the wait it scheduled: the TTL backend
// rounds up to a step, or waits its longest step and marks the rest in
// HeaderNotBefore.
func (t Topology) schedule(ctx context.Context, hop *Hop, d *amqp.Delivery, h amqp.Table, dest string, delay time.Duration, now time.Time) (time.Duration, error) {
	delay = min(max(delay, 0), MaxDelay)
	switch t.Backend {
	case Plugin:
		h[HeaderDelay] = clampDelay(delay)
		// The delayed exchange routes only once the delay is over: with
		// mandatory, it returns every message as unroutable (312 NO_ROUTE)
		// at publish time and still delivers it later, so relay never
		// sets mandatory here.
		return delay, hop.Publish(ctx, t.Name(WaitExchange), t.waitKey(dest), false, Republish(d, h))
	case Levels:
		exchange, key := t.levelRoute(delay, dest)
		return delay.Truncate(time.Millisecond), hop.Publish(ctx, exchange, key, true /* mandatory */, Republish(d, h))
	case TTL:
		wait := step(t.Policy.Steps(), delay)
		delete(h, HeaderNotBefore)
		if delay > wait {
			h[HeaderNotBefore] = now.Add(delay).UnixMilli()
		}
		queue, key := t.WaitQueue(wait), StepName(wait)
		if !t.requeues() {
			queue = t.directWaitQueue(wait, dest)
			key = queue
		}
		err := hop.Publish(ctx, t.Name(WaitExchange), key, true /* mandatory */, Republish(d, h))
		if errors.Is(err, ErrUnroutable) {
			// The wait queue was deleted while relay runs: declare the
			// topology again, once, rather than loop on unroutables.
			if derr := t.Plan().Declare(ctx, hop.conn); derr != nil {
				return wait, fmt.Errorf("%w: %s: %w", errWaitQueueMissing, queue, derr)
			}
			err = hop.Publish(ctx, t.Name(WaitExchange), key, true /* mandatory */, Republish(d, h))
			if errors.Is(err, ErrUnroutable) {
				err = fmt.Errorf("%w: %s is still not bound to %s", errWaitQueueMissing, queue, t.Name(WaitExchange))
			}
		}
		return wait, err
	}
	return 0, fmt.Errorf("the %s backend does not schedule waits itself", t.Backend)
}

// levelRoute is where a message that waits delay and then goes to dest
// enters the levels: the exchange of its delay's highest set bit, with a
// routing key of one word per level, "1" where the delay's bit is set,
// then dest. Lower levels with a 0 pass it on at once; a delay of 0 goes
// straight to the deliver exchange.
func (t Topology) levelRoute(delay time.Duration, dest string) (exchange, key string) {
	ms := uint64(min(max(delay.Milliseconds(), 0), 1<<32-1))
	var b strings.Builder
	b.Grow(2*levelCount + len(dest))
	top := -1
	for k := levelCount - 1; k >= 0; k-- {
		if ms&(1<<k) != 0 {
			b.WriteString("1.")
			if top < 0 {
				top = k
			}
		} else {
			b.WriteString("0.")
		}
	}
	b.WriteString(dest)
	if top < 0 {
		return t.deliverExchange(), b.String()
	}
	return t.levelExchange(top), b.String()
}

// Choose resolves Auto for topology t against the broker at url, and says
// why: Native on RabbitMQ 4.3 or later when t has quorum queues and a
// schedule the broker can follow (linear, see Native); else Plugin when the
// broker has the x-delayed-message exchange type; else Levels, which any
// broker runs. Any other backend is returned as it is.
func Choose(url string, t Topology) (Backend, string, error) {
	if t.Backend == Plugin {
		// Without the plugin, declaring wait-exchange fails on every
		// connection: say so once rather than reconnect forever.
		plugin, err := HasPlugin(url)
		if err != nil {
			return "", "", err
		}
		if !plugin {
			return "", "", fmt.Errorf("%w: DELAY_BACKEND is plugin, but the broker has no x-delayed-message exchange type (the delayed-message plugin is not enabled; RabbitMQ 4.3 cannot run it): enable it, or choose levels, ttl or auto", ErrNoPlugin)
		}
		return Plugin, "chosen by the configuration; the broker has the delayed-message plugin", nil
	}
	if t.Backend != Auto && t.Backend != Native {
		return t.Backend, "chosen by the configuration", nil
	}
	conn, err := Dial(url, "relay probe")
	if err != nil {
		return "", "", err
	}
	version, _ := conn.Properties["version"].(string)
	conn.Close()
	if t.Backend == Native {
		// The broker accepts the delayed-retry arguments before 4.3 and
		// ignores them: without this check, every retry would come at once.
		if !VersionAtLeast(version, 4, 3) {
			return "", "", fmt.Errorf("%w: the native delay backend needs RabbitMQ 4.3 or later, and the broker is RabbitMQ %s: choose levels, ttl or auto", ErrBrokerTooOld, version)
		}
		return Native, "chosen by the configuration, on RabbitMQ " + version, nil
	}
	if t.QueueType == Quorum && VersionAtLeast(version, 4, 3) {
		n := t
		n.Backend = Native
		err := n.validateBackend()
		if err == nil {
			return Native, "RabbitMQ " + version + " with quorum queues: the broker's own delayed retry", nil
		}
		why := fmt.Sprintf("RabbitMQ %s could retry natively, but %v", version, err)
		if plugin, err := HasPlugin(url); err == nil && plugin {
			return Plugin, why + "; the delayed-message plugin is there", nil
		}
		return Levels, why + "; binary delay levels instead", nil
	}
	plugin, err := HasPlugin(url)
	if err != nil {
		return "", "", err
	}
	if plugin {
		return Plugin, "RabbitMQ " + version + " with the delayed-message plugin", nil
	}
	return Levels, "no delayed-message plugin on RabbitMQ " + version + ": binary delay levels", nil
}

// VersionAtLeast reports whether a RabbitMQ version, as a connection's
// "version" property gives it ("3.10.8", "4.3.0"), is major.minor or
// later; false for a version it cannot read.
func VersionAtLeast(version string, major, minor int) bool {
	var ma, mi int
	if _, err := fmt.Sscanf(version, "%d.%d", &ma, &mi); err != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}
