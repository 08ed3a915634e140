package channel

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/retry"
)

// Isolation keeps one sick webhook receiver from holding up the others.
// Each target has a cap on its deliveries in flight and, unless Failures
// is 0, a circuit breaker. A registered endpoint has both; the host of a
// bare URL has the cap only (webhookSender.hosts), so a slow host holds
// no more worker slots than an endpoint may, while its failures take the
// retry schedule as they always did. The breaker's states:
//
//   - closed: deliveries go through. After Failures transient failures in
//     a row (timeouts, refused connections, 408, 429, 5xx) it opens.
//   - open: deliveries are not attempted but deferred, with an error whose
//     RetryAfter is the time left until the next probe, so the pipeline
//     re-delays them without spending a retry (within RETRY_DEFERRALS).
//     After Cooldown it lets one delivery through, half-open.
//   - half-open: one delivery probes the target while the others are
//     deferred. Delivered, or refused for good (the receiver answers, so
//     it is up): closed. Failed: open again, for twice as long (at most
//     maxCooldown).
//
// A delivery beyond the cap waits up to slotWait for one in flight to
// end, so that a busy but healthy target is not churned through the wait
// queues; then it is deferred too, for busyWait. A failure caused by the
// worker itself (its context ending) counts for nothing. With Failures 0
// the circuit never opens; the cap still holds.
//
// A delivery that names its copy (admit's key) is paced instead. A copy
// that finds no free slot waits for one in a handler only when its turn
// has come and no other copy to the target waits so; otherwise it takes
// a ticket for its turn, due when the target is expected to have a slot
// for it (the copies waiting before it times a delivery's time in
// flight, averaged, over the cap), and is deferred until then, holding
// no handler. So one target's backlog costs the worker a deferral or two
// per copy, not a handler held for slotWait each time round, and comes
// back at about the pace the target takes it; a free slot is never left
// idle for a copy still away.
type isolation struct {
	failures    int
	cooldown    time.Duration
	maxCooldown time.Duration
	limit       int
	// slotWait is how long a delivery over the cap waits for a slot.
	slotWait time.Duration
	// busyWait is how long a delivery over the cap is deferred.
	busyWait time.Duration
	now      func() time.Time
	jitter   func() float64 // in [0, 1)

	// forgetIdle drops a target's circuit when no delivery holds it, for
	// targets without a breaker (Failures 0), whose circuit then holds
	// nothing worth keeping: the hosts of bare URLs, which any client
	// names and which would otherwise pile up.
	forgetIdle bool

	mu       sync.Mutex
	circuits map[string]*circuit
	// swept is when idle circuits were last looked for (forgetIdle).
	swept time.Time
}

// circuit is one target's breaker and its deliveries in flight.
type circuit struct {
	state string
	// since is when it entered state; started when the circuit was made.
	since, started time.Time
	// failures counts the transient failures in a row.
	failures int
	// cooldown is how long the current opening lasts.
	cooldown time.Duration
	// probing is true while a half-open circuit's probe is in flight.
	probing bool
	// failingSince is the first failure of the run under way.
	failingSince time.Time
	lastErr      string
	// slots holds a token per delivery in flight, up to the cap.
	slots chan struct{}
	// target is the key of the circuit; users counts the deliveries
	// between gate and done, so an idle circuit can be forgotten.
	target string
	users  int

	// The paced copies waiting their turns: tickets by copy key, each
	// due at its time; booked is when the last one is due, swept when
	// tickets long due were last dropped.
	tickets map[string]time.Time
	booked  time.Time
	swept   time.Time
	// waiting counts the newcomers waiting in a handler for a slot.
	waiting int
	// inFlight is a delivery's time in flight, averaged (0: none yet).
	inFlight time.Duration
}

// maxTickets bounds one target's line; past it a copy over the cap is
// deferred for busyWait without a ticket.
const maxTickets = 100_000

// minPacedWait is the shortest deferral of a paced copy: a wait through
// the delay backend shorter than that costs more than it spares.
const minPacedWait = 50 * time.Millisecond

// How long a delivery over the cap waits for a slot, and then is
// deferred.
const (
	defaultSlotWait = 250 * time.Millisecond
	defaultBusyWait = time.Second
)

func newIsolation(failures int, cooldown time.Duration, limit int, now func() time.Time) *isolation {
	return &isolation{
		failures: failures, cooldown: cooldown, maxCooldown: max(cooldown, 5*time.Minute), limit: limit,
		slotWait: defaultSlotWait, busyWait: defaultBusyWait, now: now, jitter: rand.Float64, circuits: map[string]*circuit{},
	}
}

// Deferred is the error of a delivery that was not attempted because its
// target's circuit is open or half-open, or it has as many deliveries in
// flight as it may: the pipeline retries it after RetryAfter without
// spending a retry.
type Deferred struct {
	// Target names the endpoint or host.
	Target string
	// Why says why the delivery waits.
	Why string
	// Wait is how long it waits.
	Wait time.Duration

	// failingSince and lastErr are the run of failures that opened the
	// circuit; zero when it is not open.
	failingSince time.Time
	lastErr      string
}

// Error reads like "endpoint ep_…: circuit open since 12:00:00 after 5
// failures (last: …); next probe in 25s".
func (d *Deferred) Error() string {
	return fmt.Sprintf("%s: %s; deferred %s", d.Target, d.Why, d.Wait.Round(time.Millisecond))
}

// RetryAfter is the wait before the next attempt, as the retry package
// reads it.
func (d *Deferred) RetryAfter() time.Duration { return d.Wait }

// admit decides whether a delivery to target may go now. If it may, it
// returns a done function to call with the delivery's outcome, and the
// state change to record (nil for none); if not, a *Deferred error, or
// ctx's error when it ends while the delivery waits for a slot. resetAt,
// when later than the circuit's start, makes a fresh circuit: the
// endpoint was re-enabled since.
// key names the copy for pacing (see isolation); empty, the copy is not
// paced.
func (iso *isolation) admit(ctx context.Context, target, key string, resetAt *time.Time) (done func(ctx context.Context, err error) outcome, rec *store.CircuitChange, err error) {
	c, probe, rec, err := iso.gate(target, resetAt)
	if err != nil {
		return nil, rec, err
	}
	slot := func() error { return iso.slot(ctx, c) }
	if key != "" {
		slot = func() error { return iso.pacedSlot(ctx, c, key) }
	}
	if err := slot(); err != nil {
		iso.mu.Lock()
		if probe {
			c.probing = false // the next delivery probes instead
		}
		iso.release(c)
		iso.mu.Unlock()
		var d *Deferred
		if errors.As(err, &d) {
			d.Target = target
		}
		return nil, rec, err
	}
	start := iso.now()
	return func(ctx context.Context, err error) outcome {
		iso.timed(c, iso.now().Sub(start))
		return iso.done(c, probe, ctx, err)
	}, rec, nil
}

// timed averages a delivery's time in flight into c's.
func (iso *isolation) timed(c *circuit, took time.Duration) {
	iso.mu.Lock()
	defer iso.mu.Unlock()
	if c.inFlight == 0 {
		c.inFlight = took
		return
	}
	c.inFlight = (4*c.inFlight + took) / 5
}

// pacedSlot takes one of c's slots for the copy key, or defers it to its
// turn (see isolation).
func (iso *isolation) pacedSlot(ctx context.Context, c *circuit, key string) error {
	now := iso.now()
	iso.mu.Lock()
	if now.Sub(c.swept) >= time.Second {
		// Tickets long due belong to copies that went elsewhere
		// (another replica, a cancellation): they hold no place.
		c.swept = now
		for k, at := range c.tickets {
			if at.Before(now.Add(-time.Minute)) {
				delete(c.tickets, k)
			}
		}
	}
	due, ticketed := c.tickets[key]
	delete(c.tickets, key)
	select {
	case c.slots <- struct{}{}:
		iso.mu.Unlock()
		return nil
	default:
	}
	// No slot: a copy whose turn has come, or the first over the cap,
	// waits for one in a handler (maxWaiting copies per target at a time);
	// any other waits its turn outside.
	turn := (ticketed && !due.After(now.Add(iso.slotWait))) || len(c.tickets) == 0
	if c.waiting >= maxWaiting(cap(c.slots)) || iso.slotWait <= 0 || !turn {
		d := iso.ticket(c, key, now)
		iso.mu.Unlock()
		return d
	}
	c.waiting++
	iso.mu.Unlock()
	t := time.NewTimer(iso.slotWait)
	defer t.Stop()
	var err error
	select {
	case c.slots <- struct{}{}:
	case <-t.C:
		err = errSlotWait
	case <-ctx.Done():
		err = ctx.Err()
	}
	iso.mu.Lock()
	defer iso.mu.Unlock()
	c.waiting--
	if err == errSlotWait {
		return iso.ticket(c, key, iso.now())
	}
	return err
}

var errSlotWait = errors.New("no slot within the wait")

// maxWaiting is how many paced copies to one target may wait for a slot
// in a handler at once, for a target that takes limit at once: half as
// many (one at least), so that a copy coming back while every slot is
// taken usually finds a place to wait and the target no idle slot, while
// the handlers it holds stay few.
func maxWaiting(limit int) int { return max(limit, 1) }

// ticket defers the copy key for its turn: after the copies waiting
// theirs, each taking the target's time in flight over its cap (averaged
// over the deliveries so far). iso.mu is held.
func (iso *isolation) ticket(c *circuit, key string, now time.Time) *Deferred {
	if c.tickets == nil {
		c.tickets = map[string]time.Time{}
	}
	ahead := len(c.tickets)
	if ahead >= maxTickets {
		return &Deferred{Wait: iso.spread(iso.busyWait), Why: fmt.Sprintf("%d deliveries in flight, the most it takes at once, and %d copies waiting their turn", cap(c.slots), ahead)}
	}
	// Until a delivery has ended, a turn is reckoned short: a copy back
	// too early waits again, reckoned then from what was measured, where
	// one reckoned too long would leave the target idle.
	each := c.inFlight
	if each == 0 {
		each = minPacedWait
	}
	each /= time.Duration(cap(c.slots))
	at := now.Add(time.Duration(ahead+1) * each)
	c.tickets[key] = at
	c.booked = maxTime(c.booked, at)
	return &Deferred{Wait: max(at.Sub(now), minPacedWait),
		Why: fmt.Sprintf("%d deliveries in flight, the most it takes at once; %d copies wait their turn before it", cap(c.slots), ahead)}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// gate applies target's circuit to a delivery: it returns the circuit,
// whether the delivery is its probe and the state change to record, or
// the *Deferred error of a circuit that lets nothing through.
func (iso *isolation) gate(target string, resetAt *time.Time) (c *circuit, probe bool, rec *store.CircuitChange, err error) {
	now := iso.now()
	iso.mu.Lock()
	defer iso.mu.Unlock()
	if iso.forgetIdle && now.Sub(iso.swept) >= time.Minute {
		iso.sweep(now)
	}
	c = iso.circuits[target]
	if c == nil || (resetAt != nil && resetAt.After(c.started)) {
		c = &circuit{state: store.CircuitClosed, since: now, started: now, cooldown: iso.cooldown, slots: make(chan struct{}, iso.limit), target: target}
		iso.circuits[target] = c
	}
	defer func() {
		if err == nil {
			c.users++
		}
	}()
	switch c.state {
	case store.CircuitOpen:
		next := c.since.Add(c.cooldown)
		if now.Before(next) {
			return nil, false, nil, &Deferred{Target: target, Wait: iso.spread(next.Sub(now)),
				Why: fmt.Sprintf("circuit open since %s after %d failures in a row (last: %s); next probe at %s",
					c.since.UTC().Format(time.RFC3339), c.failures, c.lastErr, next.UTC().Format(time.RFC3339)),
				failingSince: c.failingSince, lastErr: c.lastErr}
		}
		c.state, c.since = store.CircuitHalfOpen, now
		rec = c.record(now)
	case store.CircuitHalfOpen:
		if c.probing {
			// The probe ends within the delivery timeout; come back then.
			return nil, false, nil, &Deferred{Target: target, Wait: iso.spread(max(iso.busyWait, c.cooldown/4)),
				Why: fmt.Sprintf("circuit half-open since %s: a probe is in flight", c.since.UTC().Format(time.RFC3339))}
		}
	}
	if c.state == store.CircuitHalfOpen {
		c.probing, probe = true, true
	}
	return c, probe, rec, nil
}

// slot takes one of c's slots, waiting up to slotWait for one.
func (iso *isolation) slot(ctx context.Context, c *circuit) error {
	select {
	case c.slots <- struct{}{}:
		return nil
	default:
	}
	busy := &Deferred{Wait: iso.spread(iso.busyWait), Why: fmt.Sprintf("%d deliveries in flight, the most it takes at once", cap(c.slots))}
	if iso.slotWait <= 0 {
		return busy
	}
	t := time.NewTimer(iso.slotWait)
	defer t.Stop()
	select {
	case c.slots <- struct{}{}:
		return nil
	case <-t.C:
		return busy
	case <-ctx.Done():
		return ctx.Err()
	}
}

// outcome is what a delivery's result did to its circuit.
type outcome struct {
	// change is the state change to record, or nil.
	change *store.CircuitChange
	// transient is true when the delivery counted as a failure.
	transient bool
	// failingSince is the first failure of the run under way; zero when
	// none is.
	failingSince time.Time
}

// done takes a delivery's result into its circuit.
func (iso *isolation) done(c *circuit, probe bool, ctx context.Context, err error) outcome {
	now := iso.now()
	<-c.slots
	iso.mu.Lock()
	defer iso.mu.Unlock()
	iso.release(c)
	if probe {
		c.probing = false
	}
	switch {
	case err != nil && (ctx.Err() != nil || errors.Is(err, context.Canceled)):
		// The worker gave up (shutdown): nothing learnt about the target.
		return outcome{failingSince: c.failingSince}
	case err == nil || retry.IsPermanent(err):
		// Refused for good is still an answer: the receiver is up. A
		// circuit that never opened has told the store nothing to undo.
		c.failures, c.cooldown, c.failingSince = 0, iso.cooldown, time.Time{}
		if c.state == store.CircuitClosed {
			return outcome{}
		}
		c.state, c.since = store.CircuitClosed, now
		return outcome{change: c.record(now)}
	}
	c.failures++
	c.lastErr = err.Error()
	if c.failingSince.IsZero() {
		c.failingSince = now
	}
	out := outcome{transient: true, failingSince: c.failingSince}
	switch {
	case c.state == store.CircuitHalfOpen && probe:
		c.state, c.since = store.CircuitOpen, now
		c.cooldown = min(c.cooldown*2, iso.maxCooldown)
		out.change = c.record(now)
	case c.state == store.CircuitClosed && iso.failures > 0 && c.failures >= iso.failures:
		c.state, c.since, c.cooldown = store.CircuitOpen, now, iso.cooldown
		out.change = c.record(now)
	}
	return out
}

// release ends one delivery's hold on c, forgetting c when it was the
// last and the isolation forgets idle circuits. iso.mu is held.
func (iso *isolation) release(c *circuit) {
	c.users--
	if iso.forgetIdle && c.idle(iso.now()) && iso.circuits[c.target] == c {
		delete(iso.circuits, c.target)
	}
}

// sweep forgets the idle circuits (forgetIdle): a target whose copies
// waiting their turn never came back, to this worker, keeps no line.
// iso.mu is held.
func (iso *isolation) sweep(now time.Time) {
	iso.swept = now
	for target, c := range iso.circuits {
		if c.idle(now) {
			delete(iso.circuits, target)
		}
	}
}

// idle reports whether c holds nothing worth keeping at now: no delivery
// between gate and done, no ticket due within the last minute.
func (c *circuit) idle(now time.Time) bool {
	return c.users == 0 && (len(c.tickets) == 0 || c.booked.Before(now.Add(-time.Minute)))
}

// record is the circuit as the store records it, at now.
func (c *circuit) record(now time.Time) *store.CircuitChange {
	r := &store.CircuitChange{State: c.state, Since: c.since, LastError: c.lastErr, At: now}
	if !c.failingSince.IsZero() {
		at := c.failingSince
		r.FailingSince = &at
	}
	return r
}

// spread adds up to a tenth to d, so that the deliveries deferred
// together do not all come back at once.
func (iso *isolation) spread(d time.Duration) time.Duration {
	return d + time.Duration(float64(d)/10*iso.jitter())
}
