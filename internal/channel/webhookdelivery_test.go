package channel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/internal/store/storetest"
	"github.com/relay-demo/relay/internal/testenv"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/webhooks"
)

// globalSecret is WEBHOOK_SECRET in the tests: what bare URLs are signed
// with, and endpoint deliveries never.
var globalSecret = webhooks.NewSecret()

// delivery is one request a receiver took.
type delivery struct {
	Path   string
	Header http.Header
	Body   []byte
}

// receiver is a real webhook receiver. Paths under /down answer 503,
// under /hang wait for the sender to give up, anything else 200.
type receiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []delivery
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	r := &receiver{}
	release := make(chan struct{})
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, delivery{Path: req.URL.Path, Header: req.Header.Clone(), Body: body})
		r.mu.Unlock()
		switch {
		case strings.HasPrefix(req.URL.Path, "/down"):
			w.WriteHeader(http.StatusServiceUnavailable)
		case strings.HasPrefix(req.URL.Path, "/hang"):
			select {
			case <-req.Context().Done():
			case <-release:
			}
		}
	}))
	t.Cleanup(func() {
		close(release)
		r.srv.Close()
	})
	return r
}

func (r *receiver) deliveries(path string) []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []delivery
	for _, d := range r.got {
		if d.Path == path {
			out = append(out, d)
		}
	}
	return out
}

// fixture is a webhook sender on a real history store, with a clock the
// test moves.
type fixture struct {
	store *store.Store
	clock *clock
	w     *webhookSender
	recv  *receiver
}

// testEndpointConfig is a small breaker: two failures open it for a
// minute.
var testEndpointConfig = EndpointConfig{Concurrency: 2, Failures: 2, Cooldown: time.Minute, DisableAfter: 120 * time.Hour}

func newFixture(t *testing.T, cfg EndpointConfig) *fixture {
	t.Helper()
	f := &fixture{store: storetest.Open(t, storetest.SQLite), clock: newClock(), recv: newReceiver(t)}
	sig, err := webhooks.NewSigner(globalSecret)
	if err != nil {
		t.Fatal(err)
	}
	allow := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	s := webhooks.NewSender(webhooks.Config{Timeout: 300 * time.Millisecond, Allow: allow}, sig)
	open := func(context.Context) (endpointStore, error) { return f.store, nil }
	f.w = newWebhookSender(s, cfg, open, EndpointCacheTTL, f.clock.now)
	f.w.iso.jitter = func() float64 { return 0 }
	return f
}

var idSeq struct {
	sync.Mutex
	n int
}

// createEndpoint stores an endpoint to the receiver's path and returns
// its id and secret.
func (f *fixture) createEndpoint(t *testing.T, path string) (string, string) {
	t.Helper()
	idSeq.Lock()
	idSeq.n++
	id := "ep_" + strings.Repeat("a", 25) + string(rune('a'+idSeq.n%26))
	idSeq.Unlock()
	secret := webhooks.NewSecret()
	err := f.store.CreateEndpoint(context.Background(), store.Endpoint{ID: id, URL: f.recv.srv.URL + path, Secret: store.Secret(secret), CreatedAt: f.clock.now()})
	if err != nil {
		t.Fatal(err)
	}
	return id, secret
}

func (f *fixture) deliver(ntf string, p WebhookPart) error {
	if p.Payload == nil {
		p.Payload = json.RawMessage(`{"n":1}`)
	}
	return f.w.deliver(context.Background(), ntf, &p)
}

// verifies reports whether a receiver holding secret accepts d.
func verifies(t *testing.T, secret string, d delivery) bool {
	t.Helper()
	s, err := webhooks.NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	return s.Verify(d.Header, d.Body, time.Now()) == nil
}

func TestEndpointDeliverySigned(t *testing.T) {
	f := newFixture(t, testEndpointConfig)
	ep1, secret1 := f.createEndpoint(t, "/one")
	ep2, secret2 := f.createEndpoint(t, "/two")
	for _, tc := range []struct {
		part WebhookPart
		path string
		// accepted by a receiver with each secret: global, ep1's, ep2's
		want [3]bool
	}{
		{WebhookPart{Endpoint: ep1}, "/one", [3]bool{false, true, false}},
		{WebhookPart{Endpoint: ep2}, "/two", [3]bool{false, false, true}},
		{WebhookPart{URL: f.recv.srv.URL + "/bare"}, "/bare", [3]bool{true, false, false}},
	} {
		if err := f.deliver("ntf_1", tc.part); err != nil {
			t.Fatalf("deliver to %s: %v", tc.path, err)
		}
		got := f.recv.deliveries(tc.path)
		if len(got) != 1 {
			t.Fatalf("%s got %d deliveries, want 1", tc.path, len(got))
		}
		for i, secret := range []string{globalSecret, secret1, secret2} {
			if ok := verifies(t, secret, got[0]); ok != tc.want[i] {
				t.Errorf("%s: receiver with secret %d accepts: %t, want %t", tc.path, i, ok, tc.want[i])
			}
		}
		if sigs := strings.Fields(got[0].Header.Get(webhooks.HeaderSignature)); len(sigs) != 1 {
			t.Errorf("%s: %d signatures, want 1", tc.path, len(sigs))
		}
	}
}

func TestEndpointRotation(t *testing.T) {
	f := newFixture(t, testEndpointConfig)
	ep, oldSecret := f.createEndpoint(t, "/rot")
	newSecret := webhooks.NewSecret()
	if _, err := f.store.RotateEndpointSecret(context.Background(), ep, store.Secret(newSecret), time.Hour, f.clock.now()); err != nil {
		t.Fatal(err)
	}
	// During the grace period, either secret verifies.
	if err := f.deliver("ntf_1", WebhookPart{Endpoint: ep}); err != nil {
		t.Fatal(err)
	}
	d := f.recv.deliveries("/rot")[0]
	if !verifies(t, oldSecret, d) || !verifies(t, newSecret, d) || verifies(t, globalSecret, d) {
		t.Errorf("during the grace period: old %t, new %t, global %t; want true, true, false",
			verifies(t, oldSecret, d), verifies(t, newSecret, d), verifies(t, globalSecret, d))
	}
	if sigs := strings.Fields(d.Header.Get(webhooks.HeaderSignature)); len(sigs) != 2 {
		t.Errorf("during the grace period: %d signatures, want 2", len(sigs))
	}
	// After it, only the new one.
	f.clock.advance(time.Hour)
	if err := f.deliver("ntf_2", WebhookPart{Endpoint: ep}); err != nil {
		t.Fatal(err)
	}
	d = f.recv.deliveries("/rot")[1]
	if verifies(t, oldSecret, d) || !verifies(t, newSecret, d) {
		t.Errorf("after the grace period: old %t, new %t; want false, true", verifies(t, oldSecret, d), verifies(t, newSecret, d))
	}
}

func TestEndpointLookupCached(t *testing.T) {
	f := newFixture(t, testEndpointConfig)
	ep, _ := f.createEndpoint(t, "/first")
	if err := f.deliver("ntf_1", WebhookPart{Endpoint: ep}); err != nil {
		t.Fatal(err)
	}
	moved := f.recv.srv.URL + "/second"
	if _, err := f.store.UpdateEndpoint(context.Background(), ep, store.EndpointChange{URL: &moved}, f.clock.now()); err != nil {
		t.Fatal(err)
	}
	// Within the cache's time: the worker does not read the store again.
	if err := f.deliver("ntf_2", WebhookPart{Endpoint: ep}); err != nil {
		t.Fatal(err)
	}
	f.clock.advance(EndpointCacheTTL)
	if err := f.deliver("ntf_3", WebhookPart{Endpoint: ep}); err != nil {
		t.Fatal(err)
	}
	if first, second := len(f.recv.deliveries("/first")), len(f.recv.deliveries("/second")); first != 2 || second != 1 {
		t.Errorf("deliveries: %d to the old URL, %d to the new; want 2 and 1", first, second)
	}
}

func TestEndpointGoneOrDisabled(t *testing.T) {
	f := newFixture(t, testEndpointConfig)
	ctx := context.Background()
	gone, _ := f.createEndpoint(t, "/gone")
	if err := f.store.DeleteEndpoint(ctx, gone); err != nil {
		t.Fatal(err)
	}
	err := f.deliver("ntf_1", WebhookPart{Endpoint: gone})
	if !retry.IsPermanent(err) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("deleted endpoint: %v, want a permanent failure saying it does not exist", err)
	}

	off, _ := f.createEndpoint(t, "/off")
	no := false
	if _, err := f.store.UpdateEndpoint(ctx, off, store.EndpointChange{Enabled: &no, DisabledReason: "disabled through the API"}, f.clock.now()); err != nil {
		t.Fatal(err)
	}
	err = f.deliver("ntf_1", WebhookPart{Endpoint: off})
	if !retry.IsPermanent(err) || !strings.HasPrefix(err.Error(), ReasonEndpointDisabled+":") || !strings.Contains(err.Error(), "disabled through the API") {
		t.Errorf("disabled endpoint: %v, want a permanent failure starting %q with the reason", err, ReasonEndpointDisabled)
	}
	if n := len(f.recv.deliveries("/off")); n != 0 {
		t.Errorf("a disabled endpoint got %d deliveries", n)
	}
}

// TestEndpointURLCheckedAtDelivery checks that a stored URL the guard
// refuses is refused when dialled, for good.
func TestEndpointURLCheckedAtDelivery(t *testing.T) {
	f := newFixture(t, testEndpointConfig)
	ctx := context.Background()
	for _, tc := range []struct{ url, want string }{
		{"http://10.0.0.1:9/hook", "forbidden address"},
		{"http://2130706433/hook", "non-standard form"},
		{"ftp://example.com/hook", "not an absolute http or https URL"},
	} {
		ep, _ := f.createEndpoint(t, "/x")
		if _, err := f.store.UpdateEndpoint(ctx, ep, store.EndpointChange{URL: &tc.url}, f.clock.now()); err != nil {
			t.Fatal(err)
		}
		f.w.endpoints.forget(ep)
		err := f.deliver("ntf_1", WebhookPart{Endpoint: ep})
		if !retry.IsPermanent(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a permanent failure saying %q", tc.url, err, tc.want)
		}
	}
}

// TestEndpointIsolation sends to a hanging endpoint, a failing one and a
// healthy one: the sick ones' circuits open and their deliveries are
// deferred at once, the healthy one's go through, and the store shows
// each circuit.
func TestEndpointIsolation(t *testing.T) {
	f := newFixture(t, testEndpointConfig)
	ctx := context.Background()
	hang, _ := f.createEndpoint(t, "/hang")
	down, _ := f.createEndpoint(t, "/down")
	ok, _ := f.createEndpoint(t, "/ok")

	for i := range testEndpointConfig.Failures {
		for _, ep := range []string{hang, down} {
			err := f.deliver("ntf_1", WebhookPart{Endpoint: ep})
			if err == nil || retry.IsPermanent(err) {
				t.Fatalf("failure %d to %s: %v, want a transient failure", i+1, ep, err)
			}
			if _, deferred := retry.RetryAfter(err); deferred {
				t.Fatalf("failure %d to %s: %v, deferred before the circuit opened", i+1, ep, err)
			}
		}
		if err := f.deliver("ntf_1", WebhookPart{Endpoint: ok}); err != nil {
			t.Fatalf("healthy endpoint: %v", err)
		}
	}
	for ep, path := range map[string]string{hang: "/hang", down: "/down"} {
		before := len(f.recv.deliveries(path))
		err := f.deliver("ntf_2", WebhookPart{Endpoint: ep})
		wait, deferred := retry.RetryAfter(err)
		if !deferred || wait != testEndpointConfig.Cooldown || retry.IsPermanent(err) {
			t.Errorf("%s open: %v, want deferred by the cooldown", ep, err)
		}
		// The receiver notes a request as it arrives, before /hang hangs.
		if after := len(f.recv.deliveries(path)); after != before {
			t.Errorf("%s open: %d requests reached %s during the deferral, want none: it must not dial", ep, after-before, path)
		}
		c := endpointOf(t, f, ep).Circuit
		if c.State != store.CircuitOpen || c.FailingSince == nil || c.LastError == "" {
			t.Errorf("%s: stored circuit %+v, want open, failing, with the last error", ep, c)
		}
	}
	if n := len(f.recv.deliveries("/hang")); n != testEndpointConfig.Failures {
		t.Errorf("the hanging endpoint was dialled %d times, want %d", n, testEndpointConfig.Failures)
	}
	if err := f.deliver("ntf_2", WebhookPart{Endpoint: ok}); err != nil {
		t.Errorf("healthy endpoint beside open ones: %v", err)
	}
	if c := endpointOf(t, f, ok).Circuit; c.State != store.CircuitClosed {
		t.Errorf("healthy endpoint: stored circuit %+v", c)
	}

	// The failing one recovers: the probe after the cooldown closes it.
	fixed := f.recv.srv.URL + "/ok"
	if _, err := f.store.UpdateEndpoint(ctx, down, store.EndpointChange{URL: &fixed}, f.clock.now()); err != nil {
		t.Fatal(err)
	}
	f.clock.advance(testEndpointConfig.Cooldown)
	if err := f.deliver("ntf_3", WebhookPart{Endpoint: down}); err != nil {
		t.Fatalf("probe: %v", err)
	}
	if c := endpointOf(t, f, down).Circuit; c.State != store.CircuitClosed || c.FailingSince != nil {
		t.Errorf("after a good probe: stored circuit %+v, want closed, not failing", c)
	}
}

func endpointOf(t *testing.T, f *fixture, id string) *store.Endpoint {
	t.Helper()
	e, err := f.store.Endpoint(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestBareURLsAreNotIsolated checks that the demo's bare URLs keep their
// plain retry schedule: no circuit opens for their host, however many
// failures in a row.
func TestBareURLsAreNotIsolated(t *testing.T) {
	f := newFixture(t, testEndpointConfig)
	for range 2 * testEndpointConfig.Failures {
		err := f.deliver("ntf_1", WebhookPart{URL: f.recv.srv.URL + "/down"})
		if err == nil {
			t.Fatal("a 503 delivered")
		}
		if _, deferred := retry.RetryAfter(err); deferred {
			t.Fatalf("a bare URL's failure was deferred: %v", err)
		}
	}
	if err := f.deliver("ntf_2", WebhookPart{URL: f.recv.srv.URL + "/fine"}); err != nil {
		t.Errorf("another path on the same host: %v", err)
	}
}

// TestEndpointDisabledAfterSustainedFailure keeps an endpoint failing past
// WEBHOOK_DISABLE_AFTER: it is disabled and its deliveries parked until it
// is enabled again.
func TestEndpointDisabledAfterSustainedFailure(t *testing.T) {
	cfg := testEndpointConfig
	cfg.DisableAfter = 2 * time.Hour
	f := newFixture(t, cfg)
	ctx := context.Background()
	ep, _ := f.createEndpoint(t, "/down")
	started := f.clock.now()
	for range cfg.Failures {
		f.deliver("ntf_1", WebhookPart{Endpoint: ep})
	}
	// Failing, probed every few minutes, for less than the limit.
	for f.clock.now().Sub(started) < cfg.DisableAfter {
		f.clock.advance(5 * time.Minute)
		err := f.deliver("ntf_1", WebhookPart{Endpoint: ep})
		if retry.IsPermanent(err) {
			t.Fatalf("%s after the first failure: %v, disabled too soon", f.clock.now().Sub(started), err)
		}
	}
	f.clock.advance(time.Second)
	err := f.deliver("ntf_2", WebhookPart{Endpoint: ep})
	if !retry.IsPermanent(err) || !strings.HasPrefix(err.Error(), ReasonEndpointDisabled+":") {
		t.Fatalf("past the limit: %v, want parked as %s", err, ReasonEndpointDisabled)
	}
	e := endpointOf(t, f, ep)
	if e.Enabled || !strings.Contains(e.DisabledReason, "WEBHOOK_DISABLE_AFTER") {
		t.Fatalf("stored: enabled %t, reason %q", e.Enabled, e.DisabledReason)
	}
	// Parked while disabled, without a dial.
	dialled := len(f.recv.deliveries("/down"))
	f.clock.advance(time.Hour)
	if err := f.deliver("ntf_3", WebhookPart{Endpoint: ep}); !retry.IsPermanent(err) || !strings.Contains(err.Error(), ReasonEndpointDisabled) {
		t.Fatalf("while disabled: %v", err)
	}
	if n := len(f.recv.deliveries("/down")); n != dialled {
		t.Errorf("dialled a disabled endpoint %d times", n-dialled)
	}

	// Fixed and enabled again: a fresh circuit, deliveries go through.
	fixed, yes := f.recv.srv.URL+"/ok", true
	if _, err := f.store.UpdateEndpoint(ctx, ep, store.EndpointChange{URL: &fixed, Enabled: &yes}, f.clock.now()); err != nil {
		t.Fatal(err)
	}
	f.clock.advance(EndpointCacheTTL)
	if err := f.deliver("ntf_4", WebhookPart{Endpoint: ep}); err != nil {
		t.Fatalf("enabled again: %v", err)
	}
}

// TestDeferredIsNotPermanent guards the contract with the retry package:
// a deferral waits without spending a retry, and is never parked.
func TestDeferredIsNotPermanent(t *testing.T) {
	var err error = &Deferred{Target: "endpoint ep_x", Why: "circuit open", Wait: time.Minute}
	if retry.IsPermanent(err) {
		t.Error("a deferral is permanent")
	}
	if d, ok := retry.RetryAfter(err); !ok || d != time.Minute {
		t.Errorf("RetryAfter = %s, %t", d, ok)
	}
	var target *Deferred
	if !errors.As(err, &target) {
		t.Error("errors.As does not find the *Deferred")
	}
}

// TestEndpointEnabledAgainSeenAtOnce checks that a worker does not park a
// delivery on a cached view of a disabled endpoint that was enabled since.
func TestEndpointEnabledAgainSeenAtOnce(t *testing.T) {
	f := newFixture(t, testEndpointConfig)
	ctx := context.Background()
	ep, _ := f.createEndpoint(t, "/ok")
	off, on := false, true
	if _, err := f.store.UpdateEndpoint(ctx, ep, store.EndpointChange{Enabled: &off, DisabledReason: "maintenance"}, f.clock.now()); err != nil {
		t.Fatal(err)
	}
	if err := f.deliver("ntf_1", WebhookPart{Endpoint: ep}); !retry.IsPermanent(err) {
		t.Fatalf("disabled: %v", err)
	}
	if _, err := f.store.UpdateEndpoint(ctx, ep, store.EndpointChange{Enabled: &on}, f.clock.now()); err != nil {
		t.Fatal(err)
	}
	// Within the cache's time.
	if err := f.deliver("ntf_2", WebhookPart{Endpoint: ep}); err != nil {
		t.Fatalf("enabled again: %v", err)
	}
}

// TestEndpointRateLimit: over WEBHOOK_ENDPOINT_RATE, a delivery waits for
// a slot of its own without spending a retry, and gets it when it comes
// back; another endpoint is not held up.
func TestEndpointRateLimit(t *testing.T) {
	cfg := testEndpointConfig
	cfg.Rate, cfg.Burst = 1, 1
	f := newFixture(t, cfg)
	ep, _ := f.createEndpoint(t, "/limited")
	other, _ := f.createEndpoint(t, "/other")
	if err := f.deliver("ntf_1", WebhookPart{Endpoint: ep}); err != nil {
		t.Fatal(err)
	}
	err := f.deliver("ntf_2", WebhookPart{Endpoint: ep})
	wait, ok := retry.RetryAfter(err)
	if !ok || wait != time.Second-rateHold || retry.IsPermanent(err) {
		t.Fatalf("second delivery in the same second: %v (wait %v), want a deferral of %v", err, wait, time.Second-rateHold)
	}
	if err := f.deliver("ntf_3", WebhookPart{Endpoint: other}); err != nil {
		t.Errorf("another endpoint: %v, want it delivered", err)
	}
	f.clock.advance(time.Second)
	if err := f.deliver("ntf_2", WebhookPart{Endpoint: ep}); err != nil {
		t.Errorf("back on its slot: %v, want it delivered", err)
	}
	if got := len(f.recv.deliveries("/limited")); got != 2 {
		t.Errorf("the limited endpoint got %d deliveries, want 2", got)
	}
	bad := testEndpointConfig
	bad.Rate, bad.Burst = 5, 0
	if err := bad.check(); err == nil || !strings.Contains(err.Error(), `WEBHOOK_ENDPOINT_BURST="0"`) {
		t.Errorf("a burst of 0: %v, want an error naming WEBHOOK_ENDPOINT_BURST", err)
	}
}

// TestBareURLHostCap runs a pool of workers over a backlog of copies to a
// slow host, then one copy to another host: the slow host holds no more
// workers than its cap, its other copies are deferred to come back later,
// and the other host's copy is delivered while the slow host's requests
// are still held.
func TestBareURLHostCap(t *testing.T) {
	const limit, workers, backlog = 2, 4, 6
	release := make(chan struct{})
	var releaseOnce sync.Once
	var slowGot atomic.Int32
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		slowGot.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	// Before the server closes, which waits for its handlers.
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	// Another host: another loopback address, not another port.
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		testenv.Unavailable(t, "no second loopback address to serve another host on: %v", err)
	}
	fastGot := make(chan struct{}, 1)
	fast := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { fastGot <- struct{}{} }))
	fast.Listener.Close()
	fast.Listener = ln
	fast.Start()
	t.Cleanup(fast.Close)

	sig, err := webhooks.NewSigner(globalSecret)
	if err != nil {
		t.Fatal(err)
	}
	s := webhooks.NewSender(webhooks.Config{Timeout: time.Minute, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, sig)
	noStore := func(context.Context) (endpointStore, error) { return nil, errors.New("bare URLs need no store") }
	w := newWebhookSender(s, EndpointConfig{Concurrency: limit, Failures: 2, Cooldown: time.Minute}, noStore, EndpointCacheTTL, time.Now)

	type job struct{ id, url string }
	jobs := make(chan job)
	results := make(chan error, backlog+1)
	for range workers {
		go func() {
			for j := range jobs {
				results <- w.deliver(context.Background(), j.id, &WebhookPart{URL: j.url, Payload: json.RawMessage(`{}`)})
			}
		}()
	}
	go func() {
		for i := range backlog {
			jobs <- job{fmt.Sprintf("ntf_%d", i), slow.URL + "/hang"}
		}
		jobs <- job{"ntf_fast", fast.URL + "/ok"}
		close(jobs)
	}()

	select {
	case <-fastGot:
	case <-time.After(30 * time.Second):
		t.Fatalf("the other host's copy was not delivered while the slow host held %d requests: it waits behind the slow host's backlog", slowGot.Load())
	}
	if n := slowGot.Load(); n != limit {
		t.Errorf("the slow host holds %d requests, want its cap of %d", n, limit)
	}
	// Every copy but the slow host's held ones ends before they are
	// released: each over the cap is deferred at once, whichever worker
	// took it last.
	var ended []error
	for len(ended) < backlog-limit+1 {
		select {
		case err := <-results:
			ended = append(ended, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("%d copies ended while the slow host held its cap, want %d", len(ended), backlog-limit+1)
		}
	}
	releaseOnce.Do(func() { close(release) })
	for range limit {
		ended = append(ended, <-results)
	}
	var delivered, deferred int
	for _, err := range ended {
		var d *Deferred
		switch {
		case err == nil:
			delivered++
		case errors.As(err, &d):
			deferred++
			if wait, ok := retry.RetryAfter(err); !ok || wait <= 0 || retry.IsPermanent(err) || !strings.HasPrefix(d.Target, "host 127.0.0.1") {
				t.Errorf("deferred copy: %v, want a wait for host 127.0.0.1 that spends no retry", err)
			}
		default:
			t.Errorf("copy failed: %v", err)
		}
	}
	if delivered != limit+1 || deferred != backlog-limit {
		t.Errorf("%d delivered, %d deferred; want %d delivered (the cap and the other host's) and %d deferred", delivered, deferred, limit+1, backlog-limit)
	}
	// The slow host's line is kept while its deferred copies may come
	// back for their turns; nothing is kept of a host once no copy to it
	// is in flight and its line is long due.
	w.hosts.mu.Lock()
	left := len(w.hosts.circuits)
	w.hosts.mu.Unlock()
	if left != 1 {
		t.Errorf("%d hosts tracked after every copy ended, want the slow host's line", left)
	}
	w.hosts.now = func() time.Time { return time.Now().Add(2 * time.Minute) }
	if err := w.deliver(context.Background(), "ntf_2", &WebhookPart{URL: fast.URL + "/ok", Payload: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	w.hosts.mu.Lock()
	left = len(w.hosts.circuits)
	w.hosts.mu.Unlock()
	if left != 0 {
		t.Errorf("%d hosts still tracked after every copy ended and the line was long due", left)
	}
}

// TestBareURLHostConcurrency: WEBHOOK_HOST_CONCURRENCY caps the bare
// URLs' hosts apart from the endpoints. With a cap of one per host (and
// four per endpoint), a second copy to a host while its first is in
// flight is deferred, spending no retry, whatever port it names, and a
// copy to another host goes at once.
func TestBareURLHostConcurrency(t *testing.T) {
	release := make(chan struct{})
	var releaseOnce sync.Once
	held := make(chan struct{}, 1)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case held <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	// The same host on another port.
	samePort := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(samePort.Close)
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		testenv.Unavailable(t, "no second loopback address to serve another host on: %v", err)
	}
	other := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	other.Listener.Close()
	other.Listener = ln
	other.Start()
	t.Cleanup(other.Close)

	sig, err := webhooks.NewSigner(globalSecret)
	if err != nil {
		t.Fatal(err)
	}
	s := webhooks.NewSender(webhooks.Config{Timeout: time.Minute, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, sig)
	noStore := func(context.Context) (endpointStore, error) { return nil, errors.New("bare URLs need no store") }
	w := newWebhookSender(s, EndpointConfig{Concurrency: 4, HostConcurrency: 1, Failures: 2, Cooldown: time.Minute}, noStore, EndpointCacheTTL, time.Now)
	// A bound on each delivery, so that a copy let through to the held
	// host fails the test instead of hanging it.
	deliver := func(id, url string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return w.deliver(ctx, id, &WebhookPart{URL: url, Payload: json.RawMessage(`{}`)})
	}

	first := make(chan error, 1)
	go func() { first <- deliver("ntf_1", slow.URL+"/hang") }()
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("the first copy never reached its host")
	}
	for _, c := range []struct{ name, id, url string }{
		{"the same host", "ntf_2", slow.URL + "/hang"},
		{"the same host on another port", "ntf_3", samePort.URL + "/ok"},
	} {
		err := deliver(c.id, c.url)
		var d *Deferred
		wait, ok := retry.RetryAfter(err)
		if !errors.As(err, &d) || !ok || wait <= 0 || retry.IsPermanent(err) || d.Target != "host 127.0.0.1" {
			t.Errorf("%s while a copy is in flight: %v, want a deferral for host 127.0.0.1 that spends no retry", c.name, err)
		}
	}
	if err := deliver("ntf_4", other.URL+"/ok"); err != nil {
		t.Errorf("another host while the first holds its cap: %v, want it delivered", err)
	}
	releaseOnce.Do(func() { close(release) })
	if err := <-first; err != nil {
		t.Errorf("the first copy: %v", err)
	}
}

// TestHostConcurrencyChecked: a negative WEBHOOK_HOST_CONCURRENCY is
// refused, naming the variable and what it takes.
func TestHostConcurrencyChecked(t *testing.T) {
	cfg := testEndpointConfig
	cfg.HostConcurrency = -1
	err := cfg.check()
	if err == nil || !strings.Contains(err.Error(), "WEBHOOK_HOST_CONCURRENCY") || !strings.Contains(err.Error(), "0 for WEBHOOK_ENDPOINT_CONCURRENCY") {
		t.Errorf("check = %v, want an error naming WEBHOOK_HOST_CONCURRENCY and what it takes", err)
	}
}
