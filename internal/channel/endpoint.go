package channel

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/webhooks"
)

// EndpointIDPrefix starts every endpoint id.
const EndpointIDPrefix = "ep_"

// endpointID is the form of an endpoint id: EndpointIDPrefix and 26
// lower-case base32 characters, 128 random bits.
var endpointID = regexp.MustCompile(`^ep_[a-z2-7]{26}$`)

// IsEndpointID reports whether s has the form of an endpoint id.
func IsEndpointID(s string) bool { return endpointID.MatchString(s) }

// EndpointCacheTTL is how long a webhook worker uses what it read of an
// endpoint (its URL, secrets, whether it is enabled) before reading it
// again: a change through the API reaches every worker within it.
const EndpointCacheTTL = 5 * time.Second

// maxCached bounds the endpoints a worker keeps in its cache; beyond it,
// expired entries are dropped.
const maxCached = 10_000

// EndpointConfig is the isolation of the webhook channel's targets: the
// endpoints notifications name (which live in the process's history
// store) and the hosts of bare URLs.
type EndpointConfig struct {
	Concurrency int `env:"WEBHOOK_ENDPOINT_CONCURRENCY" envDefault:"4" help:"deliveries in flight to one endpoint, 1 or more; also to one host of bare webhook URLs, unless WEBHOOK_HOST_CONCURRENCY is set"`
	// HostConcurrency caps the deliveries in flight to one host of bare
	// URLs (its name, whatever the port); zero is Concurrency, so a host
	// takes what an endpoint takes unless told otherwise.
	HostConcurrency int           `env:"WEBHOOK_HOST_CONCURRENCY" envDefault:"0" help:"deliveries in flight to one host of bare webhook URLs (its name, whatever the port), 1 or more; a copy over it is deferred, spending no retry; 0 for WEBHOOK_ENDPOINT_CONCURRENCY"`
	Failures        int           `env:"WEBHOOK_BREAKER_FAILURES" envDefault:"5" help:"transient failures in a row that open the circuit of an endpoint; 0 for no circuit breaker"`
	Cooldown        time.Duration `env:"WEBHOOK_BREAKER_COOLDOWN" envDefault:"5s" help:"how long an open circuit waits before its first probe, doubling while probes fail (up to 5m, or this if longer)"`
	// DisableAfter is how long an endpoint may keep failing before the
	// workers disable it; zero never disables one.
	DisableAfter time.Duration `env:"WEBHOOK_DISABLE_AFTER" envDefault:"120h" help:"how long an endpoint may keep failing before it is disabled, such as 120h (5 days); 0 for never"`
	// Rate and Burst limit the deliveries to each endpoint, across every
	// worker replica; zero Rate is no limit.
	Rate  float64 `env:"WEBHOOK_ENDPOINT_RATE" envDefault:"0" help:"deliveries a second each endpoint takes, counted across every worker replica (shared through the history store); 0 for no limit"`
	Burst int     `env:"WEBHOOK_ENDPOINT_BURST" envDefault:"1" help:"how many deliveries to one endpoint may go at once within WEBHOOK_ENDPOINT_RATE, 1 or more"`
}

// endpointStore is what the webhook channel reads and records of
// endpoints; *store.Store is one.
type endpointStore interface {
	Endpoint(ctx context.Context, id string) (*store.Endpoint, error)
	RecordCircuit(ctx context.Context, id string, c store.CircuitChange) (store.Circuit, error)
	DisableEndpoint(ctx context.Context, id, reason string, now time.Time) (bool, error)
	rateTaker
}

// endpoints resolves endpoint ids into what a delivery needs, from the
// process's store (opened on first use), and keeps each answer for ttl.
type endpoints struct {
	open func(ctx context.Context) (endpointStore, error)
	ttl  time.Duration
	now  func() time.Time

	mu    sync.Mutex
	cache map[string]*cached
}

// cached is what a worker knows of an endpoint: nil ep for one that does
// not exist.
type cached struct {
	ep      *store.Endpoint
	signers map[store.Secret]*webhooks.Signer
	at      time.Time
}

func newEndpoints(open func(ctx context.Context) (endpointStore, error), ttl time.Duration, now func() time.Time) *endpoints {
	return &endpoints{open: open, ttl: ttl, now: now, cache: map[string]*cached{}}
}

// get returns the endpoint id and the signers of a delivery to it now, or
// an error wrapping store.ErrNotFound for an endpoint that does not
// exist. The endpoint returned is shared: read it only.
//
// What it read within the cache's time it takes from the cache, except
// that an endpoint it knows as disabled or missing is read again: such a
// delivery is parked for good, so it must not be parked on a stale view
// (an endpoint enabled again a moment ago). Deliveries to disabled
// endpoints are few.
func (e *endpoints) get(ctx context.Context, id string) (*store.Endpoint, []*webhooks.Signer, error) {
	now := e.now()
	e.mu.Lock()
	c := e.cache[id]
	e.mu.Unlock()
	if c == nil || now.Sub(c.at) >= e.ttl || now.Before(c.at) || c.ep == nil || !c.ep.Enabled {
		var err error
		if c, err = e.load(ctx, id, now); err != nil {
			return nil, nil, err
		}
	}
	if c.ep == nil {
		return nil, nil, fmt.Errorf("endpoint %s: %w", id, store.ErrNotFound)
	}
	var signers []*webhooks.Signer
	for _, s := range c.ep.Secrets(now) {
		signers = append(signers, c.signers[s])
	}
	return c.ep, signers, nil
}

// load reads the endpoint id from the store into the cache.
func (e *endpoints) load(ctx context.Context, id string, now time.Time) (*cached, error) {
	s, err := e.open(ctx)
	if err != nil {
		return nil, err
	}
	ep, err := s.Endpoint(ctx, id)
	c := &cached{ep: ep, at: now, signers: map[store.Secret]*webhooks.Signer{}}
	switch {
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return nil, fmt.Errorf("read endpoint %s: %w", id, err)
	case err == nil:
		for _, secret := range []store.Secret{ep.Secret, ep.PreviousSecret} {
			if secret == "" {
				continue
			}
			sig, err := webhooks.NewSigner(secret.Reveal())
			if err != nil {
				// The API makes every secret; this one was stored by other
				// means. Its error never quotes it.
				return nil, fmt.Errorf("endpoint %s: its secret cannot sign: %w", id, err)
			}
			c.signers[secret] = sig
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.cache) >= maxCached {
		for k, old := range e.cache {
			if now.Sub(old.at) >= e.ttl {
				delete(e.cache, k)
			}
		}
	}
	e.cache[id] = c
	return c, nil
}

// forget drops the endpoint id from the cache: it changed.
func (e *endpoints) forget(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.cache, id)
}

// record records a circuit change of the endpoint id, and keeps the
// circuit as stored in the cache. The circuit is the workers' shared
// view: a worker that cannot record goes on with its own.
func (e *endpoints) record(ctx context.Context, id string, c store.CircuitChange) (store.Circuit, error) {
	s, err := e.open(ctx)
	if err != nil {
		return store.Circuit{}, err
	}
	stored, err := s.RecordCircuit(ctx, id, c)
	if err != nil {
		return store.Circuit{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if entry := e.cache[id]; entry != nil && entry.ep != nil {
		ep := *entry.ep
		ep.Circuit = stored
		e.cache[id] = &cached{ep: &ep, signers: entry.signers, at: entry.at}
	}
	return stored, nil
}

// disable disables the endpoint id with reason, and reports whether this
// call disabled it (false: it was disabled already).
func (e *endpoints) disable(ctx context.Context, id, reason string, now time.Time) (bool, error) {
	s, err := e.open(ctx)
	if err != nil {
		return false, err
	}
	did, err := s.DisableEndpoint(ctx, id, reason, now)
	e.forget(id)
	return did, err
}
