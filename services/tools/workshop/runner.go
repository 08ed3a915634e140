package workshop

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/strategy"
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
	// bound stops a run that has not settled by then.
	bound time.Duration
	// baseline is the typical publish-to-first-attempt time without
	// failures; head-of-line waits count beyond it.
	baseline time.Duration
}

// session is the state of one run: the downstream the handler calls, and
// what it records.
type session struct {
	judge judge
	cost  time.Duration
	tl    *timeline

	mu       sync.Mutex
	rec      *record
	first    map[string]time.Time
	finished map[string]bool
}

// Handle is the downstream: it records the attempt, waits the scenario's
// cost, and answers as the scenario decides.
func (s *session) Handle(ctx context.Context, m *retry.Message) error {
	start := time.Now()
	s.mu.Lock()
	first, ok := s.first[m.ID]
	if !ok {
		first = start
		s.first[m.ID] = start
	}
	k := len(s.rec.attempts[m.ID]) + 1
	s.rec.attempts[m.ID] = append(s.rec.attempts[m.ID], attempt{start: start})
	s.mu.Unlock()

	v := s.judge.decide(m.ID, k, first, start)
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
		// The broker dead-lettered it: its own record says why.
		reason, _ = d.Headers["x-first-death-reason"].(string)
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

func randomHex() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// preflight declares the strategy and deletes it again, so a strategy the
// broker cannot run is refused before anything else happens.
func preflight(ctx context.Context, sp spec) error {
	s, err := strategy.New(sp.strategy, strategy.Options{
		Prefix: fmt.Sprintf("workshop.%s.%s.", sp.strategy, randomHex()), URL: sp.url, Policy: Policy,
	})
	if err != nil {
		return err
	}
	conn, err := retry.Dial(sp.url, "relay workshop preflight")
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := s.Declare(ctx, conn); err != nil {
		if errors.Is(err, strategy.ErrUnsupported) {
			return fmt.Errorf("%s: %w", sp.strategy, err)
		}
		return fmt.Errorf("declare %s: %w", sp.strategy, err)
	}
	return s.Delete(conn)
}

// errSkipped wraps the reason a strategy could not run at all.
var errSkipped = errors.New("skipped")

// runOne declares the strategy under a fresh prefix, runs it against the
// scenario until every notification is delivered or parked or the bound
// passes, takes stock of what is left in its queues, deletes everything it
// declared, and measures.
func runOne(ctx context.Context, sp spec, tl *timeline) (Figures, error) {
	s, err := strategy.New(sp.strategy, strategy.Options{
		Prefix: fmt.Sprintf("workshop.%s.%s.", sp.strategy, randomHex()), URL: sp.url, Policy: Policy, Concurrency: Concurrency,
	})
	if err != nil {
		return Figures{}, err
	}
	conn, err := retry.Dial(sp.url, "relay workshop "+sp.strategy)
	if err != nil {
		return Figures{}, err
	}
	defer conn.Close()
	if err := s.Declare(ctx, conn); err != nil {
		if errors.Is(err, strategy.ErrUnsupported) {
			return skippedRow(sp.strategy, err.Error()), fmt.Errorf("%w: %s: %w", errSkipped, sp.strategy, err)
		}
		return Figures{}, fmt.Errorf("declare %s: %w", sp.strategy, err)
	}
	defer func() {
		// On a connection of its own: the strategy's may be gone.
		if c, err := retry.Dial(sp.url, "relay workshop cleanup"); err == nil {
			if err := s.Delete(c); err != nil {
				tl.printf("  cleanup of %s: %v\n", sp.strategy, err)
			}
			c.Close()
		}
	}()
	rconn, err := retry.Dial(sp.url, "relay workshop runner")
	if err != nil {
		return Figures{}, err
	}
	defer rconn.Close()

	names := ids(sp.n)
	start := time.Now()
	tl.start = start
	ses := &session{
		judge: newJudge(sp.scenario, names, sp.seed, start), cost: sp.scenario.Cost, tl: tl,
		rec: newRecord(), first: map[string]time.Time{}, finished: map[string]bool{},
	}
	ses.rec.start = start

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- s.Run(runCtx, conn, ses, ses.observe) }()
	watched := make(chan error, 1)
	go func() { watched <- watchParked(runCtx, rconn, s.Layout().DeadQueue, ses) }()
	published := make(chan error, 1)
	go func() { published <- publish(runCtx, rconn, s.Layout(), names, sp.scenario.Rate, ses) }()

	tl.header()
	stopped, err := wait(ctx, sp, ses, tl, ran, published)
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
		return Figures{}, err
	}
	if err := takeStock(rconn, s, ses); err != nil {
		return Figures{}, err
	}
	return measure(sp.strategy, ses.rec, sp.baseline), nil
}

// wait returns once publishing is over and every notification is delivered
// or parked, or the bound has passed (the record says so), or the strategy
// or the publisher failed. It prints progress every second. stopped says
// the strategy's Run has already returned (its result read from ran).
func wait(ctx context.Context, sp spec, ses *session, tl *timeline, ran, published <-chan error) (stopped bool, err error) {
	deadline := time.NewTimer(sp.bound)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	report := time.Now().Add(time.Second)
	publishing := true
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case err := <-ran:
			return true, fmt.Errorf("%s stopped during the run: %v", sp.strategy, err)
		case err := <-published:
			if err != nil {
				return false, err
			}
			publishing = false
		case <-deadline.C:
			ses.mu.Lock()
			ses.rec.timedOut = true
			ses.mu.Unlock()
			a, d, p := ses.counts()
			tl.printf("  %s: stopped by the %s bound with %d of %d notifications neither delivered nor parked\n",
				sp.strategy, sp.bound, a-d-p, a)
			return false, nil
		case now := <-tick.C:
			if !publishing && ses.settled() {
				a, d, p := ses.counts()
				tl.progress(now, sp.strategy, a, d, p, false)
				return false, nil
			}
			if now.After(report) {
				report = now.Add(time.Second)
				a, d, p := ses.counts()
				tl.progress(now, sp.strategy, a, d, p, publishing)
			}
		}
	}
}

// publish sends the notifications at rate per second, each confirmed
// before it counts as accepted. Every tenth is marked priority high.
func publish(ctx context.Context, conn *amqp.Connection, l strategy.Layout, names []string, rate float64, ses *session) error {
	pub, err := retry.NewPublisher(conn, 0)
	if err != nil {
		return err
	}
	defer pub.Close()
	every := time.Duration(float64(time.Second) / max(rate, 1))
	next := time.Now()
	for i, id := range names {
		if d := time.Until(next); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
		}
		next = next.Add(every)
		priority := "standard"
		if i%10 == 9 {
			priority = "high"
		}
		at := time.Now()
		ses.mu.Lock()
		// Published before the confirm: the handler may see it first.
		ses.rec.published[id] = at
		ses.mu.Unlock()
		err := pub.Publish(ctx, l.Exchange, l.Key, amqp.Publishing{
			MessageId: id, Timestamp: at, ContentType: "application/json", DeliveryMode: amqp.Persistent,
			Headers: amqp.Table{"priority": priority},
			Body:    fmt.Appendf(nil, `{"id":%q,"to":"/webhooks/workshop"}`, id),
		})
		if err != nil {
			ses.mu.Lock()
			delete(ses.rec.published, id)
			ses.mu.Unlock()
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("publish %s: %w", id, err)
		}
	}
	return nil
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

// takeStock empties every queue of the stopped strategy and notes where
// each notification was: parked, a parked copy, or still in flight. A
// message can move while this runs (a TTL expires into another queue), so
// it goes round until a whole pass finds nothing.
func takeStock(conn *amqp.Connection, s strategy.Strategy, ses *session) error {
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
		for _, q := range s.Plan().Queues {
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
