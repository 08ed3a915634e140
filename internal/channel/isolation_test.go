package channel

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/retry"
)

// clock is a settable clock for the tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var (
	errDown = errors.New("webhook http://x/: 503 Service Unavailable")
	errGone = retry.Permanent(errors.New("webhook http://x/: 410 Gone"))
)

// try admits one delivery to target and, if admitted, ends it with err.
// It returns the deferral (nil if admitted) and what was recorded.
func try(t *testing.T, iso *isolation, target string, err error) (*Deferred, []store.CircuitChange) {
	t.Helper()
	var recs []store.CircuitChange
	done, rec, aerr := iso.admit(context.Background(), target, "", nil)
	if rec != nil {
		recs = append(recs, *rec)
	}
	if aerr != nil {
		var d *Deferred
		if !errors.As(aerr, &d) {
			t.Fatalf("admit: %v, want a *Deferred", aerr)
		}
		return d, recs
	}
	if out := done(context.Background(), err); out.change != nil {
		recs = append(recs, *out.change)
	}
	return nil, recs
}

func states(recs []store.CircuitChange) string {
	var s []string
	for _, r := range recs {
		s = append(s, r.State)
	}
	return strings.Join(s, ",")
}

func TestIsolationBreaker(t *testing.T) {
	clk := newClock()
	iso := newIsolation(3, 10*time.Second, 4, clk.now)
	iso.jitter = func() float64 { return 0 }
	start := clk.now()

	// Two failures: still closed, nothing recorded.
	for i := range 2 {
		if d, recs := try(t, iso, "a", errDown); d != nil || len(recs) > 0 {
			t.Fatalf("failure %d: deferred %v, recorded %v", i+1, d, recs)
		}
	}
	// A healthy target beside it is not affected, ever.
	healthy := func() {
		t.Helper()
		if d, _ := try(t, iso, "b", nil); d != nil {
			t.Fatalf("healthy target deferred: %v", d)
		}
	}
	healthy()
	// The third opens the circuit.
	clk.advance(time.Second)
	d, recs := try(t, iso, "a", errDown)
	if d != nil || states(recs) != "open" || !recs[0].FailingSince.Equal(start) || recs[0].LastError != errDown.Error() {
		t.Fatalf("third failure: deferred %v, recorded %+v, want open, failing since %s", d, recs, start)
	}
	// Open: deferred until the probe is due, without an attempt.
	clk.advance(4 * time.Second)
	d, _ = try(t, iso, "a", nil)
	if d == nil || d.Wait != 6*time.Second || !strings.Contains(d.Error(), "circuit open") || !strings.Contains(d.Error(), errDown.Error()) {
		t.Fatalf("open: %v, want a deferral of 6s naming the last error", d)
	}
	if got, ok := retry.RetryAfter(d); !ok || got != 6*time.Second {
		t.Errorf("retry.RetryAfter = %s, %t: the pipeline would spend a retry", got, ok)
	}
	if !d.failingSince.Equal(start) {
		t.Errorf("deferral's run started %s, want %s", d.failingSince, start)
	}
	healthy()

	// Due: one probe goes through, the others wait for it.
	clk.advance(6 * time.Second)
	done, rec, err := iso.admit(context.Background(), "a", "", nil)
	if err != nil || rec == nil || rec.State != store.CircuitHalfOpen {
		t.Fatalf("probe: %v, recorded %+v, want admitted half-open", err, rec)
	}
	if d, _ := try(t, iso, "a", nil); d == nil || !strings.Contains(d.Why, "probe is in flight") {
		t.Fatalf("during the probe: %v, want deferred", d)
	}
	// The probe fails: open again, for twice as long.
	if out := done(context.Background(), errDown); out.change == nil || out.change.State != store.CircuitOpen || !out.transient {
		t.Fatalf("failed probe: %+v, want open", out)
	}
	clk.advance(19 * time.Second)
	if d, _ := try(t, iso, "a", nil); d == nil || d.Wait != time.Second {
		t.Fatalf("second opening: %v, want 1s left of 20s", d)
	}
	// The next probe delivers: closed, and the run of failures is over.
	clk.advance(time.Second)
	d, recs = try(t, iso, "a", nil)
	if d != nil || states(recs) != "half-open,closed" || recs[1].FailingSince != nil {
		t.Fatalf("good probe: deferred %v, recorded %+v, want half-open then closed, no longer failing", d, recs)
	}
	if d, recs := try(t, iso, "a", nil); d != nil || len(recs) > 0 {
		t.Fatalf("closed again: deferred %v, recorded %+v", d, recs)
	}
}

func TestIsolationCountsOnlyTheTargetsFailures(t *testing.T) {
	clk := newClock()
	iso := newIsolation(1, time.Minute, 4, clk.now)

	// Refused for good: the receiver answered, so it is up.
	if d, recs := try(t, iso, "a", errGone); d != nil || len(recs) > 0 {
		t.Fatalf("permanent failure: deferred %v, recorded %+v", d, recs)
	}
	// The worker giving up (shutdown) says nothing about the target.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done, _, err := iso.admit(context.Background(), "a", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if out := done(ctx, context.Canceled); out.change != nil || out.transient {
		t.Fatalf("cancelled: %+v, want nothing", out)
	}
	if d, _ := try(t, iso, "a", nil); d != nil {
		t.Fatalf("after cancellation: %v, want the circuit closed", d)
	}
	// A probe refused for good closes the circuit.
	try(t, iso, "a", errDown)
	clk.advance(time.Minute)
	if d, recs := try(t, iso, "a", errGone); d != nil || states(recs) != "half-open,closed" {
		t.Fatalf("probe refused for good: deferred %v, recorded %v", d, states(recs))
	}
}

func TestIsolationConcurrencyCap(t *testing.T) {
	clk := newClock()
	iso := newIsolation(5, time.Minute, 2, clk.now)
	iso.slotWait = 0
	var dones []func(context.Context, error) outcome
	for range 2 {
		done, _, err := iso.admit(context.Background(), "a", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		dones = append(dones, done)
	}
	d, _ := try(t, iso, "a", nil)
	if d == nil || !strings.Contains(d.Why, "2 deliveries in flight") || d.Wait < defaultBusyWait || d.Wait > defaultBusyWait*11/10 {
		t.Fatalf("third in flight: %v, want a deferral of about %s", d, defaultBusyWait)
	}
	if d, _ := try(t, iso, "b", nil); d != nil {
		t.Fatalf("another target: %v, want admitted", d)
	}
	dones[0](context.Background(), nil)
	if d, _ := try(t, iso, "a", nil); d != nil {
		t.Fatalf("after one ended: %v, want admitted", d)
	}

	// With a wait for a slot: a delivery over the cap takes the slot of
	// one that ends meanwhile, and is not deferred.
	iso.slotWait = time.Minute
	admitted := make(chan error, 1)
	go func() {
		done, _, err := iso.admit(context.Background(), "a", "", nil)
		if err == nil {
			done(context.Background(), nil)
		}
		admitted <- err
	}()
	dones[1](context.Background(), nil)
	select {
	case err := <-admitted:
		if err != nil {
			t.Errorf("waiting for a slot: %v, want admitted", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a delivery waiting for a slot was never admitted")
	}
	// The worker shutting down ends the wait.
	hold, _, err := iso.admit(context.Background(), "c", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	hold2, _, _ := iso.admit(context.Background(), "c", "", nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := iso.admit(ctx, "c", "", nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled while waiting: %v, want context.Canceled", err)
	}
	hold(context.Background(), nil)
	hold2(context.Background(), nil)
}

// TestIsolationReset checks that a circuit older than the endpoint's
// re-enabling starts afresh.
func TestIsolationReset(t *testing.T) {
	clk := newClock()
	iso := newIsolation(1, time.Hour, 4, clk.now)
	try(t, iso, "a", errDown)
	before := clk.now().Add(-time.Second)
	if d, _ := try(t, iso, "a", nil); d == nil {
		t.Fatal("open circuit admitted a delivery")
	}
	// A reset from before the circuit changes nothing.
	if _, _, err := iso.admit(context.Background(), "a", "", &before); err == nil {
		t.Fatal("reset from before the circuit closed it")
	}
	clk.advance(time.Second)
	reset := clk.now()
	clk.advance(time.Second)
	done, rec, err := iso.admit(context.Background(), "a", "", &reset)
	if err != nil || rec != nil {
		t.Fatalf("after a reset: %v, recorded %+v, want a fresh closed circuit", err, rec)
	}
	done(context.Background(), nil)
}

func TestIsolationBreakerOff(t *testing.T) {
	clk := newClock()
	iso := newIsolation(0, time.Minute, 1, clk.now)
	iso.slotWait = 0
	for i := range 20 {
		if d, recs := try(t, iso, "a", errDown); d != nil || len(recs) > 0 {
			t.Fatalf("failure %d with the breaker off: deferred %v, recorded %v", i+1, d, recs)
		}
	}
	done, _, err := iso.admit(context.Background(), "a", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := try(t, iso, "a", nil); d == nil {
		t.Error("the cap does not hold with the breaker off")
	}
	done(context.Background(), nil)
}

// TestIsolationPacing: copies over a target's cap that name themselves
// wait their turns outside the worker. Each is deferred at once, holding
// no handler, for as long as the copies before it take at the target's
// pace (its average time in flight over the cap); a free slot goes to
// whoever comes, and a copy back while every slot is taken waits its turn
// again; tickets long due are forgotten; a copy that names nothing is
// not paced.
func TestIsolationPacing(t *testing.T) {
	clk := newClock()
	iso := newIsolation(0, time.Minute, 2, clk.now)
	iso.slotWait = 0
	// Two deliveries of 100ms each: the target takes a copy every 50ms.
	var held []func(context.Context, error) outcome
	for _, key := range []string{"warm-1", "warm-2"} {
		done, _, err := iso.admit(context.Background(), "a", key, nil)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, done)
	}
	clk.advance(100 * time.Millisecond)
	for _, done := range held {
		done(context.Background(), nil)
	}
	held = held[:0]
	for _, key := range []string{"busy-1", "busy-2"} {
		done, _, err := iso.admit(context.Background(), "a", key, nil)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, done)
	}
	var waits []time.Duration
	for i := range 10 {
		_, _, err := iso.admit(context.Background(), "a", fmt.Sprintf("copy-%d", i), nil)
		var d *Deferred
		if !errors.As(err, &d) {
			t.Fatalf("copy %d over the cap: %v, want deferred", i, err)
		}
		waits = append(waits, d.Wait)
	}
	for i, w := range waits {
		// Its turn: (i+1) × 50ms from now, back slotWait/2 early (0 here),
		// never under minPacedWait.
		want := max(time.Duration(i+1)*50*time.Millisecond, minPacedWait)
		if w != want {
			t.Errorf("copy %d deferred %s, want %s (waits %v)", i, w, want, waits)
		}
	}
	// A slot frees: a free slot is never left idle for a copy still
	// away, so a newcomer takes it.
	held[0](context.Background(), nil)
	done, _, err := iso.admit(context.Background(), "a", "newcomer", nil)
	if err != nil {
		t.Fatalf("a newcomer with a slot free: %v, want admitted", err)
	}
	// The first in line, back while every slot is taken, waits its turn
	// again, after the copies still away.
	clk.advance(50 * time.Millisecond)
	_, _, err = iso.admit(context.Background(), "a", "copy-0", nil)
	var d *Deferred
	if !errors.As(err, &d) || d.Wait < 9*40*time.Millisecond {
		t.Fatalf("back with every slot taken: %v, want deferred after the 9 still away", err)
	}
	done(context.Background(), nil)
	held[1](context.Background(), nil)
	// Long after every ticket was due, the line is gone: a newcomer takes
	// a free slot.
	clk.advance(2 * time.Minute)
	if d, _ := tryKey(t, iso, "a", "late", nil); d != nil {
		t.Fatalf("with the line long due: %v, want admitted", d)
	}
	// A copy without a key is not paced: over the cap, busyWait.
	a1, _, _ := iso.admit(context.Background(), "a", "", nil)
	a2, _, _ := iso.admit(context.Background(), "a", "", nil)
	if d, _ := try(t, iso, "a", nil); d == nil || d.Wait < defaultBusyWait {
		t.Fatalf("an unnamed copy over the cap: %v, want deferred for busyWait", d)
	}
	a1(context.Background(), nil)
	a2(context.Background(), nil)
}

// tryKey is try for a copy named key.
func tryKey(t *testing.T, iso *isolation, target, key string, err error) (*Deferred, *store.CircuitChange) {
	t.Helper()
	done, rec, aerr := iso.admit(context.Background(), target, key, nil)
	var d *Deferred
	if errors.As(aerr, &d) {
		return d, rec
	}
	if aerr != nil {
		t.Fatal(aerr)
	}
	done(context.Background(), err)
	return nil, rec
}
