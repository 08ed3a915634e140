// Package bench is `relay-lab bench`: it answers "what does all this cost?"
// with figures measured in one process, back to back on one broker, each
// relay path next to the plainest amqp091-go code that does the same job.
// Because both sides run seconds apart on the same machine and broker,
// their ratio holds even where the absolute figures are noisy.
//
// The figures, for classic and quorum queues: the ingest API, one
// notification a request and in batches, against a raw confirming
// publisher; relay's consumer against a raw consume-and-ack loop; a retry
// round trip through relay's stages and with the direct hand-off against
// the broker's own dead-letter-and-TTL loop, with the broker's CPU per
// round trip; the process's and the broker's memory while messages wait
// in the delay stage of each backend; and the API's memory with idle
// dashboard event streams open and after they closed. Once a run, the
// history: how fast it stores the pipeline's events on SQLite and on
// PostgreSQL, against the worker's rate, and how fast the API reads a
// notification back from a store of a million. Every run is bounded in
// count and time, talks only to a loopback broker and database, and
// deletes everything it declared or created.
package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/relay-demo/relay/internal/config"
	"github.com/relay-demo/relay/lab/internal/unique"
	"github.com/relay-demo/relay/retry"
)

// Config is the bench command's environment.
type Config struct {
	AMQPURL string `env:"AMQP_URL" envDefault:"amqp://guest:guest@localhost:5672/" help:"an amqp:// URL of a broker on this machine"`
	// HistoryDSN is the PostgreSQL of the history figure; the bench works
	// in a schema of its own there and drops it at the end.
	HistoryDSN string `env:"HISTORY_BENCH_DSN" envDefault:"postgres://postgres@127.0.0.1:5432/test?sslmode=disable" secret:"true" help:"a postgres:// URL of a PostgreSQL on this machine"`
	// ManagementURL is the broker's management API, for the broker's
	// memory; empty: derived from AMQP_URL (same host, port 15672).
	ManagementURL string `env:"MANAGEMENT_URL" secret:"true" help:"the broker's management API with credentials, such as http://guest:guest@localhost:15672; empty: derived from AMQP_URL"`
}

// Run parses args, measures every figure and writes the report: to --out
// if given, else to stdout. Progress lines start with "# " and go to
// stdout, unless --quiet or a JSON report goes to stdout.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) (err error) {
	opts, err := ParseOptions(args, stdout)
	if err != nil {
		return err
	}
	var cfg Config
	if err := config.Parse(getenv, &cfg); err != nil {
		return err
	}
	if err := checkLoopback(cfg.AMQPURL); err != nil {
		return err
	}
	if slices.Contains(opts.Figures, "history") {
		if err := checkLoopbackDSN(cfg.HistoryDSN); err != nil {
			return err
		}
	}
	b := &bench{opts: opts, url: cfg.AMQPURL, mgmtURL: cfg.ManagementURL, historyDSN: cfg.HistoryDSN, prefix: "bench." + unique.Hex() + ".", janitor: &janitor{url: cfg.AMQPURL}}
	if !opts.Quiet && !(opts.Format == "json" && opts.Out == "") {
		b.out = stdout
	}
	defer func() {
		if cerr := b.janitor.clean(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	if opts.CPUProfile != "" {
		f, err := os.Create(opts.CPUProfile)
		if err != nil {
			return fmt.Errorf("create CPU profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("start CPU profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	report, err := b.measure(ctx, "relay-lab bench "+shellJoin(args))
	if err != nil {
		return err
	}
	if opts.MemProfile != "" {
		if err := writeHeapProfile(opts.MemProfile); err != nil {
			return err
		}
	}
	if opts.Out == "" {
		return report.Render(stdout, opts.Format)
	}
	var rendered bytes.Buffer
	if err := report.Render(&rendered, opts.Format); err != nil {
		return fmt.Errorf("render report: %w", err)
	}
	if err := b.writeReport(opts.Out, rendered.Bytes(), opts.Format == "markdown"); err != nil {
		return err
	}
	b.progress("report written to %s", opts.Out)
	return nil
}

// amqpPort is the port of an amqp:// or amqps:// URL, explicit or the
// scheme's default.
func amqpPort(raw string) int {
	u, err := url.Parse(raw)
	if err != nil {
		return 0
	}
	if p, err := strconv.Atoi(u.Port()); err == nil {
		return p
	}
	if u.Scheme == "amqps" {
		return 5671
	}
	return 5672
}

// bench is one run of the command.
type bench struct {
	opts       Options
	url        string
	mgmtURL    string // MANAGEMENT_URL; empty: derived from url
	historyDSN string // the PostgreSQL of the history figure
	prefix     string // unique to this run; every name it declares starts with it
	janitor    *janitor
	out        io.Writer // progress; nil for none
	broker     []int     // the broker's processes, for its CPU time
	// api reads the broker's memory for the memory figure; nil when the
	// management API cannot be reached, and apiNote says why.
	api      *brokerAPI
	apiNote  string
	memLimit uint64 // the broker's mem_limit, once read

	mu sync.Mutex
}

// progress writes one "# " line, when progress is wanted.
func (b *bench) progress(format string, args ...any) {
	if b.out == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	fmt.Fprintf(b.out, "# "+format+"\n", args...)
}

// side is what one side of a figure measured.
type side struct {
	N       int
	Elapsed time.Duration
	// Samples are the latencies measured, if any; Latency sums them up.
	Samples []time.Duration
	Latency Latency
	Cost    Cost
}

// Rate is the side's throughput.
func (s side) Rate() float64 { return PerSecond(s.N, s.Elapsed) }

// String writes the side's figures for a progress line.
func (s side) String() string {
	out := fmt.Sprintf("%s in %s: %s/s", thousands(int64(s.N)), s.Elapsed.Round(time.Millisecond), thousands(int64(s.Rate())))
	if s.Latency.N > 0 {
		out += fmt.Sprintf(", p50 %s, p99 %s", roundDuration(s.Latency.P50), roundDuration(s.Latency.P99))
	}
	return out
}

// roundDuration keeps three significant digits or so.
func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond)
	default:
		return d.Round(10 * time.Microsecond)
	}
}

// quiesce waits, a few seconds at most, until the broker's CPU is nearly
// idle: deleting a queue of persistent messages leaves it work to do, and
// the next run should not pay for it.
func (b *bench) quiesce(ctx context.Context) {
	if len(b.broker) == 0 {
		return
	}
	const window, idle = 200 * time.Millisecond, 40 * time.Millisecond // 20% of one core
	limit := 5 * time.Second
	if b.opts.Quick {
		limit = 500 * time.Millisecond
	}
	tick := time.NewTicker(window)
	defer tick.Stop()
	deadline := time.After(limit)
	last, ok := processCPU(b.broker)
	for ok {
		select {
		case <-ctx.Done():
			return
		case <-deadline:
			return
		case <-tick.C:
		}
		var now time.Duration
		if now, ok = processCPU(b.broker); ok && now-last <= idle {
			return
		}
		last = now
	}
}

// pair measures both sides of a figure Rounds times, alternating which
// goes first (raw, relay, relay, raw, …): see contest.
func (b *bench) pair(ctx context.Context, figure string, qt retry.QueueType, raw, relay func(context.Context) (side, error)) (relaySide, rawSide side, err error) {
	got, err := b.contest(ctx, figure, qt, []string{"raw", "relay"}, map[string]func(context.Context) (side, error){"raw": raw, "relay": relay})
	if err != nil {
		return side{}, side{}, err
	}
	return got["relay"], got["raw"], nil
}

// contest measures every side of a figure Rounds times, in order in odd
// rounds and in reverse in even ones (raw, relay, direct, direct, relay,
// raw, …) so that no side always finds the broker busy with another's
// leftovers, and a raw side measured once serves every relay side beside
// it. Each side's best rate counts, with its cost; the latency
// percentiles are over every round's samples. Everything a run declared
// is deleted before the next starts.
func (b *bench) contest(ctx context.Context, figure string, qt retry.QueueType, order []string, run map[string]func(context.Context) (side, error)) (map[string]side, error) {
	best := map[string]*side{}
	samples := map[string][]time.Duration{}
	for round := range b.opts.Rounds {
		sides := slices.Clone(order)
		if round%2 == 1 {
			slices.Reverse(sides)
		}
		for _, who := range sides {
			var s side
			err := labelled(ctx, figure+"/"+who+"/"+string(qt), func(ctx context.Context) (err error) {
				s, err = run[who](ctx)
				return err
			})
			if cerr := b.janitor.clean(); cerr != nil {
				err = errors.Join(err, cerr)
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", who, err)
			}
			b.quiesce(ctx)
			b.progress("%s: %s %s, round %d: %s", qt, figure, who, round+1, s)
			samples[who] = append(samples[who], s.Samples...)
			if best[who] == nil || s.Rate() > best[who].Rate() {
				best[who] = &s
			}
		}
	}
	out := make(map[string]side, len(best))
	for who, s := range best {
		s.Samples = samples[who]
		s.Latency = Summarize(s.Samples)
		out[who] = *s
	}
	return out, nil
}

// labelled runs fn with pprof labels naming the figure, side and queue
// type, so a CPU profile of the whole command can be cut by them
// (go tool pprof -tagfocus bench=worker/relay/classic). Goroutines that
// fn starts, connection readers included, inherit the labels.
func labelled(ctx context.Context, name string, fn func(context.Context) error) error {
	var err error
	pprof.Do(ctx, pprof.Labels("bench", name), func(ctx context.Context) { err = fn(ctx) })
	return err
}

// measure runs every figure and builds the report.
func (b *bench) measure(ctx context.Context, command string) (*Report, error) {
	started := time.Now()
	conn, err := retry.Dial(b.url, "relay-lab bench")
	if err != nil {
		return nil, err
	}
	broker := brokerVersion(conn)
	version, _ := conn.Properties["version"].(string)
	native := retry.VersionAtLeast(version, 4, 3)
	conn.Close()
	plugin, err := retry.HasPlugin(b.url)
	if err != nil {
		return nil, err
	}
	r := &Report{Machine: ThisMachine(), Broker: broker, Command: command, Prefix: b.prefix, Started: started.UTC(), Options: b.opts}
	b.progress("%s; %s, %d cores, %s; names under %s", broker, r.Machine.CPU, r.Machine.Cores, r.Machine.Go, b.prefix)
	var only bool
	b.broker, only = brokerPIDs(amqpPort(b.url))
	switch {
	case len(b.broker) == 0:
		b.progress("no beam.smp process visible: broker CPU goes unreported")
	case !only && len(b.broker) > 1:
		b.progress("%d beam.smp processes and none seen listening on the broker's port: broker CPU counts them all", len(b.broker))
	}
	// Refuse a --waiting the broker cannot hold before measuring anything.
	if b.opts.has("memory") {
		if err := b.checkRoom(ctx); err != nil {
			return nil, err
		}
	}
	if slices.Contains(b.opts.Figures, "ingest") {
		err := labelled(ctx, "ingest/http-floor", func(ctx context.Context) (err error) {
			r.HTTPFloor, err = b.httpFloor(ctx)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("net/http alone: %w", err)
		}
		b.progress("net/http alone, no broker: %s requests/s", thousands(int64(r.HTTPFloor)))
	}
	for _, qt := range b.opts.QueueTypes {
		q := string(qt)
		steps := []struct {
			groups []string // the groups of --figures the step measures
			run    func(context.Context, retry.QueueType) ([]Row, error)
		}{
			{[]string{"ingest", "ingest-batch"}, b.ingestRows},
			{[]string{"worker"}, b.workerRows},
			{[]string{"retry", "retry-direct"}, func(ctx context.Context, qt retry.QueueType) ([]Row, error) {
				return b.retryFigures(ctx, qt, plugin, native)
			}},
			{[]string{"memory"}, b.memoryRows},
			{[]string{"schedule"}, b.scheduleRows},
		}
		for _, s := range steps {
			var chosen []string
			for _, g := range s.groups {
				if b.opts.has(g) {
					chosen = append(chosen, g)
				}
			}
			if len(chosen) == 0 {
				continue
			}
			b.progress("%s: %s", q, strings.Join(chosen, ", "))
			rows, err := s.run(ctx, qt)
			// Clean up after every figure, so the next one finds the broker
			// as empty as the first did.
			if cerr := b.janitor.clean(); cerr != nil {
				err = errors.Join(err, cerr)
			}
			if err != nil {
				return nil, fmt.Errorf("%s, %s queues: %w", strings.Join(chosen, ", "), q, err)
			}
			r.Rows = append(r.Rows, rows...)
		}
	}
	// The delayed-message plugin keeps waiting messages in a table of its
	// own, whatever the queue type: its memory figure runs once.
	if b.opts.has("memory") {
		b.progress("memory (plugin)")
		rows, err := b.pluginMemoryRows(ctx, plugin)
		if cerr := b.janitor.clean(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		if err != nil {
			return nil, fmt.Errorf("memory (plugin): %w", err)
		}
		r.Rows = append(r.Rows, rows...)
	}
	// The dashboard's streams do not depend on the queue type: one run,
	// on the first.
	if slices.Contains(b.opts.Figures, "streams") {
		qt := b.opts.QueueTypes[0]
		b.progress("%s: streams", qt)
		rows, settled, err := b.streamRows(ctx, qt)
		if cerr := b.janitor.clean(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		if err != nil {
			return nil, fmt.Errorf("streams, %s queues: %w", qt, err)
		}
		r.Rows = append(r.Rows, rows...)
		r.StreamsSettled = settled
	}
	// Neither does the history: it is held against the fastest worker.
	if slices.Contains(b.opts.Figures, "history") {
		b.progress("history")
		rows, err := b.historyRows(ctx, r.Rows)
		if err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
		r.Rows = append(r.Rows, rows...)
	}
	if slices.Contains(b.opts.Figures, "history-get") {
		b.progress("history-get")
		rows, filled, err := b.historyGetRows(ctx)
		if err != nil {
			return nil, fmt.Errorf("history-get: %w", err)
		}
		r.Rows = append(r.Rows, rows...)
		r.HistoryFilled = filled
	}
	// The isolation needs no broker: the webhook sender against two
	// local receivers, one of them never answering.
	if slices.Contains(b.opts.Figures, "isolation") {
		b.progress("isolation: a healthy webhook endpoint beside one that never answers")
		opts := IsolationOptions{}
		if b.opts.Quick {
			opts = IsolationOptions{Workers: 8, Timeout: time.Second, Warmup: time.Second, Duration: time.Second}
		}
		res, err := Isolation(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("isolation: %w", err)
		}
		r.Isolation = &res
	}
	if slices.Contains(b.opts.Figures, "noisy") {
		opts := NoisyOptions{}
		if b.opts.Quick {
			// One row: the figure's machinery, not its comparison (the
			// lanes' own tests check what lanes do).
			opts = NoisyOptions{Flood: 2000, Window: 3 * time.Second, Lanes: []int{8}, Receivers: []string{"endpoints"}}
		}
		if len(b.opts.NoisyLanes) > 0 {
			opts.Lanes = b.opts.NoisyLanes
		}
		if len(b.opts.NoisyReceivers) > 0 {
			opts.Receivers = b.opts.NoisyReceivers
		}
		res, err := b.Noisy(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("noisy: %w", err)
		}
		r.Noisy = &res
	}
	if slices.Contains(b.opts.Figures, "ratelimit") {
		backends, err := rateLimitBackends(b.opts.Backends, plugin, native)
		if err != nil {
			return nil, err
		}
		for _, backend := range backends {
			opts := RateLimitOptions{Backend: backend}
			if b.opts.Quick {
				opts = RateLimitOptions{Rate: 50, Replicas: 2, Emails: 150, Backend: backend}
			}
			b.progress("ratelimit, %s: email workers sharing a limit on one mail server", backend)
			res, err := b.RateLimit(ctx, opts)
			if cerr := b.janitor.clean(); cerr != nil {
				err = errors.Join(err, cerr)
			}
			if err != nil {
				return nil, fmt.Errorf("ratelimit, %s: %w", backend, err)
			}
			r.RateLimits = append(r.RateLimits, res)
		}
	}
	if slices.Contains(b.opts.Figures, "deadletters") {
		res, err := b.DeadLetters(ctx, DeadLettersOptions{Copies: b.opts.DeadLetters})
		if cerr := b.janitor.clean(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		if err != nil {
			return nil, fmt.Errorf("deadletters: %w", err)
		}
		r.DeadLetters = &res
	}
	r.BrokerMemLimit = b.memLimit
	r.Elapsed = time.Since(started)
	r.Evaluate()
	return r, nil
}

// checkRoom reads the broker's memory and disk before anything piles up
// and refuses a --waiting they clearly cannot hold: the messages of one
// backend at a time, at waitingCost each. A management API that cannot be
// reached is no error: the memory figure then reports the broker's
// memory as n/a, and says why.
func (b *bench) checkRoom(ctx context.Context) error {
	api, err := newBrokerAPI(b.url, b.mgmtURL)
	if err != nil {
		b.apiNote = "n/a: management API: " + err.Error()
		b.progress("WARNING: %s; the broker's memory goes unreported and --waiting %d unchecked against its limits", b.apiNote, b.opts.Waiting)
		return nil
	}
	return b.useBrokerAPI(ctx, api)
}

// useBrokerAPI reads the node's memory through api for checkRoom, and
// keeps api for the memory figure if it answered.
func (b *bench) useBrokerAPI(ctx context.Context, api *brokerAPI) error {
	node, err := api.node(ctx)
	if err != nil {
		b.apiNote = "n/a: management API unreachable at " + api.String()
		b.progress("WARNING: %s (%v); the broker's memory goes unreported and --waiting %d unchecked against its limits", b.apiNote, err, b.opts.Waiting)
		return nil
	}
	b.api, b.memLimit = api, node.Limit
	return roomFor(node, b.opts.Waiting, len(messageBody()))
}

// waitingHeaders is about the size of relay's headers and the message's
// properties on a waiting message, encoded.
const waitingHeaders = 240

// waitingCost is what the broker spends, at least, on one waiting message
// of body bytes with relay's headers: in memory, four times the message
// (the Erlang allocators of RabbitMQ 3.10 held 1.7 to 2.3 KB per waiting
// message of some 450 bytes in a classic queue, from 300,000 to 1,000,000
// of them, and its RSS grew by more), on disk the message and a little.
func waitingCost(body int) (memory, disk uint64) {
	m := uint64(body + waitingHeaders)
	return 4 * m, m + 128
}

// roomFor refuses n waiting messages of body bytes that would clearly
// raise the node's memory or disk alarm.
func roomFor(node nodeMemory, n, body int) error {
	if node.Alarm {
		return fmt.Errorf("the broker %s has a resource alarm raised already: clear it before the memory figure piles up --waiting %d messages", node.Name, n)
	}
	perMem, perDisk := waitingCost(body)
	needMem, needDisk := uint64(n)*perMem, uint64(n)*perDisk
	if left := node.Limit - min(node.Used, node.Limit); needMem > left {
		return fmt.Errorf("--waiting %d: %s messages of %d bytes need about %.0f MiB of the broker's memory, and %s has %.0f MiB left "+
			"below its memory alarm (mem_limit %.0f MiB, %.0f MiB in use): give a smaller --waiting, or raise vm_memory_high_watermark",
			n, thousands(int64(n)), body, mib(needMem), node.Name, mib(left), mib(node.Limit), mib(node.Used))
	}
	if node.DiskFree > 0 {
		if left := node.DiskFree - min(node.DiskFreeLimit, node.DiskFree); needDisk > left {
			return fmt.Errorf("--waiting %d: %s persistent messages need about %.0f MiB of the broker's disk, and %s has %.0f MiB "+
				"free above its disk alarm: give a smaller --waiting", n, thousands(int64(n)), mib(needDisk), node.Name, mib(left))
		}
	}
	return nil
}

// names gives the figure's entities their place under the run's prefix.
func (b *bench) names(qt retry.QueueType, figure string) string {
	return b.prefix + string(qt) + "." + figure + "."
}

// checkLoopback refuses a broker that is not on this machine: the bench
// loads what it talks to, and only loopback is fair game.
func checkLoopback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return config.Invalid("AMQP_URL", "(unparsable)", "an amqp:// URL")
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("AMQP_URL points at %q: relay-lab bench loads the broker hard and runs against loopback brokers only (localhost, 127.0.0.0/8, ::1)", host)
}

// checkLoopbackDSN refuses a PostgreSQL that is not on this machine, as
// checkLoopback refuses a broker; a DSN with no host means a local socket.
// No message quotes the DSN, which may hold a password.
func checkLoopbackDSN(dsn string) error {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return config.Invalid("HISTORY_BENCH_DSN", "(not shown)", "a postgres:// URL")
	}
	host := u.Hostname()
	if host == "" || host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("HISTORY_BENCH_DSN points at %q: relay-lab bench loads the database hard and runs against loopback databases only (localhost, 127.0.0.0/8, ::1)", host)
}

// shellJoin writes args as a shell would need them.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a != "" && !strings.ContainsAny(a, " \t\n'\"\\$`*?[]{}()<>|&;#~") {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create memory profile: %w", err)
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("write memory profile: %w", err)
	}
	return f.Close()
}

// waitFor blocks until done is closed, and fails when ctx ends or a
// goroutine of r (which may be nil) stops first, saying how far progress
// got.
func waitFor(ctx context.Context, done <-chan struct{}, r *runner, what string, progress func() int, n int) error {
	var dead <-chan struct{}
	if r != nil {
		dead = r.dead
	}
	select {
	case <-done:
		return nil
	case <-dead:
		return fmt.Errorf("%s stopped at %d of %d: %v", what, progress(), n, r.err)
	case <-ctx.Done():
		return fmt.Errorf("%s: %d of %d after the time limit: %w", what, progress(), n, ctx.Err())
	}
}

// runner runs the goroutines of one side (consumers, stages) and tells
// when the first of them stops.
type runner struct {
	wg   sync.WaitGroup
	once sync.Once
	dead chan struct{}
	err  error
}

func newRunner() *runner { return &runner{dead: make(chan struct{})} }

// start runs fn in a goroutine of its own.
func (r *runner) start(fn func() error) {
	r.wg.Go(func() {
		err := fn()
		r.once.Do(func() {
			r.err = err
			close(r.dead)
		})
	})
}

// wait waits for every goroutine and returns the first one's error.
func (r *runner) wait() error {
	r.wg.Wait()
	return r.err
}
