package workshop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/lab/internal/unique"
	"github.com/relay-demo/relay/lab/strategy"
	"github.com/relay-demo/relay/retry"
)

// Policy is the retry schedule every strategy gets in the workshop: the
// wait before retry n is 250ms × n, five retries. Strategies with a single
// delay use its first step, 250ms.
var Policy = retry.Policy{Delays: []time.Duration{
	250 * time.Millisecond, 500 * time.Millisecond, 750 * time.Millisecond, time.Second, 1250 * time.Millisecond,
}}

// Concurrency is how many messages each consumer of every strategy handles
// at once.
const Concurrency = 4

// spec is one run: a strategy against a scenario.
type spec struct {
	url      string
	strategy string
	scenario Scenario
	n        int
	seed     uint64
	// policy is the retry schedule: Policy, with a chosen jitter.
	policy retry.Policy
	// bound stops a run that has not settled by then.
	bound time.Duration
	// baseline is when a plain queue with no failures first attempts each
	// notification; head-of-line waits count beyond it.
	baseline baseline
}

// baseline is, by notification id, the time from its arrival to its first
// attempt in a run with no failures through a plain queue.
type baseline map[string]time.Duration

// session is the state of one run: the downstream the handler calls, and
// what it records.
type session struct {
	cost time.Duration
	tl   *timeline
	// gate holds every attempt until the clock starts: the strategy's
	// consumers may take deliveries before all of them are up.
	gate chan struct{}

	mu       sync.Mutex
	judge    judge
	rec      *record
	first    map[string]time.Time
	finished map[string]bool
}

// open starts the clock at the first arrival: every notification counts
// as published when the release lets it into the ingress.
func (s *session) open(sp spec, names []string, r release) {
	s.mu.Lock()
	s.judge = newJudge(sp.scenario, names, sp.seed, r.start)
	s.rec.start = r.start
	for i, id := range names {
		s.rec.published[id] = r.arrival(i)
	}
	s.tl.start = r.start
	s.mu.Unlock()
	close(s.gate)
}

// Handle is the downstream: it records the attempt, waits the scenario's
// cost, and answers as the scenario decides.
func (s *session) Handle(ctx context.Context, m *retry.Message) error {
	select {
	case <-s.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	start := time.Now()
	s.mu.Lock()
	first, ok := s.first[m.ID]
	if !ok {
		first = start
		s.first[m.ID] = start
	}
	k := len(s.rec.attempts[m.ID]) + 1
	s.rec.attempts[m.ID] = append(s.rec.attempts[m.ID], attempt{start: start})
	j := s.judge
	s.mu.Unlock()

	v := j.decide(m.ID, k, first, start)
	t := time.NewTimer(s.cost)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	end := time.Now()

	s.mu.Lock()
	atts := s.rec.attempts[m.ID]
	atts[k-1].end, atts[k-1].ok = end, v.ok
	sched, actual := time.Duration(-1), time.Duration(0)
	if k > 1 {
		actual = start.Sub(atts[k-2].end)
		if sc := s.rec.scheduled[m.ID]; len(sc) >= k-1 {
			sched = sc[k-2]
		}
	}
	if v.ok {
		s.finished[m.ID] = true
	}
	s.mu.Unlock()

	s.tl.attempt(end, m.ID, k, v.ok, sched, actual, v.note)
	if !v.ok {
		return errors.New(v.note)
	}
	return nil
}

func anyOK(atts []attempt) bool {
	for _, a := range atts {
		if a.ok {
			return true
		}
	}
	return false
}

// observe records what the strategy's own consumers decided.
func (s *session) observe(e strategy.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rec.publishes += e.Published
	if e.Outcome == retry.Retrying {
		s.rec.scheduled[e.ID] = append(s.rec.scheduled[e.ID], e.Delay)
	}
}

// park records a notification the dead-letter queue received.
func (s *session) park(d *amqp.Delivery) {
	s.mu.Lock()
	if _, ok := s.rec.published[d.MessageId]; !ok || s.rec.parked[d.MessageId] {
		s.mu.Unlock()
		return
	}
	s.rec.parked[d.MessageId] = true
	s.finished[d.MessageId] = true
	n := len(s.rec.attempts[d.MessageId])
	s.mu.Unlock()
	reason, _ := d.Headers[retry.HeaderDeadReason].(string)
	if reason == "" {
		// The broker dead-lettered it: its own record says why, newest
		// first (the first is the release queue's expiry).
		if deaths, ok := d.Headers["x-death"].([]any); ok && len(deaths) > 0 {
			if t, ok := deaths[0].(amqp.Table); ok {
				reason, _ = t["reason"].(string)
			}
		}
	}
	s.tl.parked(time.Now(), d.MessageId, n, reason)
}

// counts are the progress figures.
func (s *session) counts() (accepted, delivered, parked int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.rec.published {
		switch {
		case anyOK(s.rec.attempts[id]):
			delivered++
		case s.rec.parked[id]:
			parked++
		}
	}
	return len(s.rec.published), delivered, parked
}

func (s *session) settled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.finished) >= len(s.rec.published)
}

// ids names n notifications n-001, n-002, ...
func ids(n int) []string {
	width := len(fmt.Sprint(n))
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("n-%0*d", width, i+1)
	}
	return out
}

// preflight declares the strategy and deletes it again, so a strategy the
// broker cannot run is refused before anything else happens.
func preflight(ctx context.Context, sp spec) error {
	s, err := strategy.New(sp.strategy, strategy.Options{
		Prefix: prefix(sp.strategy), URL: sp.url, Policy: sp.policy,
	})
	if err != nil {
		return err
	}
	conn, err := retry.Dial(sp.url, "relay-lab workshop preflight")
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := declare(ctx, s, conn); err != nil {
		return err
	}
	return s.Delete(conn)
}

// prefix is a fresh namespace for one run of a strategy.
func prefix(strategy string) string {
	return fmt.Sprintf("workshop.%s.%s.", strings.ReplaceAll(strategy, "/", "."), unique.Hex())
}

// errSkipped wraps the reason a strategy could not run at all.
var errSkipped = errors.New("skipped")

// runOne runs the strategy (see play) and measures the run, or returns the
// row of a strategy the broker cannot run.
func runOne(ctx context.Context, sp spec, tl *timeline) (Figures, error) {
	rec, err := play(ctx, sp, tl)
	if err != nil {
		var why *skip
		if errors.As(err, &why) {
			return skippedRow(sp.strategy, why.reason), err
		}
		return Figures{}, err
	}
	return measure(sp.strategy, rec, sp.baseline), nil
}

// skip is the error of a strategy the broker cannot run: errSkipped, with
// the reason the strategy gave.
type skip struct {
	strategy, reason string
}

func (e *skip) Error() string { return fmt.Sprintf("%s: %s", e.strategy, e.reason) }

func (e *skip) Is(target error) bool { return target == errSkipped }

// declare declares s on conn. A broker that cannot run s is a *skip with the
// strategy's reason, which the row shows as it is.
func declare(ctx context.Context, s strategy.Strategy, conn *amqp.Connection) error {
	err := s.Declare(ctx, conn)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, strategy.ErrUnsupported):
		return &skip{strategy: s.Name(), reason: err.Error()}
	}
	return fmt.Errorf("declare %s: %w", s.Name(), err)
}

// play declares the strategy under a fresh prefix, runs it, and waits
// until every one of its consumers is up; then it publishes the whole load
// before the clock starts, for the broker to release at the scenario's
// pace (publishLoad), and starts the clock at the first arrival. So
// neither how fast the notifications were published nor how long the
// consumers took to start shows in the figures. It runs until every
// notification is delivered or parked or the bound passes, takes stock of
// what is left in the strategy's queues, and deletes everything it
// declared.
func play(ctx context.Context, sp spec, tl *timeline) (*record, error) {
	pre := prefix(sp.strategy)
	s, err := strategy.New(sp.strategy, strategy.Options{
		Prefix: pre, URL: sp.url, Policy: sp.policy, Concurrency: Concurrency,
	})
	if err != nil {
		return nil, err
	}
	conn, err := retry.Dial(sp.url, "relay-lab workshop "+sp.strategy)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if err := declare(ctx, s, conn); err != nil {
		return nil, err
	}
	defer func() {
		// On a connection of its own: the strategy's may be gone.
		if c, err := retry.Dial(sp.url, "relay-lab workshop cleanup"); err == nil {
			if err := s.Delete(c); err != nil {
				tl.printf("  cleanup of %s: %v\n", sp.strategy, err)
			}
			if err := deleteRelease(c, pre+ReleaseQueue); err != nil {
				tl.printf("  cleanup of %s: %v\n", pre+ReleaseQueue, err)
			}
			c.Close()
		}
	}()
	rconn, err := retry.Dial(sp.url, "relay-lab workshop runner")
	if err != nil {
		return nil, err
	}
	defer rconn.Close()

	names := ids(sp.n)
	ses := &session{
		cost: sp.scenario.Cost, tl: tl, gate: make(chan struct{}),
		rec: newRecord(), first: map[string]time.Time{}, finished: map[string]bool{},
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- s.Run(runCtx, conn, ses, ses.observe) }()
	if err := ready(ctx, rconn, s.Layout().Consumed, ran); err != nil {
		stop()
		return nil, fmt.Errorf("start %s: %w", sp.strategy, err)
	}
	r, err := publishLoad(ctx, rconn, pre, s.Layout(), names, sp.scenario.Rate)
	if err == nil {
		err = waitUntil(ctx, r.start)
	}
	if err != nil {
		stop()
		<-ran
		return nil, err
	}
	ses.open(sp, names, r)
	watched := make(chan error, 1)
	go func() { watched <- watchParked(runCtx, rconn, s.Layout().DeadQueue, ses) }()

	tl.header()
	stopped, err := wait(ctx, sp, ses, tl, ran)
	ses.mu.Lock()
	ses.rec.end = time.Now()
	ses.mu.Unlock()
	stop()
	if !stopped {
		if rerr := <-ran; rerr != nil && err == nil {
			err = fmt.Errorf("run %s: %w", sp.strategy, rerr)
		}
	}
	if werr := <-watched; werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		return nil, err
	}
	if err := takeStock(rconn, s, r.queue, ses); err != nil {
		return nil, err
	}
	return ses.rec, nil
}

// ready waits until every one of queues has a consumer, or the strategy
// stopped. relay's stages declare their topology before they consume (65
// objects for delay levels): a retry that reached a stage before it was up
// would be measured waiting for the stage, not for its delay.
func ready(ctx context.Context, conn *amqp.Connection, queues []string, ran <-chan error) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open channel: %w", err)
	}
	defer ch.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		up := 0
		for _, name := range queues {
			q, err := ch.QueueDeclarePassive(name,
				true,  // durable
				false, // autoDelete
				false, // exclusive
				false, // noWait
				nil)
			if err != nil {
				return fmt.Errorf("inspect %q: %w", name, err)
			}
			if q.Consumers > 0 {
				up++
			}
		}
		if up == len(queues) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("its consumers did not start on %v within 30s", queues)
		}
		t := time.NewTimer(5 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case err := <-ran:
			t.Stop()
			return fmt.Errorf("it stopped before its consumers were up: %v", err)
		case <-t.C:
		}
	}
}

// wait returns once every notification is delivered or parked, or the
// bound has passed (the record says so), or the strategy failed. It prints
// progress every second. stopped says the strategy's Run has already
// returned (its result read from ran).
func wait(ctx context.Context, sp spec, ses *session, tl *timeline, ran <-chan error) (stopped bool, err error) {
	deadline := time.NewTimer(sp.bound)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	report := time.Now().Add(time.Second)
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case err := <-ran:
			return true, fmt.Errorf("%s stopped during the run: %v", sp.strategy, err)
		case <-deadline.C:
			ses.mu.Lock()
			ses.rec.timedOut = true
			ses.mu.Unlock()
			a, d, p := ses.counts()
			tl.printf("  %s: stopped by the %s bound with %d of %d notifications neither delivered nor parked\n",
				sp.strategy, sp.bound, a-d-p, a)
			return false, nil
		case now := <-tick.C:
			if ses.settled() {
				a, d, p := ses.counts()
				tl.progress(now, sp.strategy, a, d, p)
				return false, nil
			}
			if now.After(report) {
				report = now.Add(time.Second)
				a, d, p := ses.counts()
				tl.progress(now, sp.strategy, a, d, p)
			}
		}
	}
}

// watchParked consumes the dead-letter queue as messages arrive, so the
// timeline shows each one when the broker has it.
func watchParked(ctx context.Context, conn *amqp.Connection, queue string, ses *session) error {
	if queue == "" {
		return nil
	}
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open channel: %w", err)
	}
	defer ch.Close()
	ds, err := ch.Consume(queue, "relay-workshop-parked",
		true,  // autoAck: the run deletes the queue when it ends
		false, // exclusive
		false, // noLocal
		false, // noWait
		nil)
	if err != nil {
		return fmt.Errorf("consume %q: %w", queue, err)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case d, ok := <-ds:
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("dead-letter queue %q: consumer closed", queue)
			}
			ses.park(&d)
		}
	}
}

// takeStock empties every queue of the stopped strategy, and the release
// queue, and notes where each notification was: parked, a parked copy, or
// still in flight (one not yet released is in flight too). A message can
// move while this runs (a TTL expires into another queue), so it goes
// round until a whole pass finds nothing.
func takeStock(conn *amqp.Connection, s strategy.Strategy, releaseQueue string, ses *session) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open channel: %w", err)
	}
	defer ch.Close()
	l := s.Layout()
	copies := map[string]bool{}
	for _, q := range l.Copies {
		copies[q] = true
	}
	for pass := 0; pass < 20; pass++ {
		found := 0
		queues := append(s.Plan().Queues, retry.Queue{Name: releaseQueue})
		for _, q := range queues {
			for {
				d, ok, err := ch.Get(q.Name, true /* autoAck */)
				if err != nil {
					return fmt.Errorf("take stock of %q: %w", q.Name, err)
				}
				if !ok {
					break
				}
				found++
				ses.mu.Lock()
				switch {
				case q.Name == l.DeadQueue:
					ses.rec.parked[d.MessageId] = true
				case copies[q.Name]:
					ses.rec.copies++
				default:
					ses.rec.inFlight[d.MessageId] = true
				}
				ses.mu.Unlock()
			}
		}
		if found == 0 {
			return nil
		}
	}
	return errors.New("take stock: messages kept moving between queues")
}
