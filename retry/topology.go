package retry

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// QueueType is the RabbitMQ queue type relay declares its queues with.
type QueueType string

// The queue types. Quorum queues are replicated and, with the at-least-once
// dead-letter strategy, never lose a message between a queue and its
// dead-letter target; classic queues are the broker's default.
const (
	Classic QueueType = "classic"
	Quorum  QueueType = "quorum"
)

// Default names, as the pipeline's diagram shows them.
const (
	DefaultExchange = "notification-exchange"
	ErrorExchange   = "error-exchange"
	ErrorQueue      = "error-queue"
	WaitExchange    = "wait-exchange"
	RequeueQueue    = "requeue-queue"
	DeadExchange    = "dead-letter-exchange"
	DeadQueue       = "dead-letter-queue"
	// requeueKey routes from the delayed exchange to requeue-queue.
	requeueKey = "requeue"
)

// Route is a work queue and the routing key that binds it to the ingress
// exchange.
type Route struct {
	Queue string
	Key   string
	// Lanes spreads the route's messages over this many queues, each
	// consumed on its own, so that one receiver's backlog waits in its
	// lane and not in front of everyone else's: lane 0 is Queue bound
	// with Key, lane n (1 and up) is Queue.lane-n bound with Key.lane-n.
	// A producer picks a message's lane with Topology.Lane, by a key such
	// as the receiver it goes to, so one receiver's messages keep to one
	// lane, and a retry goes back to the lane it came from. 0 or 1 means
	// one queue, the route's own; at most MaxLanes.
	Lanes int
	// Lane is which lane of its route a work queue is, in WorkRoutes: 0
	// for the route's own queue.
	Lane int
}

// MaxLanes is the most lanes a route may have.
const MaxLanes = 64

// laneSuffix is what a lane's queue and routing key add to the route's.
func laneSuffix(n int) string { return fmt.Sprintf(".lane-%d", n) }

// Topology names and shapes everything the pipeline needs on the broker.
// Its zero value, with a Backend chosen, is relay's default topology.
type Topology struct {
	// Prefix namespaces every exchange and queue (e.g. "test-42."), so
	// tests and workshop runs share one broker without meeting.
	Prefix string
	// Exchange is the ingress exchange; empty means DefaultExchange.
	Exchange string
	// Routes are the work queues and their routing keys. A process that
	// runs only the stages lists them too: they are the only queues the
	// stages send a message back to.
	Routes []Route
	// QueueType is Classic (the zero value) or Quorum. Use Quorum in
	// production: the broker's own dead-lettering is at-least-once then.
	QueueType QueueType
	// Backend is how failed messages wait: Plugin, TTL, Levels or Native;
	// resolve Auto with Resolve (Pipeline.Run does) before declaring.
	Backend Backend
	// Handoff is how a failure reaches its wait: ViaStages (the zero value,
	// the article's topology) or Direct (each worker schedules its retries:
	// one broker hop less).
	Handoff Handoff
	// Policy is the schedule: the delays, how many retries, the deadline.
	// It is the schedule of a message of no type, or of a type Types does
	// not list.
	Policy Policy
	// Types are the schedules of the message types, by name: a message
	// whose TypeHeader names one is retried, deferred and parked by its
	// type's policy instead of Policy. Empty means one schedule for all.
	Types map[string]Policy
	// TypeHeader names the header that carries a message's type, such as
	// "x-relay-type". It is the producer's, like CopyHeader: the pipeline
	// carries it unchanged. Empty means messages have no type.
	TypeHeader string
	// CopyHeader names the header, if any, that tells apart the copies of
	// one message: a producer that sends one message several times, with
	// one message id to one queue, each copy for another party, says
	// which copy is which in it (relay's API sends an email as a copy per
	// recipient). Each copy is retried and parked on its own; the header's
	// value (see Copy) is reported as Event.Copy and DeadLetter.Copy, and
	// Filter.Copy selects by it. It is the producer's, like the message
	// id: the pipeline carries it unchanged. Empty means messages have no
	// copies.
	CopyHeader string
	// TenantHeader names the header, if any, that says whose a message
	// is: a producer that serves several tenants (relay's API does) names
	// the message's tenant in it, and its value (see Tenant) is reported
	// as Event.Tenant, so that an observer shows each tenant only its own
	// messages. It is the producer's, like CopyHeader: the pipeline
	// carries it unchanged. Empty means messages name no tenant.
	TenantHeader string
}

// PolicyOf is the policy of a message with headers h: its type's, when
// TypeHeader names one that Types lists, else Policy.
func (t Topology) PolicyOf(h amqp.Table) Policy {
	if t.TypeHeader == "" || len(t.Types) == 0 {
		return t.Policy
	}
	if p, ok := t.Types[headerString(h, t.TypeHeader)]; ok {
		return p
	}
	return t.Policy
}

// policies are Policy and every type's, Policy first, then the types in
// name order: what the backend must be able to wait.
func (t Topology) policies() []Policy {
	out := []Policy{t.Policy}
	for _, name := range slices.Sorted(maps.Keys(t.Types)) {
		out = append(out, t.Types[name])
	}
	return out
}

// steps are the distinct delays of every policy, ascending: the wait
// queues the TTL backend declares.
func (t Topology) steps() []time.Duration {
	var steps []time.Duration
	for _, p := range t.policies() {
		for _, s := range p.Steps() {
			if !slices.Contains(steps, s) {
				steps = append(steps, s)
			}
		}
	}
	slices.Sort(steps)
	return steps
}

// Name returns base with the topology's prefix.
func (t Topology) Name(base string) string { return t.Prefix + base }

// Ingress is the prefixed ingress exchange.
func (t Topology) Ingress() string {
	if t.Exchange == "" {
		return t.Name(DefaultExchange)
	}
	return t.Name(t.Exchange)
}

// WorkRoutes are the prefixed work queues and their routing keys: a
// route's own queue, then its other lanes, if it has more than one.
func (t Topology) WorkRoutes() []Route {
	out := make([]Route, 0, len(t.Routes))
	for _, r := range t.Routes {
		lanes := max(r.Lanes, 1)
		out = append(out, Route{Queue: t.Name(r.Queue), Key: r.Key, Lanes: lanes})
		for n := 1; n < lanes; n++ {
			out = append(out, Route{Queue: t.Name(r.Queue) + laneSuffix(n), Key: r.Key + laneSuffix(n), Lanes: lanes, Lane: n})
		}
	}
	return out
}

// Lane is the work queue and routing key, prefixed, of the lane a message
// published with routing key key goes to, picked by by: the same by
// always picks the same lane (an FNV-1a hash of it, modulo the route's
// lanes). A route of one lane, or a key no route has, is returned as it
// is, the key unchanged and the queue empty for an unknown key.
func (t Topology) Lane(key, by string) Route {
	for _, r := range t.Routes {
		if r.Key != key {
			continue
		}
		lanes := max(r.Lanes, 1)
		n := 0
		if lanes > 1 {
			h := fnv.New32a()
			_, _ = h.Write([]byte(by))
			n = int(h.Sum32() % uint32(lanes))
		}
		if n == 0 {
			return Route{Queue: t.Name(r.Queue), Key: r.Key, Lanes: lanes}
		}
		return Route{Queue: t.Name(r.Queue) + laneSuffix(n), Key: r.Key + laneSuffix(n), Lanes: lanes, Lane: n}
	}
	return Route{Key: key}
}

// LanesOf is how many lanes the route with routing key key has: 1 for a
// route of one queue, 0 for a key no route has.
func (t Topology) LanesOf(key string) int {
	for _, r := range t.Routes {
		if r.Key == key {
			return max(r.Lanes, 1)
		}
	}
	return 0
}

// StrayLanes are the queues, prefixed, of the first lane past each
// route's last that exist on the broker: a process that spreads a route
// over more lanes than this topology publishes to lanes that nobody
// consuming with this topology reads (or did, before the lanes were cut).
func (t Topology) StrayLanes(conn *amqp.Connection) []string {
	var out []string
	for _, r := range t.Routes {
		q := t.Name(r.Queue) + laneSuffix(max(r.Lanes, 1))
		ch, err := conn.Channel()
		if err != nil {
			return out
		}
		// A queue that does not exist closes the channel: one each.
		if _, err := ch.QueueDeclarePassive(q, true, false, false, false, nil); err == nil {
			out = append(out, q)
		}
		_ = ch.Close()
	}
	return out
}

// warnStrayLanes logs StrayLanes, each with the fix.
func (t Topology) warnStrayLanes(conn *amqp.Connection, log *slog.Logger) {
	for _, q := range t.StrayLanes(conn) {
		route, _ := t.RouteOf(strings.TrimSuffix(q, q[strings.LastIndex(q, ".lane-"):]))
		log.Error("a lane queue past this process's lanes exists: copies there wait for a consumer with more lanes",
			"queue", q, "lanes", max(route.Lanes, 1),
			"fix", "give every process of the deployment the same WORK_LANES; after cutting the lanes, move what the queue holds back with a shovel, then delete it")
	}
}

// RouteOf is the route, as Routes lists it (unprefixed, lanes not
// spread), whose lane work queue q (prefixed) is; false for a queue that
// is not a work queue.
func (t Topology) RouteOf(q string) (Route, bool) {
	for _, r := range t.Routes {
		own := t.Name(r.Queue)
		if q == own {
			return r, true
		}
		for n := 1; n < r.Lanes; n++ {
			if q == own+laneSuffix(n) {
				return r, true
			}
		}
	}
	return Route{}, false
}

// Destination reports whether q (prefixed) is one of the topology's work
// queues: the only queues the stages and replay ever publish a message to.
// relay's own queues (error-queue, requeue-queue, the wait queues,
// dead-letter-queue) are not destinations, whatever a message claims, so
// no header can send a message into another application's queue or round
// a loop inside the pipeline.
func (t Topology) Destination(q string) bool {
	if q == "" {
		return false
	}
	for _, r := range t.WorkRoutes() {
		if r.Queue == q {
			return true
		}
	}
	return false
}

// WaitQueue is the TTL backend's queue for one delay step.
func (t Topology) WaitQueue(step time.Duration) string {
	return t.Name("wait." + StepName(step))
}

// StepName writes a delay the way a wait queue is named: 500ms, 5s, 1m, 2h.
func StepName(d time.Duration) string {
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d >= time.Minute && d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d >= time.Second && d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	default:
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
}

// Exchange is one exchange of a Plan.
type Exchange struct {
	Name string
	Kind string
	Args amqp.Table
}

// Queue is one queue of a Plan.
type Queue struct {
	Name string
	Args amqp.Table
	// Keeps marks a queue with no dead-letter exchange, whose messages
	// exist nowhere else: on a broker that limits a quorum queue's
	// deliveries by default, Declare lifts the limit (see DeliveryLimit).
	Keeps bool
}

// Binding binds Queue, or the exchange ToExchange, to Exchange with Key
// (and Args for headers exchanges).
type Binding struct {
	Exchange   string
	Queue      string
	ToExchange string
	Key        string
	Args       amqp.Table
}

// to is what the binding routes to: its queue or its exchange.
func (b Binding) to() string {
	if b.ToExchange != "" {
		return b.ToExchange
	}
	return b.Queue
}

// Plan is the full declaration of a topology: what Declare creates, what
// Delete removes, what the topology command prints and draws.
type Plan struct {
	Exchanges []Exchange
	Queues    []Queue
	Bindings  []Binding
	// Moves are the republishes relay's own consumers make: not broker
	// objects, but drawn so the diagram shows the whole path.
	Moves []Move
}

// Move is a republish by a consumer of From (a queue) to To (an exchange
// or, through the default exchange, a queue).
type Move struct {
	From, To, Label string
}

// queueArgs are the arguments every queue of the given type shares. A
// quorum queue that dead-letters uses the at-least-once strategy, which
// needs reject-publish overflow: the source keeps the message until its
// dead-letter target has confirmed it.
func (t Topology) queueArgs(deadLetters bool) amqp.Table {
	args := amqp.Table{}
	if t.QueueType == Quorum {
		args["x-queue-type"] = string(Quorum)
		if deadLetters {
			args["x-dead-letter-strategy"] = "at-least-once"
			args["x-overflow"] = "reject-publish"
		}
	}
	return args
}

// Plan lists the exchanges, queues and bindings of the topology.
func (t Topology) Plan() Plan {
	var p Plan
	ingress := t.Ingress()
	p.Exchanges = append(p.Exchanges,
		Exchange{Name: ingress, Kind: amqp.ExchangeDirect},
		Exchange{Name: t.Name(ErrorExchange), Kind: amqp.ExchangeFanout},
	)
	for _, r := range t.WorkRoutes() {
		args := t.queueArgs(true)
		args["x-dead-letter-exchange"] = t.Name(ErrorExchange)
		p.Queues = append(p.Queues, Queue{Name: r.Queue, Args: args})
		p.Bindings = append(p.Bindings, Binding{Exchange: ingress, Queue: r.Queue, Key: r.Key})
	}
	p.Queues = append(p.Queues, Queue{Name: t.Name(ErrorQueue), Args: t.queueArgs(false), Keeps: true})
	p.Bindings = append(p.Bindings, Binding{Exchange: t.Name(ErrorExchange), Queue: t.Name(ErrorQueue)})
	if t.requeues() {
		p.Queues = append(p.Queues, Queue{Name: t.Name(RequeueQueue), Args: t.queueArgs(false), Keeps: true})
	}
	t.delayer().declare(t, &p)
	p.Exchanges = append(p.Exchanges, Exchange{Name: t.Name(DeadExchange), Kind: amqp.ExchangeHeaders})
	p.Queues = append(p.Queues, Queue{Name: t.Name(DeadQueue), Args: t.queueArgs(false), Keeps: true})
	// x-match all with no other arguments matches every message: the
	// catch-all park. Users add their own bindings on x-dead-source.
	p.Bindings = append(p.Bindings, Binding{Exchange: t.Name(DeadExchange), Queue: t.Name(DeadQueue),
		Args: amqp.Table{"x-match": "all"}})

	// Where a wait starts, in drawings: the exchange a retry of the
	// first delay is published to.
	wait := t.Name(WaitExchange)
	if dests := t.waitDestinations(); len(dests) > 0 {
		wait = t.delayer().route(t, dests[0], t.Policy.Delay(1)).exchange
	}
	if strings.HasPrefix(wait, t.Name("wait.level.")) {
		wait = t.levelExchange(levelCount - 1)
	}
	if t.waitsInQueue() {
		for _, r := range t.WorkRoutes() {
			p.Moves = append(p.Moves,
				Move{From: r.Queue, To: r.Queue, Label: "reject requeue=true: the broker waits"},
				Move{From: r.Queue, To: t.levelExchange(levelCount - 1), Label: "a deferral: wait exactly"},
				Move{From: r.Queue, To: t.Name(DeadExchange), Label: "permanent"})
		}
		p.Moves = append(p.Moves, Move{From: t.Name(ErrorQueue), To: t.Name(DeadExchange), Label: "error stage: park"})
		return p
	}
	p.Moves = append(p.Moves,
		Move{From: t.Name(ErrorQueue), To: wait, Label: t.errorStageLabel()},
		Move{From: t.Name(ErrorQueue), To: t.Name(DeadExchange), Label: "error stage: park"},
	)
	for _, r := range t.WorkRoutes() {
		if t.requeues() {
			p.Moves = append(p.Moves,
				Move{From: t.Name(RequeueQueue), To: r.Queue, Label: "requeue stage"},
				Move{From: r.Queue, To: t.Name(DeadExchange), Label: "permanent"})
			continue
		}
		p.Moves = append(p.Moves,
			Move{From: r.Queue, To: wait, Label: "failure: wait"},
			Move{From: r.Queue, To: t.Name(DeadExchange), Label: "permanent or last retry"})
	}
	return p
}

// errorStageLabel names the error stage's retry in drawings: with a direct
// hand-off it only serves a worker's fallback nack.
func (t Topology) errorStageLabel() string {
	if t.requeues() {
		return "error stage: retry"
	}
	return "error stage: retry a worker's fallback"
}

// Validate reports a topology that cannot be declared.
func (t Topology) Validate() error {
	switch t.QueueType {
	case "", Classic, Quorum:
	default:
		return fmt.Errorf("queue type %q: want classic or quorum", t.QueueType)
	}
	if _, err := delayerOf(t.Backend); err != nil {
		return err
	}
	switch t.Handoff {
	case ViaStages, Direct:
	default:
		return fmt.Errorf("hand-off %q: want stages or direct", t.Handoff)
	}
	if err := t.Policy.Validate(); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(t.Types)) {
		if name == "" {
			return fmt.Errorf("a message type needs a name")
		}
		if err := t.Types[name].Validate(); err != nil {
			return fmt.Errorf("type %q: %w", name, err)
		}
	}
	if len(t.Types) > 0 && t.TypeHeader == "" {
		return fmt.Errorf("per-type policies need a TypeHeader to read a message's type from")
	}
	if err := t.validateBackend(); err != nil {
		return err
	}
	for _, r := range t.Routes {
		if r.Lanes < 0 || r.Lanes > MaxLanes {
			return fmt.Errorf("route %q: %d lanes: want 1 to %d (0 for 1)", r.Queue, r.Lanes, MaxLanes)
		}
	}
	seen := map[string]bool{}
	for _, r := range t.WorkRoutes() {
		if r.Queue == t.Prefix || r.Key == "" {
			return fmt.Errorf("route %+v: a work queue needs a name and a routing key", r)
		}
		base := strings.TrimPrefix(r.Queue, t.Prefix)
		if slices.Contains([]string{ErrorQueue, RequeueQueue, DeadQueue}, base) || strings.HasPrefix(base, "wait.") {
			return fmt.Errorf("work queue %q has the name of one of relay's own queues", r.Queue)
		}
		if seen[r.Queue] {
			return fmt.Errorf("work queue %q listed twice", r.Queue)
		}
		seen[r.Queue] = true
	}
	return nil
}

// ErrConflict means an exchange or queue already exists on the broker with
// other arguments than the topology asks for. Reconnecting cannot fix it:
// delete the old entity or change the configuration.
var ErrConflict = errors.New("topology conflicts with what the broker has")

// conflict marks a PRECONDITION_FAILED declare error as ErrConflict.
func conflict(err error) error {
	var aerr *amqp.Error
	if errors.As(err, &aerr) && aerr.Code == amqp.PreconditionFailed {
		return fmt.Errorf("%w: %w", ErrConflict, err)
	}
	return err
}

// BrokerVersion is the RabbitMQ version conn's broker announced, such as
// "4.3.6"; "" when it announced none.
func BrokerVersion(conn *amqp.Connection) string {
	v, _ := conn.Properties["version"].(string)
	return v
}

// DeliveryLimit returns the arguments of a quorum queue whose messages
// exist nowhere else, for a broker of that version. Since RabbitMQ 4.0 a
// quorum queue without x-delivery-limit has a limit of 20: the 21st
// return of a message (a nack with requeue, a consumer's channel closed
// with it unacked, as every dead-letter listing does) drops it when the
// queue has no dead-letter exchange. -1 lifts the limit on 4.0 and later;
// 3.x has no default limit, and reads -1 as "drop at once", so it gets
// args unchanged. So do classic queues and queues with a limit of their
// own.
func DeliveryLimit(version string, args amqp.Table) amqp.Table {
	if args["x-queue-type"] != string(Quorum) || !VersionAtLeast(version, 4, 0) {
		return args
	}
	if _, ok := args["x-delivery-limit"]; ok {
		return args
	}
	out := make(amqp.Table, len(args)+1)
	for k, v := range args {
		out[k] = v
	}
	out["x-delivery-limit"] = int64(-1)
	return out
}

// limitConflict explains a queue the broker holds without the lifted
// delivery limit (declared by an earlier relay, or before an upgrade to
// RabbitMQ 4): what it risks, and how to mend it.
func limitConflict(err error, version string) error {
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "'x-delivery-limit'") {
		return err
	}
	return fmt.Errorf("%w; on RabbitMQ %s a quorum queue without x-delivery-limit drops a message returned 20 times, "+
		"and this queue has no dead-letter exchange to catch it: move its messages elsewhere (a shovel), delete the queue and start relay again to declare it with x-delivery-limit -1", err, version)
}

// Declare creates the topology on the broker. Declaring is idempotent: it
// succeeds when everything already exists with the same arguments, and
// fails with PRECONDITION_FAILED, naming the entity, when something exists
// with different ones (say, a classic queue where a quorum one is wanted).
func (t Topology) Declare(ctx context.Context, conn *amqp.Connection) error {
	if err := t.Validate(); err != nil {
		return err
	}
	return t.Plan().Declare(ctx, conn)
}

// Declare creates every exchange, queue and binding of the plan, durable.
// A conflict with what the broker already has wraps ErrConflict.
func (p Plan) Declare(ctx context.Context, conn *amqp.Connection) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open channel: %w", err)
	}
	defer ch.Close()
	for _, e := range p.Exchanges {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := ch.ExchangeDeclare(e.Name, e.Kind,
			true,  // durable
			false, // autoDelete
			false, // internal
			false, // noWait
			e.Args); err != nil {
			return fmt.Errorf("declare exchange %q (%s): %w", e.Name, e.Kind, conflict(err))
		}
	}
	version := BrokerVersion(conn)
	for _, q := range p.Queues {
		args := q.Args
		if q.Keeps {
			args = DeliveryLimit(version, args)
		}
		if _, err := ch.QueueDeclare(q.Name,
			true,  // durable
			false, // autoDelete
			false, // exclusive
			false, // noWait
			args); err != nil {
			return fmt.Errorf("declare queue %q: %w", q.Name, limitConflict(conflict(err), version))
		}
	}
	for _, b := range p.Bindings {
		if b.ToExchange != "" {
			if err := ch.ExchangeBind(b.ToExchange, b.Key, b.Exchange, false /* noWait */, b.Args); err != nil {
				return fmt.Errorf("bind exchange %q to %q: %w", b.ToExchange, b.Exchange, err)
			}
			continue
		}
		if err := ch.QueueBind(b.Queue, b.Key, b.Exchange, false /* noWait */, b.Args); err != nil {
			return fmt.Errorf("bind queue %q to %q: %w", b.Queue, b.Exchange, err)
		}
	}
	return nil
}

// Delete removes every queue and exchange of the topology, messages and
// all. Tests and workshop runs use it to clean up; it keeps going past
// entities that are already gone and returns the first other error.
func (t Topology) Delete(conn *amqp.Connection) error { return t.Plan().Delete(conn) }

// Delete removes every queue and exchange of the plan, messages and all,
// going on past what is already gone; it returns the first other error.
func (p Plan) Delete(conn *amqp.Connection) error {
	var first error
	for _, q := range p.Queues {
		if err := deleteOne(conn, func(ch *amqp.Channel) error {
			_, err := ch.QueueDelete(q.Name,
				false, // ifUnused: consumers may still be attached
				false, // ifEmpty: messages go with the queue
				false) // noWait
			return err
		}); err != nil && first == nil {
			first = fmt.Errorf("delete queue %q: %w", q.Name, err)
		}
	}
	for _, e := range p.Exchanges {
		if err := deleteOne(conn, func(ch *amqp.Channel) error {
			return ch.ExchangeDelete(e.Name, false /* ifUnused */, false /* noWait */)
		}); err != nil && first == nil {
			first = fmt.Errorf("delete exchange %q: %w", e.Name, err)
		}
	}
	return first
}

// deleteOne runs one deletion on its own channel, since a failed command
// closes the channel it ran on.
func deleteOne(conn *amqp.Connection, del func(*amqp.Channel) error) error {
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	err = del(ch)
	var aerr *amqp.Error
	if errors.As(err, &aerr) && aerr.Code == amqp.NotFound {
		return nil
	}
	return err
}

// Mermaid draws the plan as a Mermaid flowchart.
func (p Plan) Mermaid() string {
	var b strings.Builder
	b.WriteString("flowchart LR\n")
	id := func(name string) string {
		return strings.NewReplacer(".", "_", "-", "_", ":", "_").Replace(name)
	}
	for _, e := range p.Exchanges {
		fmt.Fprintf(&b, "  %s{{\"%s<br/>%s\"}}\n", id(e.Name), e.Name, e.Kind)
	}
	for _, q := range p.Queues {
		label := q.Name
		if ttl, ok := q.Args["x-message-ttl"]; ok {
			label += fmt.Sprintf("<br/>ttl %vms", ttl)
		}
		fmt.Fprintf(&b, "  %s[(\"%s\")]\n", id(q.Name), label)
	}
	for _, bd := range p.Bindings {
		label := bd.Key
		if label == "" {
			label = "all"
		}
		fmt.Fprintf(&b, "  %s -->|%s| %s\n", id(bd.Exchange), label, id(bd.to()))
	}
	for _, q := range p.Queues {
		dlx, ok := q.Args["x-dead-letter-exchange"].(string)
		if !ok {
			continue
		}
		if dlx == "" {
			if key, ok := q.Args["x-dead-letter-routing-key"].(string); ok {
				fmt.Fprintf(&b, "  %s -.->|expired| %s\n", id(q.Name), id(key))
			}
			continue
		}
		fmt.Fprintf(&b, "  %s -.->|dead-letter| %s\n", id(q.Name), id(dlx))
	}
	for _, h := range p.Moves {
		fmt.Fprintf(&b, "  %s ==>|%s| %s\n", id(h.From), h.Label, id(h.To))
	}
	return b.String()
}

// String lists the plan one entity a line, for the topology command.
func (p Plan) String() string {
	var b strings.Builder
	for _, e := range p.Exchanges {
		fmt.Fprintf(&b, "exchange %-28s %s%s\n", e.Name, e.Kind, argString(e.Args))
	}
	for _, q := range p.Queues {
		fmt.Fprintf(&b, "queue    %-28s%s\n", q.Name, argString(q.Args))
	}
	for _, bd := range p.Bindings {
		fmt.Fprintf(&b, "bind     %s -> %s key=%q%s\n", bd.Exchange, bd.to(), bd.Key, argString(bd.Args))
	}
	for _, h := range p.Moves {
		fmt.Fprintf(&b, "hop      %s => %s (%s)\n", h.From, h.To, h.Label)
	}
	return b.String()
}

func argString(args amqp.Table) string {
	if len(args) == 0 {
		return ""
	}
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%v", k, args[k])
	}
	return " [" + strings.Join(parts, " ") + "]"
}
