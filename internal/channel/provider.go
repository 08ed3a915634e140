package channel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/retry"
)

// Provider is one downstream a channel delivers through (a mail server,
// an SMS gateway), one of an ordered list the channel fails over along.
type Provider[P any] struct {
	// Name names the provider in errors, the history, metrics and status.
	Name string
	// Send delivers a part through this provider.
	Send Send[P]
	// Rate, when set, limits the sends through this provider across every
	// worker replica.
	Rate *store.Rate
	// MayBeWrong marks a provider whose permanent refusals may be its own
	// mistake: the next provider is tried before the copy is parked.
	MayBeWrong bool
}

// rateTaker is the shared rate limit; *store.Store is one.
type rateTaker interface {
	TakeRate(ctx context.Context, key, ticket string, r store.Rate, hold time.Duration, now time.Time) (time.Duration, error)
}

// providerRecorder is where the workers share their providers and the
// circuits they see; *store.Store is one.
type providerRecorder interface {
	DeclareProviders(ctx context.Context, channel string, ps []store.ProviderDecl, now time.Time) (map[string]store.Circuit, error)
	RecordProviderCircuit(ctx context.Context, channel, name string, c store.CircuitChange) (store.Circuit, error)
}

// failover delivers a channel's parts along an ordered list of providers.
//
// A copy goes to the first provider whose circuit lets it through, and
// each retry of it starts one provider further along the list: a
// transient failure moves the next attempt to the next provider. A
// provider whose circuit is open is skipped within the attempt; when
// every circuit is open the copy is deferred until the first probe, as a
// webhook endpoint's is (see isolation). A permanent refusal parks the
// copy, unless the provider may be wrong about it (MayBeWrong), when the
// next provider is tried at once.
//
// A provider with a Rate takes a slot of it before each send. Over the
// limit, the copy is deferred until its slot: it waits in the delay
// backend without spending a retry, and holds its slot when it comes back.
//
// With a store, the failover declares its providers there and records
// each change of their circuits, as the webhook endpoints' are: the
// view every replica shares, which the API shows.
type failover[P any] struct {
	channel   string
	providers []Provider[P]
	iso       *isolation
	// rates opens the shared store on first use; nil for none, when no
	// provider has a rate and no store is configured.
	rates  func(ctx context.Context) (rateTaker, error)
	ticket func(id string, p *P) string
	now    func() time.Time
	stats  *providerStats

	declareMu sync.Mutex
	declared  bool
	// stored is each provider's circuit state as the store last said it.
	stored map[string]string
	// tripped holds the providers whose circuit this worker saw open and
	// not yet closed again: a circuit that opens again after a failed
	// probe is reported opened once.
	tripped map[string]bool
}

func newFailover[P any](channel string, providers []Provider[P], failures int, cooldown time.Duration, concurrency int,
	rates func(ctx context.Context) (rateTaker, error), ticket func(id string, p *P) string, now func() time.Time) *failover[P] {
	f := &failover[P]{channel: channel, providers: providers, iso: newIsolation(failures, cooldown, concurrency, now),
		rates: rates, ticket: ticket, now: now, stats: newProviderStats(), stored: map[string]string{}, tripped: map[string]bool{}}
	for _, p := range providers {
		var per float64
		if p.Rate != nil {
			per = p.Rate.Per
		}
		f.stats.declare(channel, p.Name, per)
	}
	f.stats.circuits = f.circuits
	providerSets.add(f.stats)
	return f
}

// rateKey is the name of a provider's limit in the shared store.
func (f *failover[P]) rateKey(p Provider[P]) string { return f.channel + ":" + p.Name }

// send delivers one part of notification id.
func (f *failover[P]) send(ctx context.Context, id string, part *P) error {
	n := len(f.providers)
	start := retriesOf(ctx) % n
	var soonest *Deferred
	var refused error
	for k := range n {
		p := f.providers[(start+k)%n]
		done, rec, err := f.iso.admit(ctx, p.Name, "", nil)
		f.record(ctx, p.Name, rec)
		var d *Deferred
		switch {
		case errors.As(err, &d):
			if soonest == nil || d.Wait < soonest.Wait {
				soonest = d
			}
			continue
		case err != nil:
			return err
		}
		if p.Rate != nil {
			if err := f.pace(ctx, p, id, part); err != nil {
				done(ctx, context.Canceled) // not sent: nothing learnt of the provider
				return err
			}
		}
		if n > 1 {
			// With one provider, as before there were several, attempts
			// name none.
			setVia(ctx, p.Name)
		}
		err = p.Send(ctx, id, part)
		change := done(ctx, err).change
		if err == nil && change == nil && f.storedState(p.Name) != store.CircuitClosed {
			// The store holds another view (a replica that saw it fail
			// and stopped, or this worker before a restart); this send
			// says it is back.
			now := f.now()
			change = &store.CircuitChange{State: store.CircuitClosed, Since: now, At: now}
		}
		f.record(ctx, p.Name, change)
		f.stats.sent(f.channel, p.Name, err)
		switch {
		case err == nil:
			return nil
		case retry.IsPermanent(err) && p.MayBeWrong && k < n-1:
			refused = err
			continue
		}
		if n == 1 {
			return err // as relay said it before it had providers
		}
		return fmt.Errorf("%s: %w", p.Name, err)
	}
	if refused != nil {
		return refused
	}
	return soonest
}

// rateHold is the longest wait for a slot a send waits out in hand; a
// longer one it waits in the delay backend, coming back up to rateHold
// before its slot: the hops through the backend take some of that time.
const rateHold = 250 * time.Millisecond

// pace takes a slot of p's limit for the copy and waits for it, up to
// rateHold. A later slot is the copy's own: the error returned defers
// it, without spending a retry, to come back in time for the slot.
func (f *failover[P]) pace(ctx context.Context, p Provider[P], id string, part *P) error {
	st, err := f.rates(ctx)
	if err != nil {
		return fmt.Errorf("%s: rate limit: %w", p.Name, err)
	}
	err = paceRate(ctx, st, f.rateKey(p), f.ticket(id, part), *p.Rate, f.now(), f.channel+" provider "+p.Name)
	var d *Deferred
	if errors.As(err, &d) {
		f.stats.deferred(f.channel, p.Name)
	} else if err != nil {
		err = fmt.Errorf("%s: %w", p.Name, err)
	}
	return err
}

// paceRate takes a slot of the limit key for ticket and waits for it, up
// to rateHold; a later slot defers the send (a *Deferred naming target).
func paceRate(ctx context.Context, st rateTaker, key, ticket string, r store.Rate, now time.Time, target string) error {
	wait, err := st.TakeRate(ctx, key, ticket, r, rateHold, now)
	if err != nil {
		return err
	}
	if wait > rateHold {
		return &Deferred{Target: target, Wait: wait - rateHold,
			Why: fmt.Sprintf("rate limit %g/s (burst %d): its slot is in %s", r.Per, r.Burst, wait.Round(time.Millisecond))}
	}
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// recorder returns the store the providers are shared through, with
// them declared; nil when there is none or it cannot be reached now.
func (f *failover[P]) recorder(ctx context.Context) providerRecorder {
	if f.rates == nil {
		return nil
	}
	st, err := f.rates(ctx)
	if err != nil {
		return nil
	}
	r, ok := st.(providerRecorder)
	if !ok {
		return nil
	}
	f.declareMu.Lock()
	defer f.declareMu.Unlock()
	if !f.declared {
		decls := make([]store.ProviderDecl, len(f.providers))
		for i, p := range f.providers {
			decls[i] = store.ProviderDecl{Name: p.Name, Rate: p.Rate}
		}
		circuits, err := r.DeclareProviders(ctx, f.channel, decls, f.now())
		if err != nil {
			return nil // declared at the next change
		}
		f.declared = true
		for name, c := range circuits {
			f.stored[name] = c.State
		}
	}
	return r
}

// storedState is provider name's circuit state as the store last said
// it; closed when it said none, or there is no store.
func (f *failover[P]) storedState(name string) string {
	f.declareMu.Lock()
	defer f.declareMu.Unlock()
	if s := f.stored[name]; s != "" {
		return s
	}
	return store.CircuitClosed
}

// record records a change of a provider's circuit (nil: none) in the
// shared store. The circuit is the workers' shared view: a worker that
// cannot record goes on with its own, as with an endpoint's. Its opening
// is an operational event once, whichever worker tripped first: the
// store says which record opened the shared circuit; without a store
// that answers, the worker's own circuit says it.
func (f *failover[P]) record(ctx context.Context, name string, c *store.CircuitChange) {
	if c == nil {
		return
	}
	f.declareMu.Lock()
	opened := c.State == store.CircuitOpen && !f.tripped[name]
	f.tripped[name] = c.State != store.CircuitClosed
	f.declareMu.Unlock()
	if r := f.recorder(ctx); r != nil {
		if stored, err := r.RecordProviderCircuit(ctx, f.channel, name, *c); err == nil {
			f.declareMu.Lock()
			f.stored[name] = stored.State
			f.declareMu.Unlock()
			opened = stored.Opened
		}
	}
	if opened {
		report(ctx, notification.Operational{Type: notification.OpProviderCircuitOpened, Timestamp: c.Since.UTC(),
			Data: notification.OpData{Channel: f.channel, Provider: name, LastError: c.LastError}})
	}
}

// declare declares the providers in the shared store in the background,
// so that they show before the first send; the function it returns stops
// it and waits for it.
func (f *failover[P]) declare() (stop func()) {
	if f.rates == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.recorder(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// circuits reports each provider's circuit as this worker sees it.
func (f *failover[P]) circuits() map[string]string {
	out := map[string]string{}
	f.iso.mu.Lock()
	defer f.iso.mu.Unlock()
	for _, p := range f.providers {
		state := store.CircuitClosed
		if c := f.iso.circuits[p.Name]; c != nil {
			state = c.state
		}
		out[p.Name] = state
	}
	return out
}

// The retry count of the copy in hand, and the provider it went through,
// travel in its context between the worker's handler and the channel.
type (
	retriesKey struct{}
	viaKey     struct{}
)

// WithRetries returns ctx carrying the retries a copy has had, which
// picks the provider its attempt starts with.
func WithRetries(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, retriesKey{}, max(n, 0))
}

func retriesOf(ctx context.Context) int {
	n, _ := ctx.Value(retriesKey{}).(int)
	return n
}

// Via is where a channel notes the provider an attempt went through.
type Via struct {
	mu   sync.Mutex
	name string
}

// WithVia returns ctx carrying v, for the channel to fill.
func WithVia(ctx context.Context, v *Via) context.Context {
	return context.WithValue(ctx, viaKey{}, v)
}

// Name is the provider the attempt went through; "" for none, or a
// channel without providers.
func (v *Via) Name() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.name
}

func setVia(ctx context.Context, name string) {
	if v, ok := ctx.Value(viaKey{}).(*Via); ok {
		v.mu.Lock()
		v.name = name
		v.mu.Unlock()
	}
}
