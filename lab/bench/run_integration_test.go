//go:build integration

package bench_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/testenv"
	"github.com/relay-demo/relay/lab/bench"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// tiny are counts small enough for a whole run to take seconds.
var tiny = []string{"--quick", "--ingest", "200", "--clients", "16", "--consume", "300", "--roundtrips", "60",
	"--latency", "30", "--window", "8", "--delay", "20ms", "--waiting", "500", "--batch-size", "50", "--history-notifications", "3000", "--timeout", "1m"}

// watched collects a run's output and calls hook on every write.
type watched struct {
	mu   sync.Mutex
	b    strings.Builder
	hook func(string)
}

func (w *watched) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if w.hook != nil {
		w.hook(w.b.String())
	}
	return len(p), nil
}

func (w *watched) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func envFor(url string) func(string) string {
	return func(k string) string {
		switch k {
		case "AMQP_URL":
			return url
		case "HISTORY_BENCH_DSN", "MANAGEMENT_URL":
			return os.Getenv(k)
		}
		return ""
	}
}

// TestRunQuick runs every figure with tiny counts and checks the report has
// every row with sane numbers, and that the broker keeps nothing of it.
func TestRunQuick(t *testing.T) {
	url := retrytest.URL(t)
	out := filepath.Join(t.TempDir(), "report.json")
	var progress watched
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	if err := bench.Run(ctx, append(tiny, "--format", "json", "--out", out), envFor(url), &progress); err != nil {
		t.Fatalf("Run: %v\n%s", err, progress.String())
	}
	if !strings.Contains(progress.String(), "# classic: worker relay, round 1: 300 in ") {
		t.Errorf("progress lacks the worker's line:\n%s", progress.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var r bench.Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("report: %v\n%s", err, b)
	}
	if r.Broker == "" || r.Machine.Cores < 1 || r.Machine.Go == "" || !strings.HasPrefix(r.Command, "relay-lab bench --quick") {
		t.Errorf("report header: broker %q, machine %+v, command %q", r.Broker, r.Machine, r.Command)
	}
	if r.HTTPFloor <= 0 {
		t.Errorf("net/http floor = %v, want a positive rate", r.HTTPFloor)
	}
	// The bulk replay job: every selected copy once, the others parked.
	if d := r.DeadLetters; d == nil || d.Arrived != d.Selected || d.Duplicates != 0 || d.Lost != 0 || d.LeftParked != d.Options.Copies-d.Selected || d.PerSecond <= 0 {
		t.Errorf("deadletters figure: %+v", r.DeadLetters)
	}
	// The noisy neighbour: the quick run's one row (endpoints, 8 lanes),
	// with B's webhooks timed alone and beside A's flood, and A's
	// deliveries counted.
	if r.Noisy == nil || len(r.Noisy.Rows) != 1 || r.Noisy.Rows[0].Receivers != "endpoints" || r.Noisy.Rows[0].Lanes != 8 {
		t.Errorf("noisy figure: %+v, want one row: endpoints, 8 lanes", r.Noisy)
	} else {
		for _, row := range r.Noisy.Rows {
			if row.BAlone.N == 0 || row.BFlood.N+row.BMissing == 0 || row.AAlone <= 0 {
				t.Errorf("noisy row %s, %d lanes: %+v, want B timed in both scenarios and A delivering", row.Receivers, row.Lanes, row)
			}
			// B's endpoint is given a lane of its own where there are
			// several.
			if row.Receivers == "endpoints" && row.Lanes > 1 && row.SameLane {
				t.Errorf("noisy row %s, %d lanes: A and B in one lane, want B's endpoint in another", row.Receivers, row.Lanes)
			}
			// B's webhooks beside the flood, split by when B posted: the
			// two parts hold them all, and A's POSTs took some time.
			if row.BDuringPosts.N+row.BAfterPosts.N != row.BFlood.N || row.APosts <= 0 {
				t.Errorf("noisy row %s, %d lanes: B beside A's POSTs %d and after %d of %d, A's POSTs took %s; want the parts to hold every one",
					row.Receivers, row.Lanes, row.BDuringPosts.N, row.BAfterPosts.N, row.BFlood.N, row.APosts)
			}
		}
	}

	plugin, err := retry.HasPlugin(url)
	if err != nil {
		t.Fatal(err)
	}
	// The plugin's and the native backend's figures are n/a on a broker
	// without them, unless that broker must run them (testenv.Expects).
	if !plugin && testenv.Expects(string(retry.Plugin)) {
		t.Errorf("the broker has no delayed-message plugin, but %s=%q names plugin", testenv.ExpectBackends, os.Getenv(testenv.ExpectBackends))
	}
	figures := []string{bench.FigIngestRate, bench.FigIngestP50, bench.FigIngestP99, bench.FigIngestMinimal, bench.FigBatchRate, bench.FigBatchMinimal, bench.FigWorkerRate,
		bench.FigRetryRate, bench.FigRetryP50, bench.FigRetryP99, bench.FigRetryBrokerCPU,
		bench.FigDirectRate, bench.FigDirectP50, bench.FigDirectP99, bench.FigDirectBrokerCPU,
		bench.FigPluginRate, bench.FigPluginBrokerCPU, bench.FigPluginDirectRate, bench.FigPluginDirectBrokerCPU,
		bench.FigDelayedRSS, bench.FigDelayedGrowth, bench.FigBrokerGrowth, bench.FigBrokerPerMsg, bench.FigBrokerAllocPerMsg, bench.FigBrokerQueue}
	pluginMemory := []string{bench.FigPluginBrokerGrowth}
	// The plugin's latencies: measured on classic queues only, the one
	// queue type it runs with (its rates are n/a on quorum queues).
	var classicOnly []string
	if plugin {
		classicOnly = []string{bench.FigPluginP50, bench.FigPluginP99, bench.FigPluginDirectP50, bench.FigPluginDirectP99}
		pluginMemory = []string{bench.FigPluginDelayedRSS, bench.FigPluginDelayedGrowth, bench.FigPluginBrokerGrowth,
			bench.FigPluginBrokerPerMsg, bench.FigPluginAllocPerMsg}
	}
	streams := []string{bench.FigStreamsIdle, bench.FigStreamsOpen, bench.FigStreamsClosed}
	historyFigures := []string{bench.FigHistorySQLiteRate, bench.FigHistoryPostgresRate, bench.FigHistoryGetP50, bench.FigHistoryGetP99}
	// The native backend: quorum queues only, measured on RabbitMQ 4.3 or
	// later, n/a before.
	native := []string{bench.FigNativeRate, bench.FigNativeBrokerCPU}
	version, _ := strings.CutPrefix(r.Broker, "RabbitMQ ")
	onNative := retry.VersionAtLeast(version, 4, 3)
	if !onNative && testenv.Expects(string(retry.Native)) {
		t.Errorf("the broker is %s, older than 4.3, but %s=%q names native", r.Broker, testenv.ExpectBackends, os.Getenv(testenv.ExpectBackends))
	}
	if onNative {
		native = []string{bench.FigNativeRate, bench.FigNativeP50, bench.FigNativeP99, bench.FigNativeBrokerCPU}
	}
	schedule := []string{bench.FigScheduleP50, bench.FigScheduleP99, bench.FigScheduleMax, bench.FigScheduleEarly}
	for _, q := range []string{"classic", "quorum"} {
		for _, f := range schedule {
			row, ok := r.Row(q, f)
			switch {
			case !ok || row.Relay == nil:
				t.Errorf("%s: no figure %q", q, f)
			case f == bench.FigScheduleEarly && *row.Relay != 0:
				t.Errorf("%s: %v scheduled notifications early, want none", q, *row.Relay)
			case f != bench.FigScheduleEarly && *row.Relay < 0:
				t.Errorf("%s %s: %v, want 0 or more", q, f, *row.Relay)
			}
		}
	}
	if got, want := len(r.Rows), 2*len(figures)+len(classicOnly)+2*len(schedule)+len(pluginMemory)+len(streams)+len(historyFigures)+len(native); got != want {
		t.Errorf("report has %d rows, want %d", got, want)
	}
	for _, f := range native {
		row, ok := r.Row("quorum", f)
		switch {
		case !ok:
			t.Errorf("quorum: no row %q", f)
		case !onNative && (row.Note != "n/a: RabbitMQ 4.3 or later" || row.Relay != nil):
			t.Errorf("quorum %s on %s: %+v, want n/a", f, r.Broker, row)
		case onNative && (!positive(row.Relay) || !positive(row.Raw)) && row.Note == "":
			t.Errorf("quorum %s on %s: relay %v, raw %v, want positive figures", f, r.Broker, deref(row.Relay), deref(row.Raw))
		}
		if _, ok := r.Row("classic", f); ok {
			t.Errorf("classic: a row %q, want none: the native backend is for quorum queues", f)
		}
	}
	checkPluginMemory(t, &r, plugin, pluginMemory)
	checkHistory(t, &r, progress.String())
	// The dashboard's streams, measured once, on the first queue type.
	for _, f := range streams {
		row, ok := r.Row("classic", f)
		if !ok || !positive(row.Relay) || *row.Relay > 1024 {
			t.Errorf("classic %s: %+v, want an RSS between 0 and 1 GiB", f, row)
		}
	}
	if r.StreamsSettled <= 0 {
		t.Errorf("streams settled after %v, want a positive duration", r.StreamsSettled)
	}
	for _, q := range []string{"classic", "quorum"} {
		fs := figures
		if q == "classic" {
			fs = append(slices.Clip(figures), classicOnly...)
		}
		for _, f := range fs {
			row, ok := r.Row(q, f)
			switch {
			case !ok:
				t.Errorf("%s: no row %q", q, f)
			case strings.HasPrefix(f, "retry (plugin") && !plugin:
				if row.Note != "n/a: no plugin" || row.Relay != nil {
					t.Errorf("%s %s: %+v, want n/a: no plugin", q, f, row)
				}
			case strings.HasPrefix(f, "retry (plugin") && q == "quorum":
				if row.Note != "n/a: the plugin runs with classic queues only" || row.Relay != nil {
					t.Errorf("%s %s: %+v, want n/a: the plugin runs with classic queues only", q, f, row)
				}
			case f == bench.FigDelayedRSS:
				if !positive(row.Relay) || *row.Relay > 1024 {
					t.Errorf("%s %s: relay %v MiB, want between 0 and 1 GiB", q, f, deref(row.Relay))
				}
			case f == bench.FigDelayedGrowth:
				if row.Relay == nil || *row.Relay < 0 || math.IsNaN(*row.Relay) {
					t.Errorf("%s %s: %v, want 0 or more", q, f, deref(row.Relay))
				}
			case f == bench.FigBrokerQueue:
				// The wait queue holds the messages: its own memory is
				// more than nothing, less than a GiB.
				if !positive(row.Relay) || *row.Relay > 1024 || row.Target != nil {
					t.Errorf("%s %s: %+v, want between 0 and 1 GiB, no target", q, f, row)
				}
			case strings.HasPrefix(f, "memory (ttl): broker"):
				// The node's memory moves with everything else the broker
				// does: with 500 messages, any finite figure, no target.
				if row.Relay == nil || math.IsNaN(*row.Relay) || math.IsInf(*row.Relay, 0) || row.Raw != nil || row.Target != nil || row.Note != "" {
					t.Errorf("%s %s: %+v, want a finite figure, no raw, no target", q, f, row)
				}
			case strings.HasSuffix(f, "broker CPU per round trip") && row.Note != "":
				if row.Note != "n/a: broker process not visible" {
					t.Errorf("%s %s: note %q", q, f, row.Note)
				}
			default:
				if !positive(row.Relay) || !positive(row.Raw) || !positive(row.Ratio) {
					t.Errorf("%s %s: relay %v, raw %v, ratio %v: want positive figures", q, f, deref(row.Relay), deref(row.Raw), deref(row.Ratio))
				}
				if row.Target != nil && row.Verdict != bench.Met && row.Verdict != bench.NotMet {
					t.Errorf("%s %s: verdict %q, want met or not met", q, f, row.Verdict)
				}
			}
			if row.Unit == bench.UnitRate && row.Note == "" {
				for side, c := range map[string]*bench.Cost{"relay": row.RelayCost, "raw": row.RawCost} {
					if c == nil || c.CPUPerMsg <= 0 || c.AllocsPerMsg <= 0 || c.PeakRSS == 0 {
						t.Errorf("%s %s: %s cost %+v, want CPU, allocations and RSS", q, f, side, c)
					}
				}
			}
		}
		// The hand-offs share one raw loop, the ingest figures one raw
		// publisher: the same raw figure in each pair of rows.
		for _, pair := range [][2]string{{bench.FigRetryRate, bench.FigDirectRate}, {bench.FigIngestRate, bench.FigBatchRate}} {
			a, _ := r.Row(q, pair[0])
			b, _ := r.Row(q, pair[1])
			if a.Raw == nil || b.Raw == nil || a.RawCost == nil || b.RawCost == nil || *a.Raw != *b.Raw || *a.RawCost != *b.RawCost {
				t.Errorf("%s: %s and %s hold raw %v and %v: want the one raw side", q, pair[0], pair[1], deref(a.Raw), deref(b.Raw))
			}
		}
		// The broker CPU row is the rate row's cost, in µs.
		for _, pair := range [][2]string{{bench.FigRetryRate, bench.FigRetryBrokerCPU}, {bench.FigDirectRate, bench.FigDirectBrokerCPU}} {
			rate, _ := r.Row(q, pair[0])
			cpu, _ := r.Row(q, pair[1])
			if cpu.Note == "" && (cpu.Relay == nil || rate.RelayCost == nil || *cpu.Relay != float64(rate.RelayCost.BrokerCPUPerMsg)/1e3) {
				t.Errorf("%s %s: %v µs, want the broker CPU of %s, %+v", q, pair[1], deref(cpu.Relay), pair[0], rate.RelayCost)
			}
		}
		p50, _ := r.Row(q, bench.FigIngestP50)
		p99, _ := r.Row(q, bench.FigIngestP99)
		if positive(p50.Relay) && positive(p99.Relay) && *p99.Relay < *p50.Relay {
			t.Errorf("%s: ingest p99 %v below p50 %v", q, *p99.Relay, *p50.Relay)
		}
	}
	assertGone(t, url, r.Prefix, "classic", "quorum")
}

// checkPluginMemory checks the memory figure on the delayed-message
// plugin: measured once, on no queue type, or n/a without the plugin.
func checkPluginMemory(t *testing.T, r *bench.Report, plugin bool, figures []string) {
	t.Helper()
	for _, f := range figures {
		row, ok := r.Row("", f)
		switch {
		case !ok:
			t.Errorf("no row %q on no queue type", f)
		case !plugin && (row.Note != "n/a: no plugin" || row.Relay != nil):
			t.Errorf("%s: %+v, want n/a: no plugin", f, row)
		case plugin && (row.Relay == nil || math.IsNaN(*row.Relay)):
			t.Errorf("%s: %+v, want a figure", f, row)
		}
	}
}

// checkHistory checks the history's figures of a quick run: measured
// once, the rates held against the fastest worker, the reads timed on a
// store of the size asked for, and nothing left in PostgreSQL.
func checkHistory(t *testing.T, r *bench.Report, progress string) {
	t.Helper()
	rows := map[string]bench.Row{}
	for _, row := range r.Rows {
		if strings.HasPrefix(row.Figure, "history") {
			if _, ok := rows[row.Figure]; ok {
				t.Errorf("%s: measured twice", row.Figure)
			}
			rows[row.Figure] = row
		}
	}
	classic, _ := r.Row("classic", bench.FigWorkerRate)
	quorum, _ := r.Row("quorum", bench.FigWorkerRate)
	fastest := classic
	if positive(quorum.Relay) && positive(classic.Relay) && *quorum.Relay > *classic.Relay {
		fastest = quorum
	}
	for _, f := range []string{bench.FigHistorySQLiteRate, bench.FigHistoryPostgresRate} {
		row, ok := rows[f]
		switch {
		case !ok:
			t.Errorf("no row %q", f)
			continue
		case f == bench.FigHistoryPostgresRate && row.Note != "":
			// PostgreSQL unreachable: skipped, and said so, but never on CI.
			if !strings.HasPrefix(row.Note, "skipped: ") || !strings.Contains(progress, "WARNING: history (postgres) SKIPPED") {
				t.Errorf("%s: note %q, want a loud skip", f, row.Note)
			}
			// A subtest, so that only this figure's checks are skipped.
			t.Run(f, func(t *testing.T) {
				testenv.Unavailable(t, "%s: %s (set HISTORY_BENCH_DSN to a PostgreSQL this machine reaches)", f, row.Note)
			})
			continue
		}
		if !positive(row.Relay) || !positive(row.Ratio) || row.Raw == nil || *row.Raw != *fastest.Relay || row.Queue != fastest.Queue {
			t.Errorf("%s: %s relay %v, raw %v, ratio %v; want a positive rate held against the %s worker's %v", f, row.Queue,
				deref(row.Relay), deref(row.Raw), deref(row.Ratio), fastest.Queue, deref(fastest.Relay))
		}
		if row.Target == nil || row.Target.Value != 1 || (row.Verdict != bench.Met && row.Verdict != bench.NotMet) {
			t.Errorf("%s: target %+v, verdict %q; want at least the worker's rate, met or not met", f, row.Target, row.Verdict)
		}
		if c := row.RelayCost; c == nil || c.CPUPerMsg <= 0 || c.AllocsPerMsg <= 0 {
			t.Errorf("%s: cost %+v, want CPU and allocations per event", f, c)
		}
	}
	if lite, pg := rows[bench.FigHistorySQLiteRate], rows[bench.FigHistoryPostgresRate]; lite.RelayCost != nil && pg.RelayCost != nil &&
		*lite.RelayCost == *pg.RelayCost {
		t.Errorf("SQLite and PostgreSQL report the same cost, %+v: one run's, twice", *lite.RelayCost)
	}
	for _, f := range []string{bench.FigHistoryGetP50, bench.FigHistoryGetP99} {
		row := rows[f]
		if !positive(row.Relay) || !positive(row.Raw) || row.Detail != "with 3,000 stored" {
			t.Errorf("%s: %+v; want latencies measured, with 3,000 stored", f, row)
		}
	}
	if p50, p99 := rows[bench.FigHistoryGetP50], rows[bench.FigHistoryGetP99]; positive(p50.Relay) && positive(p99.Relay) && *p99.Relay < *p50.Relay {
		t.Errorf("history GET p99 %v below p50 %v", *p99.Relay, *p50.Relay)
	}
	if iso := r.Isolation; iso == nil || iso.Absent.Throughput <= 0 || iso.Breaker.Throughput <= 0 || iso.Breaker.Latency.P99 <= 0 {
		t.Errorf("isolation figures %+v, want the healthy endpoint measured in every scenario", r.Isolation)
	}
	if r.HistoryFilled <= 0 {
		t.Errorf("history filled in %v, want a positive duration", r.HistoryFilled)
	}
	for _, want := range []string{"# history (sqlite), round 1: ", "# history-get: 3,000 notifications stored in ",
		"# classic: retry-ttl direct, round 1: 60 in ", "# quorum: ingest batch, round 1: 200 in ",
		"# classic: memory (ttl): 500 of 500 waiting, "} {
		if !strings.Contains(progress, want) {
			t.Errorf("progress lacks %q:\n%s", want, progress)
		}
	}
	assertNoSchema(t, r.Prefix)
}

// assertNoSchema checks that the run's PostgreSQL schema is gone, in a
// subtest that is skipped when PostgreSQL cannot be reached, and fails
// then under CI=true (testenv.Unavailable).
func assertNoSchema(t *testing.T, prefix string) {
	t.Helper()
	schema := "relay_" + strings.Trim(strings.ReplaceAll(prefix, ".", "_"), "_")
	t.Run("schema dropped", func(t *testing.T) {
		dsn := os.Getenv("HISTORY_BENCH_DSN")
		if dsn == "" {
			dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			testenv.Unavailable(t, "PostgreSQL unreachable at HISTORY_BENCH_DSN or 127.0.0.1:5432, schema %s unchecked: %v", schema, err)
		}
		defer conn.Close(ctx)
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("schema %s is still there", schema)
		}
	})
}

// TestRunMarkdownHistory writes the markdown page for the history alone:
// without the worker, its rates have nothing to be held against.
func TestRunMarkdownHistory(t *testing.T) {
	url := retrytest.URL(t)
	out := filepath.Join(t.TempDir(), "benchmarks.md")
	if err := bench.Run(context.Background(), append(tiny, "--queues", "classic", "--figures", "history,history-get", "--quiet",
		"--history-notifications", "2000", "--format", "markdown", "--out", out), envFor(url), &watched{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| — | " + bench.FigHistorySQLiteRate + " | ", "≥ 1.00× worker | — |",
		"| — | " + bench.FigHistoryGetP99 + " with 2,000 stored | ", "**History.**", "the worker was not measured in this run",
		"**Reading the history.** A SQLite store was filled with 2,000 notifications"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("markdown lacks %q:\n%s", want, b)
		}
	}
	if strings.Contains(string(b), "**Worker.**") {
		t.Errorf("markdown explains a worker figure it did not measure:\n%s", b)
	}
}

// TestRunMarkdown writes the markdown page for one cheap figure.
func TestRunMarkdown(t *testing.T) {
	url := retrytest.URL(t)
	out := filepath.Join(t.TempDir(), "benchmarks.md")
	// The page as make bench-peers left it: its section survives the run.
	peers := "<!-- bench-peers:start -->\n## Against other libraries\n\n| library | rate |\n|---|---|\n<!-- bench-peers:end -->\n"
	if err := os.WriteFile(out, []byte("# Benchmarks\n\nan older run\n\n"+peers), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := bench.Run(context.Background(), append(tiny, "--queues", "classic", "--figures", "memory", "--quiet",
		"--format", "markdown", "--out", out), envFor(url), &watched{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# Benchmarks", "- broker: RabbitMQ", "- machine: ", "`relay-lab bench --quick",
		"| classic | " + bench.FigDelayedRSS + " | ", "| classic | " + bench.FigBrokerPerMsg + " | ", "**Memory.** 500 messages waited",
		"The broker's memory, read from its management API"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("markdown lacks %q:\n%s", want, b)
		}
	}
	if !strings.HasSuffix(string(b), "\n\n"+peers) || strings.Contains(string(b), "an older run") {
		t.Errorf("markdown does not end with the peers section alone of the old page:\n%s", b)
	}
}

// TestRunInterrupted cancels a run in the middle and checks it still
// deleted everything it had declared.
func TestRunInterrupted(t *testing.T) {
	url := retrytest.URL(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	prefixLine := regexp.MustCompile(`names under (\S+)`)
	var prefix string
	out := &watched{}
	out.hook = func(s string) {
		if m := prefixLine.FindStringSubmatch(s); m != nil {
			prefix = m[1]
		}
		// Stop once the relay consumer's queue exists and is full.
		if strings.Contains(s, "# classic: worker raw, round 1") {
			cancel()
		}
	}
	err := bench.Run(ctx, append(tiny, "--queues", "classic", "--consume", "20000"), envFor(url), out)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want it to end with the context\n%s", err, out.String())
	}
	if prefix == "" {
		t.Fatalf("no prefix in the progress:\n%s", out.String())
	}
	assertGone(t, url, prefix, "classic")
}

func positive(v *float64) bool { return v != nil && *v > 0 && !math.IsInf(*v, 0) && !math.IsNaN(*v) }

func deref(v *float64) any {
	if v == nil {
		return nil
	}
	return *v
}

// assertGone checks that queues and exchanges each figure declares under
// prefix no longer exist.
func assertGone(t *testing.T, url, prefix string, queueTypes ...string) {
	t.Helper()
	if !strings.HasPrefix(prefix, "bench.") {
		t.Fatalf("prefix %q: want bench.<hex>.", prefix)
	}
	conn, err := retry.Dial(url, "relay-lab bench test")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range queueTypes {
		p := prefix + q + "."
		queues := []string{"ingest-relay.webhook-queue", "ingest-relay.error-queue", "ingest-raw.webhook",
			"worker-relay.webhook-queue", "worker-raw.webhook", "retry-ttl-relay.webhook-queue",
			"retry-ttl-relay.wait.20ms", "retry-ttl-relay.requeue-queue", "retry-ttl-raw.work", "retry-ttl-raw.wait",
			"retry-ttl-direct.webhook-queue", "retry-ttl-direct.wait.20ms.webhook-queue", "retry-ttl-direct.error-queue",
			"ingest-batch.webhook-queue", "ingest-batch.history-queue", "memory-ttl.wait.1h", "memory-ttl.dead-letter-queue"}
		exchanges := []string{"ingest-relay.notification-exchange", "ingest-relay.notification-events",
			"ingest-raw.exchange", "worker-relay.error-exchange", "retry-ttl-relay.wait-exchange", "retry-ttl-direct.wait-exchange",
			"ingest-batch.notification-exchange", "ingest-batch.notification-events", "memory-ttl.wait-exchange"}
		for _, name := range queues {
			if exists(t, conn, func(ch *amqp.Channel) error {
				_, err := ch.QueueDeclarePassive(p+name,
					true,  // durable
					false, // autoDelete
					false, // exclusive
					false, // noWait
					nil)
				return err
			}) {
				t.Errorf("queue %s%s is still there", p, name)
			}
		}
		for _, name := range exchanges {
			if exists(t, conn, func(ch *amqp.Channel) error {
				return ch.ExchangeDeclarePassive(p+name, "direct",
					true,  // durable
					false, // autoDelete
					false, // internal
					false, // noWait
					nil)
			}) {
				t.Errorf("exchange %s%s is still there", p, name)
			}
		}
	}
}

// exists runs a passive declaration on a channel of its own: NOT_FOUND
// means the entity is gone; any other error, a type mismatch included,
// means it is there.
func exists(t *testing.T, conn *amqp.Connection, declare func(*amqp.Channel) error) bool {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	err = declare(ch)
	var aerr *amqp.Error
	if errors.As(err, &aerr) && aerr.Code == amqp.NotFound {
		return false
	}
	return true
}

// TestRateLimitFigure runs the rate-limit figure alone, on every delay
// backend the broker runs (ttl and levels on any, native on RabbitMQ 4.3
// or later, plugin with the delayed-message plugin), so each backend's
// deferral path is exercised, and holds each to what must hold however
// loaded the machine: every email arrives, once, and no second of the
// clock sees more than the limit allows (RateLimitOptions.MostInSecond).
// The throughput against the limit is a figure of make bench, logged here
// and never held to a bound: on a loaded machine copies come back late
// for their slots and wait again.
func TestRateLimitFigure(t *testing.T) {
	url := retrytest.URL(t)
	out := filepath.Join(t.TempDir(), "report.json")
	var progress watched
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := bench.Run(ctx, []string{"--quick", "--figures", "ratelimit", "--queues", "classic", "--format", "json", "--out", out}, envFor(url), &progress); err != nil {
		t.Fatalf("Run: %v\n%s", err, progress.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var r bench.Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("report: %v\n%s", err, b)
	}
	plugin, err := retry.HasPlugin(url)
	if err != nil {
		t.Fatal(err)
	}
	version, _ := strings.CutPrefix(r.Broker, "RabbitMQ ")
	want := []retry.Backend{retry.TTL, retry.Levels}
	if plugin {
		want = append([]retry.Backend{retry.Plugin}, want...)
	}
	if retry.VersionAtLeast(version, 4, 3) {
		want = append(want, retry.Native)
	}
	var got []retry.Backend
	for _, rl := range r.RateLimits {
		got = append(got, rl.Options.Backend)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("backends measured on %s (-want +got):\n%s", r.Broker, diff)
	}
	for _, rl := range r.RateLimits {
		t.Run(string(rl.Options.Backend), func(t *testing.T) {
			if rl.Delivered != rl.Options.Emails || rl.Duplicates != 0 {
				t.Errorf("%d of %d emails delivered, %d twice: want every email once", rl.Delivered, rl.Options.Emails, rl.Duplicates)
			}
			if most := rl.Options.MostInSecond(); float64(rl.MaxInSecond) > most {
				t.Errorf("%d emails in one second of the clock, want at most %g (%g/s, +%.0f %%, burst %d)",
					rl.MaxInSecond, most, rl.Options.Rate, bench.RateLimitTolerance*100, rl.Options.Burst)
			}
			if want := rl.Delivered == rl.Options.Emails && rl.Duplicates == 0 && float64(rl.MaxInSecond) <= rl.Options.MostInSecond(); rl.WithinLimit != want {
				t.Errorf("within limit = %v, want %v for %+v", rl.WithinLimit, want, rl)
			}
			if rl.Throughput <= 0 || rl.Ratio <= 0 {
				t.Errorf("throughput %v/s, %v of the limit: want both measured", rl.Throughput, rl.Ratio)
			}
			t.Logf("%s on %s queues: %.1f/s of %g/s (%.0f %%), most in a second %d, in any one-second window %d; %d deferrals, %d late for their slot; load %.1f",
				rl.Options.Backend, rl.Options.QueueType, rl.Throughput, rl.Options.Rate, rl.Ratio*100, rl.MaxInSecond, rl.MaxInWindow, rl.Deferrals, rl.Missed, rl.Load)
		})
	}
}
