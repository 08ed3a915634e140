package bench

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/webhooks"
)

// The isolation targets: with a sick endpoint present, the healthy
// endpoint's p99 stays within IsolationP99Target times, and its throughput
// at least IsolationThroughputTarget times, what they are without it.
const (
	IsolationP99Target        = 2.0
	IsolationThroughputTarget = 0.9
)

// IsolationOptions sizes an isolation measurement; zero fields take the
// defaults below.
type IsolationOptions struct {
	// Workers is the number of deliveries in flight at once, shared by
	// both endpoints as a webhook worker's are (16).
	Workers int
	// SickShare is the fraction of the deliveries that name the sick
	// endpoint, when it is present (0.5).
	SickShare float64
	// HealthyDelay is how long the healthy receiver takes to answer
	// (5ms).
	HealthyDelay time.Duration
	// Timeout is WEBHOOK_TIMEOUT: how long a delivery waits for the sick
	// receiver, which never answers (2s).
	Timeout time.Duration
	// Warmup runs each scenario before it is measured, long enough for
	// the breaker to open (Timeout + 1s).
	Warmup time.Duration
	// Duration is how long each scenario is measured (8s).
	Duration time.Duration
}

func (o IsolationOptions) withDefaults() IsolationOptions {
	if o.Workers <= 0 {
		o.Workers = 16
	}
	if o.SickShare <= 0 || o.SickShare >= 1 {
		o.SickShare = 0.5
	}
	if o.HealthyDelay <= 0 {
		o.HealthyDelay = 5 * time.Millisecond
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	if o.Warmup <= 0 {
		o.Warmup = o.Timeout + time.Second
	}
	if o.Duration <= 0 {
		o.Duration = 8 * time.Second
	}
	return o
}

// IsolationFigures are the healthy endpoint's figures in one scenario.
type IsolationFigures struct {
	// Latency is from a delivery's arrival at the worker (its prefetch
	// buffer) to the end of its send.
	Latency Latency `json:"latency"`
	// Throughput is healthy deliveries per second.
	Throughput float64 `json:"throughput_per_s"`
	// Delivered, Deferred and Failed count the healthy deliveries by
	// outcome; SickSent counts the deliveries to the sick endpoint.
	Delivered int `json:"delivered"`
	Deferred  int `json:"deferred"`
	Failed    int `json:"failed"`
	SickSent  int `json:"sick_sent"`
	// SickReached counts the requests that reached the sick endpoint in
	// the measured window: with the breaker, only its probes.
	SickReached int `json:"sick_reached"`
}

// isolationCooldown is how long the breaker holds an open circuit before
// its first probe (WEBHOOK_BREAKER_COOLDOWN, its default).
const isolationCooldown = 5 * time.Second

// IsolationResult compares the healthy endpoint's figures with the sick
// one absent, present with the breaker, and present without it.
type IsolationResult struct {
	Options   IsolationOptions `json:"options"`
	Absent    IsolationFigures `json:"absent"`
	Breaker   IsolationFigures `json:"breaker"`
	NoBreaker IsolationFigures `json:"no_breaker"`
	// The ratios to Absent: p99 (lower is better) and throughput (higher
	// is better).
	BreakerP99Ratio          float64 `json:"breaker_p99_ratio"`
	BreakerThroughputRatio   float64 `json:"breaker_throughput_ratio"`
	NoBreakerP99Ratio        float64 `json:"no_breaker_p99_ratio"`
	NoBreakerThroughputRatio float64 `json:"no_breaker_throughput_ratio"`
	// BreakerMeetsTargets and NoBreakerMeetsTargets say whether both
	// ratios are within the targets.
	BreakerMeetsTargets   bool `json:"breaker_meets_targets"`
	NoBreakerMeetsTargets bool `json:"no_breaker_meets_targets"`
}

// Isolation measures how well the webhook channel keeps a sick endpoint
// from slowing a healthy one. It runs the channel's real sender (as
// `relay worker webhook` opens it, on a SQLite history store in a
// temporary directory) against two local receivers, one answering after
// HealthyDelay and one never answering, with Workers deliveries in flight
// fed from a prefetch buffer of the same size, as a worker's consumer is.
// The per-endpoint cap is set to Workers, so that only the breaker is
// compared. Three scenarios: the sick endpoint absent, present with the
// breaker (WEBHOOK_BREAKER_FAILURES=5), present without it (0).
func Isolation(ctx context.Context, opts IsolationOptions) (IsolationResult, error) {
	opts = opts.withDefaults()
	res := IsolationResult{Options: opts}
	dir, err := os.MkdirTemp("", "relay-bench-isolation-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	st, err := store.Open(ctx, filepath.Join(dir, "history.db"))
	if err != nil {
		return res, fmt.Errorf("open history: %w", err)
	}
	defer st.Close()

	delay := opts.HealthyDelay
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
		}
	}))
	defer healthy.Close()
	stop := make(chan struct{})
	var hitsMu sync.Mutex
	var hits []time.Time
	reached := func(from, to time.Time) int {
		hitsMu.Lock()
		defer hitsMu.Unlock()
		n := 0
		for _, at := range hits {
			if !at.Before(from) && !at.After(to) {
				n++
			}
		}
		return n
	}
	sick := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hitsMu.Lock()
		hits = append(hits, time.Now())
		hitsMu.Unlock()
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	defer sick.Close()
	defer close(stop) // before sick.Close, which waits for its handlers

	for _, sc := range []struct {
		out      *IsolationFigures
		sick     bool
		failures int
	}{
		{&res.Absent, false, 5},
		{&res.Breaker, true, 5},
		{&res.NoBreaker, true, 0},
	} {
		f, err := isolationScenario(ctx, opts, dir, st, healthy.URL, sick.URL, reached, sc.sick, sc.failures)
		if err != nil {
			return res, err
		}
		*sc.out = f
	}
	ratios := func(f IsolationFigures) (p99, tput float64) {
		if res.Absent.Latency.P99 > 0 {
			p99 = float64(f.Latency.P99) / float64(res.Absent.Latency.P99)
		}
		if res.Absent.Throughput > 0 {
			tput = f.Throughput / res.Absent.Throughput
		}
		return p99, tput
	}
	res.BreakerP99Ratio, res.BreakerThroughputRatio = ratios(res.Breaker)
	res.NoBreakerP99Ratio, res.NoBreakerThroughputRatio = ratios(res.NoBreaker)
	meets := func(p99, tput float64) bool {
		return p99 > 0 && p99 <= IsolationP99Target && tput >= IsolationThroughputTarget
	}
	res.BreakerMeetsTargets = meets(res.BreakerP99Ratio, res.BreakerThroughputRatio)
	res.NoBreakerMeetsTargets = meets(res.NoBreakerP99Ratio, res.NoBreakerThroughputRatio)
	return res, nil
}

// isolationDelivery is one delivery waiting in the prefetch buffer.
type isolationDelivery struct {
	n       *notification.Notification
	sick    bool
	arrived time.Time
}

// isolationScenario runs one scenario with a fresh sender and fresh
// endpoints, so no circuit carries over.
func isolationScenario(ctx context.Context, opts IsolationOptions, dir string, st *store.Store,
	healthyURL, sickURL string, reached func(from, to time.Time) int, withSick bool, failures int) (IsolationFigures, error) {
	healthyID, err := createBenchEndpoint(ctx, st, healthyURL+"/hook")
	if err != nil {
		return IsolationFigures{}, err
	}
	sickID, err := createBenchEndpoint(ctx, st, sickURL+"/hook")
	if err != nil {
		return IsolationFigures{}, err
	}
	env := map[string]string{
		"WEBHOOK_SECRET": webhooks.NewSecret(), "WEBHOOK_TIMEOUT": opts.Timeout.String(),
		"WEBHOOK_ALLOW_CIDRS":          channel.DemoAllowCIDRs,
		"WEBHOOK_ENDPOINT_CONCURRENCY": strconv.Itoa(opts.Workers),
		"WEBHOOK_BREAKER_FAILURES":     strconv.Itoa(failures),
		"WEBHOOK_BREAKER_COOLDOWN":     isolationCooldown.String(),
	}
	// The worker's store is the one the endpoints were created in.
	shared := func(context.Context) (*store.Store, error) { return st, nil }
	send, closeSend, err := channel.Webhook.Open(func(k string) string { return env[k] }, shared)
	if err != nil {
		return IsolationFigures{}, fmt.Errorf("open the webhook sender: %w", err)
	}
	defer closeSend()

	parts := map[bool]json.RawMessage{}
	for isSick, id := range map[bool]string{false: healthyID, true: sickID} {
		p, err := json.Marshal(channel.WebhookPart{Endpoint: id, Payload: json.RawMessage(`{"bench":"isolation"}`)})
		if err != nil {
			return IsolationFigures{}, err
		}
		parts[isSick] = p
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	queue := make(chan isolationDelivery, opts.Workers) // the prefetch buffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Deliveries in a fixed pattern: SickShare of them to the sick
		// endpoint, spread evenly.
		var owed float64
		for i := 0; ; i++ {
			isSick := false
			if withSick {
				owed += opts.SickShare
				if owed >= 1 {
					owed--
					isSick = true
				}
			}
			n := &notification.Notification{V: 1, ID: "ntf_bench" + strconv.Itoa(i), Channel: "webhook", CreatedAt: time.Now(),
				Parts: map[string]json.RawMessage{"webhook": parts[isSick]}}
			select {
			case queue <- isolationDelivery{n: n, sick: isSick, arrived: time.Now()}:
			case <-ctx.Done():
				return
			}
		}
	}()

	type result struct {
		sick     bool
		err      error
		arrived  time.Time
		finished time.Time
	}
	var mu sync.Mutex
	var results []result
	for range opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				var d isolationDelivery
				select {
				case d = <-queue:
				case <-ctx.Done():
					return
				}
				err := send(ctx, d.n)
				r := result{sick: d.sick, err: err, arrived: d.arrived, finished: time.Now()}
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
			}
		}()
	}

	start := time.Now().Add(opts.Warmup)
	end := start.Add(opts.Duration)
	t := time.NewTimer(time.Until(end))
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	err = ctx.Err()
	cancel()
	wg.Wait()
	if err != nil {
		return IsolationFigures{}, err
	}

	var f IsolationFigures
	var lat []time.Duration
	for _, r := range results {
		if r.finished.Before(start) || r.finished.After(end) {
			continue
		}
		var deferred *channel.Deferred
		switch {
		case r.sick:
			f.SickSent++
		case r.err == nil:
			f.Delivered++
			lat = append(lat, r.finished.Sub(r.arrived))
		case errors.As(r.err, &deferred):
			f.Deferred++
		default:
			f.Failed++
		}
	}
	f.Latency = Summarize(lat)
	f.Throughput = PerSecond(f.Delivered, opts.Duration)
	f.SickReached = reached(start, end)
	return f, nil
}

var benchIDEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// createBenchEndpoint stores an enabled endpoint posting to url.
func createBenchEndpoint(ctx context.Context, st *store.Store, url string) (string, error) {
	return createBenchEndpointAs(ctx, st, newBenchEndpointID(), "", url)
}

// newBenchEndpointID is a new endpoint id, as the API makes them.
func newBenchEndpointID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return channel.EndpointIDPrefix + strings.ToLower(benchIDEncoding.EncodeToString(b[:]))
}

// createBenchEndpointAs is createBenchEndpoint with the id and the tenant
// ("" for the default tenant) given.
func createBenchEndpointAs(ctx context.Context, st *store.Store, id, tenant, url string) (string, error) {
	e := store.Endpoint{ID: id, Tenant: tenant, URL: url, Description: "bench isolation", Enabled: true,
		Secret: store.Secret(webhooks.NewSecret()), CreatedAt: time.Now(), UpdatedAt: time.Now()}
	if err := st.CreateEndpoint(ctx, e); err != nil {
		return "", fmt.Errorf("create endpoint %s: %w", url, err)
	}
	return id, nil
}

// IsolationMarkdown renders r as a table, with the targets.
func IsolationMarkdown(r IsolationResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Healthy endpoint (answers in %s) beside a sick one (never answers; WEBHOOK_TIMEOUT=%s), %d deliveries in flight, %.0f%% to the sick one when present; %s measured after %s of warm-up.\n\n",
		r.Options.HealthyDelay, r.Options.Timeout, r.Options.Workers, r.Options.SickShare*100, r.Options.Duration, r.Options.Warmup)
	b.WriteString("| scenario | healthy p50 | healthy p99 | healthy/s | p99 ratio | throughput ratio | within targets |\n|---|---|---|---|---|---|---|\n")
	row := func(name string, f IsolationFigures, p99, tput string, ok string) {
		fmt.Fprintf(&b, "| %s | %s | %s | %.0f | %s | %s | %s |\n", name, f.Latency.P50.Round(10*time.Microsecond),
			f.Latency.P99.Round(10*time.Microsecond), f.Throughput, p99, tput, ok)
	}
	yes := map[bool]string{true: "yes", false: "no"}
	row("(a) sick absent", r.Absent, "1", "1", "")
	row("(b) sick present, breaker", r.Breaker, fmt.Sprintf("%.2f", r.BreakerP99Ratio), fmt.Sprintf("%.2f", r.BreakerThroughputRatio), yes[r.BreakerMeetsTargets])
	row("(c) sick present, no breaker", r.NoBreaker, fmt.Sprintf("%.2f", r.NoBreakerP99Ratio), fmt.Sprintf("%.2f", r.NoBreakerThroughputRatio), yes[r.NoBreakerMeetsTargets])
	fmt.Fprintf(&b, "\nTargets: p99 within %g× and throughput at least %g× of (a).\n", IsolationP99Target, IsolationThroughputTarget)
	return b.String()
}
