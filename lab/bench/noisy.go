package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/config"
	"github.com/relay-demo/relay/internal/events"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/services/api"
	"github.com/relay-demo/relay/services/retrier"
	"github.com/relay-demo/relay/services/worker"
	"github.com/relay-demo/relay/webhooks"
)

// NoisyP99Target and NoisyThroughputTarget are the noisy-neighbour
// figure's goals: B's p99 while A floods within twice B's p99 alone, and
// A's throughput beside B at least 0.9 times A's alone.
const (
	NoisyP99Target        = 2.0
	NoisyThroughputTarget = 0.9
)

// NoisyReceivers are the ways the noisy figure names its two receivers:
// as two registered endpoints of one tenant, as bare URLs of two hosts,
// and as two endpoints of two tenants, each posting with its own token.
var NoisyReceivers = []string{"endpoints", "hosts", "tenants"}

// noisyReceiversLabel is how the report names a row's receivers.
func noisyReceiversLabel(receivers string) string {
	if receivers == "tenants" {
		return "tenants (two tenants' endpoints)"
	}
	return receivers
}

// noisyTenant is one tenant of the tenants row: its name, in
// API_TENANT_TOKENS, and its bearer token.
type noisyTenant struct{ name, token string }

// noisyTenants are A's tenant and B's in the tenants row.
var noisyTenants = [2]noisyTenant{
	{"acme", "bench-acme-token-0123456789abcdef"},
	{"beta", "bench-beta-token-0123456789abcdef"},
}

// noisyWait is how long after its window a scenario waits for B's last
// webhooks; what has not arrived by then counts as not arrived.
const noisyWait = 2 * time.Minute

// NoisyOptions sizes the noisy-neighbour figure; zero fields take the
// defaults below.
type NoisyOptions struct {
	// Flood is how many webhooks A posts at once (20,000), in batches of
	// maxBatch.
	Flood int `json:"flood"`
	// SlowDelay is how long A's receiver takes to answer (50ms).
	SlowDelay time.Duration `json:"slow_delay_ns"`
	// Every is how often B posts one webhook (100ms), to a receiver that
	// answers at once.
	Every time.Duration `json:"every_ns"`
	// Window is how long B posts, and A's deliveries are counted, in each
	// scenario (15s).
	Window time.Duration `json:"window_ns"`
	// Lanes are the WORK_LANES settings compared (1, 8).
	Lanes []int `json:"lanes"`
	// Receivers are the ways of naming the receivers compared, from
	// NoisyReceivers: as registered endpoints of one tenant, as bare URLs
	// on their hosts, as endpoints of two tenants (endpoints, hosts).
	Receivers []string `json:"receivers"`
	// QueueType is the queues' type (quorum).
	QueueType retry.QueueType `json:"queue_type"`
}

func (o NoisyOptions) withDefaults() NoisyOptions {
	if o.Flood <= 0 {
		o.Flood = 20000
	}
	if o.SlowDelay <= 0 {
		o.SlowDelay = 50 * time.Millisecond
	}
	if o.Every <= 0 {
		o.Every = 100 * time.Millisecond
	}
	if o.Window <= 0 {
		o.Window = 15 * time.Second
	}
	if len(o.Lanes) == 0 {
		o.Lanes = []int{1, 8}
	}
	if len(o.Receivers) == 0 {
		o.Receivers = []string{"endpoints", "hosts"}
	}
	if o.QueueType == "" {
		o.QueueType = retry.Quorum
	}
	return o
}

// NoisyRow is one way of naming the two receivers (as two endpoints, as
// bare URLs of two hosts, or as two tenants' endpoints) with one
// WORK_LANES.
type NoisyRow struct {
	Receivers string `json:"receivers"`
	Lanes     int    `json:"lanes"`
	// SameLane is true when A's and B's copies hashed to one lane.
	SameLane bool `json:"same_lane"`
	// BAlone and BFlood are B's latency, from the start of its POST to its
	// arrival at its receiver, alone and while A floods.
	BAlone Latency `json:"b_alone"`
	BFlood Latency `json:"b_flood"`
	// BAccept is how long B's POSTs took while A floods: the part of
	// BFlood spent before the API answered.
	BAccept Latency `json:"b_accept_flood"`
	// BDuringPosts and BAfterPosts split BFlood by when B posted: while
	// the API was still taking A's POSTs, and once it had answered them
	// all, when only A's backlog remains. APosts is how long that took.
	BDuringPosts Latency       `json:"b_during_posts"`
	BAfterPosts  Latency       `json:"b_after_posts"`
	APosts       time.Duration `json:"a_posts_ns"`
	// AfterRatio is BAfterPosts.P99 ÷ BAlone.P99: what A's backlog alone
	// costs B.
	AfterRatio float64 `json:"after_ratio"`
	// BMissing counts B's webhooks that had not arrived noisyWait after
	// the window (they count in no latency).
	BMissing int `json:"b_missing"`
	// AAlone and ABeside are A's deliveries a second in the window, alone
	// and beside B.
	AAlone  float64 `json:"a_alone_per_s"`
	ABeside float64 `json:"a_beside_per_s"`
	// P99Ratio is BFlood.P99 ÷ BAlone.P99; ThroughputRatio ABeside ÷
	// AAlone.
	P99Ratio        float64 `json:"p99_ratio"`
	ThroughputRatio float64 `json:"throughput_ratio"`
	Meets           bool    `json:"meets_targets"`
}

// NoisyResult is the figure.
type NoisyResult struct {
	Options NoisyOptions `json:"options"`
	// WorkerConcurrency and EndpointConcurrency are the webhook worker's
	// CONCURRENCY and WEBHOOK_ENDPOINT_CONCURRENCY in the run: the bench
	// sets neither, so they are the worker's defaults.
	WorkerConcurrency   int        `json:"worker_concurrency"`
	EndpointConcurrency int        `json:"endpoint_concurrency"`
	Rows                []NoisyRow `json:"rows"`
}

// noisyWorkerSettings reads the webhook worker's CONCURRENCY and
// WEBHOOK_ENDPOINT_CONCURRENCY as the worker reads them from getenv.
func noisyWorkerSettings(getenv func(string) string) (workers, perEndpoint int, err error) {
	var wc worker.Config
	if err := config.Parse(getenv, &wc); err != nil {
		return 0, 0, err
	}
	var ec channel.EndpointConfig
	if err := config.Parse(getenv, &ec); err != nil {
		return 0, 0, err
	}
	return wc.Concurrency, ec.Concurrency, nil
}

// Noisy measures how far a receiver with a backlog holds back another's
// webhooks. Per row, relay's API, a retrier and a webhook worker
// (`relay worker webhook`, CONCURRENCY 8, WEBHOOK_ENDPOINT_CONCURRENCY 4)
// run in this process on a SQLite history, against two local receivers:
// A answers after SlowDelay, B at once. Three scenarios, each on a
// topology of its own: B alone (one POST every Every, for Window); A alone
// (Flood webhooks posted at once in batches, its deliveries counted for
// Window); both (A's flood, and B posting meanwhile).
func (b *bench) Noisy(ctx context.Context, opts NoisyOptions) (NoisyResult, error) {
	opts = opts.withDefaults()
	res := NoisyResult{Options: opts}
	for _, receivers := range opts.Receivers {
		if !slices.Contains(NoisyReceivers, receivers) {
			return res, fmt.Errorf("receivers %q: want one of %s", receivers, strings.Join(NoisyReceivers, ", "))
		}
	}
	// The scenarios' environments set neither variable: the worker's
	// defaults are what every scenario ran with.
	var err error
	if res.WorkerConcurrency, res.EndpointConcurrency, err = noisyWorkerSettings(func(string) string { return "" }); err != nil {
		return res, err
	}
	for _, receivers := range opts.Receivers {
		for _, lanes := range opts.Lanes {
			row := NoisyRow{Receivers: receivers, Lanes: lanes}
			for _, sc := range []struct {
				a, b bool
			}{{false, true}, {true, false}, {true, true}} {
				b.progress("noisy: %s, WORK_LANES=%d, A flooding %v, B posting %v", receivers, lanes, sc.a, sc.b)
				out, err := b.noisyScenario(ctx, opts, receivers, lanes, sc.a, sc.b)
				if cerr := b.janitor.clean(); cerr != nil {
					err = errors.Join(err, cerr)
				}
				if err != nil {
					return res, fmt.Errorf("%s, %d lanes: %w", receivers, lanes, err)
				}
				row.SameLane = out.sameLane
				switch {
				case sc.a && sc.b:
					row.BFlood, row.BAccept, row.BMissing, row.ABeside = out.b, out.bAccept, out.bMissing, out.a
					row.BDuringPosts, row.BAfterPosts, row.APosts = out.bDuring, out.bAfter, out.aPosts
				case sc.a:
					row.AAlone = out.a
				default:
					row.BAlone = out.b
				}
			}
			if row.BAlone.P99 > 0 {
				row.P99Ratio = float64(row.BFlood.P99) / float64(row.BAlone.P99)
			}
			if row.BAlone.P99 > 0 && row.BAfterPosts.N > 0 {
				row.AfterRatio = float64(row.BAfterPosts.P99) / float64(row.BAlone.P99)
			}
			if row.AAlone > 0 {
				row.ThroughputRatio = row.ABeside / row.AAlone
			}
			row.Meets = row.BMissing == 0 && row.P99Ratio > 0 && row.P99Ratio <= NoisyP99Target && row.ThroughputRatio >= NoisyThroughputTarget
			res.Rows = append(res.Rows, row)
		}
	}
	return res, nil
}

// noisyOutcome is one scenario's figures.
type noisyOutcome struct {
	b       Latency
	bAccept Latency
	// bDuring and bAfter split b by whether B posted before or after the
	// API had answered all of A's POSTs, which took aPosts.
	bDuring, bAfter Latency
	aPosts          time.Duration
	bMissing        int
	a               float64
	sameLane        bool
}

// receiver counts the webhooks that reach it, each body {"who", "seq"}.
type receiver struct {
	delay time.Duration
	srv   *http.Server
	url   string
	mu    sync.Mutex
	at    map[int]time.Time
}

func startReceiver(host string, delay time.Duration) (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{delay: delay, at: map[int]time.Time{}}
	r.url = "http://" + net.JoinHostPort(host, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)) + "/hook"
	r.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body struct {
			Seq int `json:"seq"`
		}
		_ = json.NewDecoder(io.LimitReader(req.Body, 4096)).Decode(&body)
		now := time.Now()
		if r.delay > 0 {
			time.Sleep(r.delay) // the receiver's own work
		}
		r.mu.Lock()
		if _, ok := r.at[body.Seq]; !ok {
			r.at[body.Seq] = now
		}
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// arrivedBetween counts the webhooks that arrived in [from, to).
func (r *receiver) arrivedBetween(from, to time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, at := range r.at {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n
}

func (r *receiver) arrival(seq int) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.at[seq]
	return at, ok
}

// noisyScenario runs one scenario on a topology of its own, with the
// receivers named as receivers says (one of NoisyReceivers).
func (b *bench) noisyScenario(ctx context.Context, opts NoisyOptions, receivers string, lanes int, flood, steady bool) (out noisyOutcome, err error) {
	asEndpoints := receivers != "hosts"
	// A and B post with one token, and own their endpoints as the default
	// tenant; in the tenants row each is a tenant of its own.
	aTenant, bTenant := noisyTenant{token: benchToken}, noisyTenant{token: benchToken}
	if receivers == "tenants" {
		aTenant, bTenant = noisyTenants[0], noisyTenants[1]
	}
	// Bare URLs of two hosts: 127.0.0.1 and localhost are one machine
	// and two hosts to relay. Endpoints may share one.
	aRecv, err := startReceiver("127.0.0.1", opts.SlowDelay)
	if err != nil {
		return out, err
	}
	defer aRecv.srv.Close()
	bHost := "localhost"
	if asEndpoints {
		bHost = "127.0.0.1"
	}
	bRecv, err := startReceiver(bHost, 0)
	if err != nil {
		return out, err
	}
	defer bRecv.srv.Close()
	dir, err := os.MkdirTemp("", "relay-bench-noisy-")
	if err != nil {
		return out, err
	}
	defer os.RemoveAll(dir)

	prefix := fmt.Sprintf("%snoisy.%d.", b.prefix, time.Now().UnixNano())
	env := map[string]string{
		"AMQP_URL": b.url, "TOPOLOGY_PREFIX": prefix, "QUEUE_TYPE": string(opts.QueueType), "MANAGEMENT_URL": b.mgmtURL,
		"WORK_LANES": strconv.Itoa(lanes), "HTTP_ADDR": "127.0.0.1:0", "API_TOKENS": benchToken, "DATA_DIR": dir,
		"SHUTDOWN_TIMEOUT": "5s", "LOG_LEVEL": "error",
		"WEBHOOK_SECRET": webhooks.NewSecret(), "WEBHOOK_ALLOW_CIDRS": channel.DemoAllowCIDRs,
	}
	if receivers == "tenants" {
		var pairs []string
		for _, t := range noisyTenants {
			pairs = append(pairs, t.name+":"+t.token)
		}
		env["API_TENANT_TOKENS"] = strings.Join(pairs, ",")
	}
	getenv := func(k string) string { return env[k] }
	cfg, err := api.LoadConfig(getenv)
	if err != nil {
		return out, err
	}
	topo, err := cfg.Topology(channel.Routes())
	if err != nil {
		return out, err
	}
	lane := func(key string) string { return topo.Lane("webhook", key).Queue }

	aPart := map[string]any{"url": aRecv.url}
	bPart := map[string]any{"url": bRecv.url}
	aKey, bKey := "host 127.0.0.1", "host "+bHost
	if asEndpoints {
		// A's id at random; B's, with more than one lane, one whose lane
		// is not A's: the figure compares lanes, and two receivers in one
		// lane are the one-lane row's case (one pair in WORK_LANES meets
		// it by chance).
		aKey, bKey = newBenchEndpointID(), newBenchEndpointID()
		for tries := 1; lanes > 1 && lane(bKey) == lane(aKey); tries++ {
			if tries == 1000 {
				return out, fmt.Errorf("no endpoint id out of %d falls in another of %d lanes than A's", tries, lanes)
			}
			bKey = newBenchEndpointID()
		}
		st, err := store.Open(ctx, filepath.Join(dir, "history.db"))
		if err != nil {
			return out, err
		}
		_, aerr := createBenchEndpointAs(ctx, st, aKey, aTenant.name, aRecv.url)
		_, berr := createBenchEndpointAs(ctx, st, bKey, bTenant.name, bRecv.url)
		_ = st.Close()
		if err := errors.Join(aerr, berr); err != nil {
			return out, err
		}
		aPart, bPart = map[string]any{"endpoint": aKey}, map[string]any{"endpoint": bKey}
	}
	out.sameLane = lane(aKey) == lane(bKey)
	b.janitor.topology(topo)
	b.janitor.exchange(events.ExchangeName(topo))
	b.janitor.queue(topo.Name(events.HistoryQueue))

	g := startGroup(ctx)
	runCtx, run := g.ctx, g.run
	defer func() { err = errors.Join(err, g.stop()) }()
	srv, err := api.Start(runCtx, cfg, api.EndpointsConfig{RotationGrace: api.DefaultRotationGrace}, config.Logger(io.Discard, "api"))
	if err != nil {
		return out, err
	}
	run(func(context.Context) error { return srv.Wait() })
	run(func(ctx context.Context) error { return retrier.Run(ctx, getenv, io.Discard) })
	run(func(ctx context.Context) error { return worker.Run(ctx, "webhook", getenv, io.Discard) })

	client := newClient(8)
	defer client.CloseIdleConnections()
	base := "http://" + srv.Addr()
	if err := waitReady(ctx, client, base+"/readyz"); err != nil {
		return out, err
	}
	// The first POST waits until the queues take messages, and the
	// worker until it consumes: B's first webhook, which counts nowhere.
	if err := postNoisy(ctx, client, base+"/v1/notifications", bTenant.token, webhookBody(bPart, "warm", -1)); err != nil {
		return out, err
	}
	if err := waitArrival(ctx, bRecv, -1, 30*time.Second); err != nil {
		return out, fmt.Errorf("the first webhook: %w", err)
	}

	start := time.Now()
	floodErr := make(chan error, 1)
	// floodDone is when the API had answered all of A's POSTs; set once
	// floodErr holds the flood's outcome.
	var floodDone time.Time
	if flood {
		go func() {
			err := postFlood(ctx, client, base, aTenant.token, aPart, opts.Flood)
			floodDone = time.Now()
			floodErr <- err
		}()
	} else {
		floodErr <- nil
	}
	var posted []time.Time
	var accept []time.Duration
	if steady {
		tick := time.NewTicker(opts.Every)
		for seq := 0; time.Since(start) < opts.Window; seq++ {
			posted = append(posted, time.Now())
			if err := postNoisy(ctx, client, base+"/v1/notifications", bTenant.token, webhookBody(bPart, "b", seq)); err != nil {
				tick.Stop()
				return out, fmt.Errorf("B's webhook %d: %w", seq, err)
			}
			accept = append(accept, time.Since(posted[seq]))
			select {
			case <-tick.C:
			case <-ctx.Done():
				tick.Stop()
				return out, ctx.Err()
			}
		}
		tick.Stop()
	} else {
		select {
		case <-time.After(opts.Window):
		case <-ctx.Done():
			return out, ctx.Err()
		}
	}
	end := start.Add(opts.Window)
	if flood {
		out.a = float64(aRecv.arrivedBetween(start, end)) / opts.Window.Seconds()
	}
	if steady {
		// B's webhooks get noisyWait more to arrive: behind A's backlog,
		// in one queue, they wait long.
		for seq := range posted {
			if waitArrival(ctx, bRecv, seq, time.Until(end.Add(noisyWait))) != nil {
				break
			}
		}
	}
	if err := <-floodErr; err != nil && !errors.Is(err, context.Canceled) {
		return out, fmt.Errorf("A's flood: %w", err)
	}
	if flood {
		out.aPosts = floodDone.Sub(start)
	}
	if steady {
		var lat, during, after []time.Duration
		for seq, at := range posted {
			got, ok := bRecv.arrival(seq)
			if !ok {
				out.bMissing++
				continue
			}
			lat = append(lat, got.Sub(at))
			if flood && at.Before(floodDone) {
				during = append(during, got.Sub(at))
			} else {
				after = append(after, got.Sub(at))
			}
		}
		out.b, out.bAccept = Summarize(lat), Summarize(accept)
		out.bDuring, out.bAfter = Summarize(during), Summarize(after)
	}
	return out, nil
}

// webhookBody is a POST /v1/notifications body of one webhook with payload
// {"who", "seq"}.
func webhookBody(part map[string]any, who string, seq int) []byte {
	p := map[string]any{"payload": map[string]any{"who": who, "seq": seq}}
	for k, v := range part {
		p[k] = v
	}
	body, _ := json.Marshal(map[string]any{"webhook": p})
	return body
}

// postFlood posts n webhooks to part in batches of maxBatch, four
// requests at once, with the bearer token given.
func postFlood(ctx context.Context, client *http.Client, base, token string, part map[string]any, n int) error {
	batches := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs error
	for range 4 {
		wg.Go(func() {
			for first := range batches {
				var buf bytes.Buffer
				buf.WriteString(`{"notifications":[`)
				for seq := first; seq < min(first+maxBatch, n); seq++ {
					if seq > first {
						buf.WriteByte(',')
					}
					buf.Write(webhookBody(part, "a", seq))
				}
				buf.WriteString(`]}`)
				if err := postNoisy(ctx, client, base+"/v1/notifications/batch", token, buf.Bytes()); err != nil {
					mu.Lock()
					errs = errors.Join(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for first := 0; first < n; first += maxBatch {
		select {
		case batches <- first:
		case <-ctx.Done():
		}
	}
	close(batches)
	wg.Wait()
	return errs
}

// postNoisy posts body to url with the bearer token given, and wants 202.
func postNoisy(ctx context.Context, client *http.Client, url, token string, body []byte) error {
	return posterAs(client, url, token, body)(ctx)
}

// waitArrival waits until seq has reached r, or within.
func waitArrival(ctx context.Context, r *receiver, seq int, within time.Duration) error {
	deadline := time.Now().Add(within)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, ok := r.arrival(seq); ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("webhook %d did not arrive within %s", seq, within)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// NoisyMarkdown renders r as a table, with the targets.
func NoisyMarkdown(r NoisyResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "A posts %d webhooks at once to a receiver that answers in %s; B posts one every %s to one that answers at once; %s measured per scenario, %s queues.\n\n",
		r.Options.Flood, r.Options.SlowDelay, r.Options.Every, r.Options.Window, r.Options.QueueType)
	b.WriteString("| receivers | WORK_LANES | A and B in one lane | B p50 / p99 alone | B p50 / p99 while A floods | of which the API's answer, p99 | B's p99 ÷ alone | A's POSTs answered in | B p99 while they are / after | after ÷ alone | B not arrived | A/s alone | A/s beside B | ÷ alone | targets met |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "| %s | %d | %s | %s / %s | %s / %s | %s | %.1f× | %s | %s / %s | %s | %d | %.1f | %.1f | %.2f× | %s |\n",
			noisyReceiversLabel(row.Receivers), row.Lanes, yesNo(row.SameLane),
			fmtDur(row.BAlone.P50), fmtDur(row.BAlone.P99), fmtDur(row.BFlood.P50), fmtDur(row.BFlood.P99), fmtDur(row.BAccept.P99),
			row.P99Ratio, fmtDur(row.APosts), latencyOrNone(row.BDuringPosts.P99, row.BDuringPosts.N), latencyOrNone(row.BAfterPosts.P99, row.BAfterPosts.N),
			ratioOrNone(row.AfterRatio), row.BMissing, row.AAlone, row.ABeside, row.ThroughputRatio, yesNo(row.Meets))
	}
	fmt.Fprintf(&b, "\nTargets: B's p99 while A floods at most %.0f× B's p99 alone, and A's deliveries beside B at least %.1f× A's alone.\n",
		NoisyP99Target, NoisyThroughputTarget)
	return b.String()
}

// latencyOrNone is d for a table, or "none" where no sample was taken
// (n = 0): B posted nothing in that part of the window.
func latencyOrNone(d time.Duration, n int) string {
	if n == 0 {
		return "none"
	}
	return fmtDur(d)
}

// ratioOrNone is r for a table, or "—" where it could not be reckoned.
func ratioOrNone(r float64) string {
	if r <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f×", r)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// fmtDur rounds d for a table: to 0.1 ms below a second, to 10 ms above.
func fmtDur(d time.Duration) string {
	if d < time.Second {
		return d.Round(100 * time.Microsecond).String()
	}
	return d.Round(10 * time.Millisecond).String()
}
