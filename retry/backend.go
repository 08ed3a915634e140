package retry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Backend names how the pipeline makes a message wait before its next
// attempt. Each backend is one type behind the delayer interface
// (backend_*.go); a Topology reaches it through its Backend, once
// resolved, and nothing else in the package switches on the name.
type Backend string

// The delay backends.
const (
	// Plugin waits in an x-delayed-message exchange, from the
	// rabbitmq_delayed_message_exchange plugin: any delay, per message, on
	// one node, RabbitMQ 4.2 at most.
	Plugin Backend = "plugin"
	// TTL waits in one queue per delay step whose x-message-ttl expires
	// the message on: the policy's own delays in queues an operator can
	// see, one per step. Any other wait (a downstream's Retry-After, a
	// rate-limit slot, a jittered delay, a scheduled send) waits exactly,
	// in the binary delay levels Levels uses, which TTL declares too.
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
	// delay), and is dead-lettered past the delivery limit. A wait the
	// broker's schedule cannot express (a Retry-After, a rate-limit slot,
	// a scheduled send) waits exactly in the binary delay levels, which
	// Native declares too.
	Native Backend = "native"
	// Auto picks, against the broker: Native on RabbitMQ 4.3 or later with
	// quorum queues and a schedule it can express, else Plugin where the
	// broker has it, else Levels.
	Auto Backend = "auto"
)

// Backends lists the delay backends a topology can be declared with, in
// the order the docs present them.
func Backends() []Backend { return []Backend{Plugin, TTL, Levels, Native} }

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

// Features is what a delay backend promises. The conformance suite
// (TestConformance) asserts every promise a backend makes, on every
// queue type and hand-off it allows, and Topology.Validate refuses a
// setting that needs a promise the backend does not make, naming the
// setting: nothing is silently degraded. docs/retries.md's table of
// backends is written from these declarations.
type Features struct {
	// Backend is the backend these are the features of.
	Backend Backend
	// How says in a few words how a message waits.
	How string
	// ExactDelays: every wait ends when asked, to the millisecond; false
	// when the policy's delays are rounded up to the nearest step (a wait
	// is never shorter than asked either way).
	ExactDelays bool
	// Tolerance is how late a wait may end, as the conformance suite
	// holds a backend to it on a busy two-core CI machine (an idle broker
	// is late by tens of milliseconds: docs/benchmarks.md); a wait never
	// ends early.
	Tolerance time.Duration
	// AnySchedule: any list of delays or exponential backoff; false when
	// only some shapes can be followed (Native: linear, min(first ×
	// attempt, last)).
	AnySchedule bool
	// Jitter: Policy.Jitter spreads each delay.
	Jitter bool
	// Types: each message follows its type's policy (Topology.Types), so
	// one topology carries several schedules; false when the schedule is
	// the queues' own and the same for every message (Native).
	Types bool
	// Deferrals: a wait a downstream asked for (Retry-After) or a slot a
	// rate limit gave waits exactly that long and spends no retry, so the
	// copy comes back for its slot and keeps it.
	Deferrals bool
	// FirstDelivery: a first delivery can wait too (a scheduled send).
	FirstDelivery bool
	// Cluster: every waiting message sits in an ordinary queue of the
	// queue type chosen, so a cluster replicates it.
	Cluster bool
	// QueueTypes are the queue types it runs with, and QueueTypesWhy, if
	// set, why not with the others (Validate says it).
	QueueTypes    []QueueType
	QueueTypesWhy string
	// Handoffs are the hand-offs it runs with.
	Handoffs []Handoff
	// MinVersion and MaxVersion bound the RabbitMQ versions it runs on
	// ("4.3"; empty: no bound).
	MinVersion, MaxVersion string
	// Needs names what the broker must have besides itself, if anything.
	Needs string
}

// Durable is the queue type that keeps most of what the backend holds:
// Quorum where the backend runs with it, else Classic.
func (f Features) Durable() QueueType {
	if slices.Contains(f.QueueTypes, Quorum) {
		return Quorum
	}
	return Classic
}

// Supports reports whether the backend runs with queue type q and
// hand-off h.
func (f Features) Supports(q QueueType, h Handoff) bool {
	if q == "" {
		q = Classic
	}
	okQ, okH := false, false
	for _, x := range f.QueueTypes {
		okQ = okQ || x == q
	}
	for _, x := range f.Handoffs {
		okH = okH || x == h
	}
	return okQ && okH
}

// RunsOn reports whether the backend runs on RabbitMQ version (as a
// connection's "version" property gives it).
func (f Features) RunsOn(version string) bool {
	var ma, mi int
	if f.MinVersion != "" {
		fmt.Sscanf(f.MinVersion, "%d.%d", &ma, &mi)
		if !VersionAtLeast(version, ma, mi) {
			return false
		}
	}
	if f.MaxVersion != "" {
		fmt.Sscanf(f.MaxVersion, "%d.%d", &ma, &mi)
		if VersionAtLeast(version, ma, mi+1) {
			return false
		}
	}
	return true
}

// Versions says which RabbitMQ versions the backend runs on: "any",
// "4.3 or later", "4.2 or earlier".
func (f Features) Versions() string {
	switch {
	case f.MinVersion != "" && f.MaxVersion != "":
		return f.MinVersion + " to " + f.MaxVersion
	case f.MinVersion != "":
		return f.MinVersion + " or later"
	case f.MaxVersion != "":
		return f.MaxVersion + " or earlier"
	}
	return "any"
}

// waitRoute is where a message is published to wait and then reach its
// destination.
type waitRoute struct {
	exchange, key string
	// mandatory is false only for the delayed-message plugin, which
	// returns every message published to it with mandatory.
	mandatory bool
	// headers are added to the message's (the plugin's x-delay).
	headers amqp.Table
	// wait is how long it will wait: the delay asked for, to the
	// millisecond, or a TTL step at or above it.
	wait time.Duration
}

// delayer is one delay backend: what it declares, where a message goes
// to wait, and what it promises. Each implementation is one type; a
// topology finds its own with Topology.delayer.
type delayer interface {
	features() Features
	// validate reports what the backend cannot do with the topology,
	// naming the setting at fault.
	validate(t Topology) error
	// declare adds the backend's exchanges, queues and bindings to p, and
	// its arguments to the work queues' (args holds each queue's).
	declare(t Topology, p *Plan)
	// route says where a message that must wait delay (0 to MaxDelay)
	// and then reach dest is published.
	route(t Topology, dest string, delay time.Duration) waitRoute
}

// rejecter is a backend whose work queues wait themselves: a failure is
// rejected back into its queue, and the broker delays its redelivery
// (Native). It says whether a reject waits what the decision wants; when
// it does not, the consumer publishes the message to wait instead.
type rejecter interface {
	// rejects reports whether rejecting a message that the broker has
	// seen rejected deliveries times since it was last published makes it
	// wait delay before its next delivery.
	rejects(t Topology, deliveries int, delay time.Duration) bool
}

// delayerOf returns the backend named b: the one place a name becomes a
// type.
func delayerOf(b Backend) (delayer, error) {
	switch b {
	case Plugin:
		return pluginBackend{}, nil
	case TTL:
		return ttlBackend{}, nil
	case Levels:
		return levelsBackend{}, nil
	case Native:
		return nativeBackend{}, nil
	case Auto:
		return nil, errors.New("delay backend auto must be resolved against the broker (retry.Resolve) before declaring")
	}
	return nil, fmt.Errorf("delay backend %q: want plugin, ttl, levels or native", b)
}

// FeaturesOf returns what backend b promises; an error for Auto or a
// name that is no backend.
func FeaturesOf(b Backend) (Features, error) {
	d, err := delayerOf(b)
	if err != nil {
		return Features{}, err
	}
	return d.features(), nil
}

// delayer returns the topology's backend. An unresolved or unknown name
// (which Validate refuses) gets the levels backend, which runs anywhere,
// so a Plan can still be drawn.
func (t Topology) delayer() delayer {
	d, err := delayerOf(t.Backend)
	if err != nil {
		return levelsBackend{}
	}
	return d
}

// Features returns what the topology's backend promises.
func (t Topology) Features() Features { return t.delayer().features() }

// waitsInQueue reports whether the work queues themselves wait a failed
// message (Native): there is no requeue-queue, and no error stage retries.
func (t Topology) waitsInQueue() bool {
	_, ok := t.delayer().(rejecter)
	return ok
}

// requeues reports whether the topology has requeue-queue and its stage.
func (t Topology) requeues() bool { return t.Handoff == ViaStages && !t.waitsInQueue() }

// HasRequeueStage reports whether the topology has requeue-queue, and so
// needs the requeue stage: with the stages hand-off, on every backend but
// Native.
func (t Topology) HasRequeueStage() bool { return t.requeues() }

// WaitsInQueue reports whether a failed message waits in its own work
// queue (Native), rather than going through the retry stages or a wait
// the worker publishes it to.
func (t Topology) WaitsInQueue() bool { return t.waitsInQueue() }

// waitDestinations are the queues a wait ends in: requeue-queue with the
// stages, each work queue with a direct hand-off or a backend whose work
// queues wait themselves.
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

// validateBackend reports what the backend cannot do with this topology.
func (t Topology) validateBackend() error {
	d, err := delayerOf(t.Backend)
	if err != nil {
		return err
	}
	for _, p := range t.policies() {
		for n := 1; n <= p.Retries(); n++ {
			if w := p.Delay(n); w > MaxDelay {
				return fmt.Errorf("%w: retry %d waits %s, but the longest wait any delay backend expresses is %s (2^32-1 ms)",
					ErrDelayTooLong, n, w, MaxDelay)
			}
		}
	}
	f := d.features()
	if len(t.Types) > 0 && !f.Types {
		return fmt.Errorf("%w: %d message types have schedules of their own, but the %s delay backend waits one schedule, the work queues' own, for every message: choose levels, plugin or ttl", ErrUnsupported, len(t.Types), t.Backend)
	}
	if !f.Supports(t.QueueType, t.Handoff) {
		if !f.Supports(t.QueueType, ViaStages) && !f.Supports(t.QueueType, Direct) {
			why := ""
			if f.QueueTypesWhy != "" {
				why = ": " + f.QueueTypesWhy
			}
			return fmt.Errorf("%w: the %s delay backend runs with %s queues, not %s%s", ErrUnsupported, t.Backend, queueTypes(f.QueueTypes), orClassic(t.QueueType), why)
		}
		return fmt.Errorf("%w: the %s delay backend does not run with the %s hand-off", ErrUnsupported, t.Backend, t.Handoff)
	}
	for _, p := range t.policies() {
		if p.Jitter > 0 && !f.Jitter {
			return fmt.Errorf("%w: jitter %g is set, but the %s delay backend waits its own schedule and cannot spread it: set no jitter, or choose levels, plugin or ttl", ErrUnsupported, p.Jitter, t.Backend)
		}
	}
	return d.validate(t)
}

func queueTypes(qs []QueueType) string {
	parts := make([]string, len(qs))
	for i, q := range qs {
		parts[i] = string(q)
	}
	return strings.Join(parts, " or ")
}

func orClassic(q QueueType) string {
	if q == "" {
		return string(Classic)
	}
	return string(q)
}

// String names the hand-off as RETRY_HANDOFF spells it: stages or direct.
func (h Handoff) String() string {
	if h == ViaStages {
		return "stages"
	}
	return string(h)
}

// ErrUnsupported means a setting the topology's delay backend cannot
// keep: the message names the setting and the backend.
var ErrUnsupported = errors.New("not supported by the delay backend")

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
// the broker's confirm. It returns the wait it scheduled: the delay, or
// for the TTL backend's own steps the step.
func (t Topology) schedule(ctx context.Context, hop *Hop, d *amqp.Delivery, h amqp.Table, dest string, delay time.Duration, now time.Time) (time.Duration, error) {
	delay = min(max(delay, 0), MaxDelay)
	r := t.delayer().route(t, dest, delay)
	h[HeaderReadyAt] = now.Add(r.wait).UnixMilli()
	for k, v := range r.headers {
		h[k] = v
	}
	err := hop.Publish(ctx, r.exchange, r.key, r.mandatory, Republish(d, h))
	if errors.Is(err, ErrUnroutable) {
		// A wait queue or binding was deleted while relay runs: declare
		// the topology again, once, rather than loop on unroutables.
		if derr := t.Plan().Declare(ctx, hop.conn); derr != nil {
			return r.wait, fmt.Errorf("%w: %s: %w", errWaitQueueMissing, r.exchange, derr)
		}
		err = hop.Publish(ctx, r.exchange, r.key, r.mandatory, Republish(d, h))
		if errors.Is(err, ErrUnroutable) {
			err = fmt.Errorf("%w: %s routes %q nowhere", errWaitQueueMissing, r.exchange, r.key)
		}
	}
	return r.wait, err
}

// Choose resolves Auto for topology t against the broker at url, and says
// why: Native on RabbitMQ 4.3 or later when t has quorum queues and a
// schedule the broker can follow (linear, see Native); else, with classic
// queues, Plugin when the broker has the x-delayed-message exchange type;
// else Levels, which any broker runs. Any other backend is returned as it
// is.
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
		return Levels, fmt.Sprintf("RabbitMQ %s could retry natively, but %v; binary delay levels instead", version, err), nil
	}
	if t.QueueType == Quorum {
		// The plugin runs with classic queues only (its waits would not
		// be as safe as the queues).
		return Levels, "quorum queues on RabbitMQ " + version + ": binary delay levels, quorum queues too", nil
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
