package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestTargetVerdict(t *testing.T) {
	tests := []struct {
		name       string
		target     Target
		relay, raw *float64
		want       string
	}{
		{"ratio at least, above", Target{RatioAtLeast, 0.8}, ptr(900), ptr(1000), Met},
		{"ratio at least, exactly", Target{RatioAtLeast, 0.8}, ptr(800), ptr(1000), Met},
		{"ratio at least, below", Target{RatioAtLeast, 0.8}, ptr(799), ptr(1000), NotMet},
		{"ratio at most, below", Target{RatioAtMost, 2}, ptr(19), ptr(10), Met},
		{"ratio at most, above", Target{RatioAtMost, 2}, ptr(21), ptr(10), NotMet},
		{"at most, within", Target{AtMost, 50}, ptr(18.5), nil, Met},
		{"at most, over", Target{AtMost, 50}, ptr(50.1), nil, NotMet},
		{"no relay figure", Target{AtMost, 50}, nil, nil, ""},
		{"ratio without raw", Target{RatioAtLeast, 0.8}, ptr(1), nil, ""},
		{"ratio over a zero raw", Target{RatioAtLeast, 0.8}, ptr(1), ptr(0), ""},
		{"unknown kind", Target{"sideways", 1}, ptr(1), ptr(1), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.target.Verdict(tt.relay, tt.raw); got != tt.want {
				t.Errorf("Verdict = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTargetDescribe(t *testing.T) {
	tests := []struct {
		target Target
		unit   string
		want   string
	}{
		{Target{RatioAtLeast, 0.8}, UnitRate, "≥ 0.80× raw"},
		{Target{RatioAtMost, 2}, UnitMs, "≤ 2.00× raw"},
		{Target{AtMost, 50}, UnitMiB, "≤ 50 MiB"},
	}
	for _, tt := range tests {
		if got := tt.target.Describe(tt.unit); got != tt.want {
			t.Errorf("%+v.Describe(%q) = %q, want %q", tt.target, tt.unit, got, tt.want)
		}
	}
}

func TestFormatValue(t *testing.T) {
	tests := []struct {
		v    *float64
		unit string
		want string
	}{
		{nil, UnitRate, "—"},
		{ptr(1234567.4), UnitRate, "1,234,567/s"},
		{ptr(999.6), UnitRate, "1,000/s"},
		{ptr(3.14159), UnitMs, "3.14 ms"},
		{ptr(55.55), UnitMs, "55.5 ms"},
		{ptr(178.4), UnitMs, "178 ms"},
		{ptr(18.46), UnitMiB, "18.5 MiB"},
		{ptr(2), "widgets", "2 widgets"},
	}
	for _, tt := range tests {
		if got := formatValue(tt.v, tt.unit); got != tt.want {
			t.Errorf("formatValue(%v, %q) = %q, want %q", tt.v, tt.unit, got, tt.want)
		}
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", -1234567: "-1,234,567", 100000: "100,000"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// sampleReport is a report as a run of both queue types would make it.
func sampleReport() *Report {
	cost := func(cpu time.Duration, allocs float64) *Cost {
		return &Cost{CPUPerMsg: cpu, AllocsPerMsg: allocs, BytesPerMsg: 4096, PeakRSS: 20 << 20, BrokerCPUPerMsg: 2 * cpu}
	}
	r := &Report{
		Machine: Machine{CPU: "Test CPU 3000", Cores: 2, Go: "go1.26.8", OS: "linux/amd64"},
		Broker:  "RabbitMQ 3.10.8", Command: "relay-lab bench --format markdown", Prefix: "bench.0123abcd.",
		Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Elapsed: 3 * time.Minute, HTTPFloor: 12000,
		Options: Options{Format: "markdown", Clients: 64, Prefetch: 16, Concurrency: 8, Window: 16,
			Delay: 50 * time.Millisecond, Waiting: 100000, Ingest: 20000, Consume: 50000, RoundTrips: 5000, Latency: 1000, Rounds: 2},
	}
	for _, q := range []string{"classic", "quorum"} {
		r.Rows = append(r.Rows,
			Row{Queue: q, Figure: FigIngestRate, Unit: UnitRate, Relay: ptr(6000), Raw: ptr(12000),
				Target: &Target{RatioAtLeast, 0.8}, RelayCost: cost(120*time.Microsecond, 199), RawCost: cost(20*time.Microsecond, 41)},
			Row{Queue: q, Figure: FigIngestP50, Unit: UnitMs, Relay: ptr(9.5), Raw: ptr(3)},
			Row{Queue: q, Figure: FigIngestP99, Unit: UnitMs, Relay: ptr(50), Raw: ptr(25)},
			Row{Queue: q, Figure: FigWorkerRate, Unit: UnitRate, Relay: ptr(12000), Raw: ptr(13000),
				Target: &Target{RatioAtLeast, 0.8}, RelayCost: cost(35*time.Microsecond, 57), RawCost: cost(33*time.Microsecond, 45)},
			Row{Queue: q, Figure: FigRetryRate, Unit: UnitRate, Relay: ptr(1200), Raw: ptr(2500),
				Target: &Target{RatioAtLeast, 0.9}, RelayCost: cost(200*time.Microsecond, 599), RawCost: cost(95*time.Microsecond, 235)},
			Row{Queue: q, Figure: FigRetryP50, Unit: UnitMs, Relay: ptr(6), Raw: ptr(4)},
			Row{Queue: q, Figure: FigRetryP99, Unit: UnitMs, Relay: ptr(30), Raw: ptr(20), Target: &Target{RatioAtMost, 2}},
			Row{Queue: q, Figure: FigPluginRate, Unit: UnitRate, Note: "n/a: no plugin", Target: &Target{RatioAtLeast, 0.9}},
			Row{Queue: q, Figure: FigDelayedRSS, Unit: UnitMiB, Relay: ptr(19.2), Target: &Target{AtMost, 50}},
			Row{Queue: q, Figure: FigDelayedGrowth, Unit: UnitMiB, Relay: ptr(0.8), Target: &Target{AtMost, 5}},
		)
	}
	return r
}

func TestEvaluate(t *testing.T) {
	r := sampleReport()
	r.Evaluate()
	type verdict struct {
		Figure  string
		Ratio   *float64
		Verdict string
	}
	var got []verdict
	for _, row := range r.Rows[:10] {
		got = append(got, verdict{row.Figure, row.Ratio, row.Verdict})
	}
	want := []verdict{
		{FigIngestRate, ptr(0.5), NotMet},
		{FigIngestP50, ptr(9.5 / 3), ""},
		{FigIngestP99, ptr(2), ""},
		{FigWorkerRate, ptr(12000.0 / 13000), Met},
		{FigRetryRate, ptr(0.48), NotMet},
		{FigRetryP50, ptr(1.5), ""},
		{FigRetryP99, ptr(1.5), Met},
		{FigPluginRate, nil, ""},
		{FigDelayedRSS, nil, Met},
		{FigDelayedGrowth, nil, Met},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Evaluate (-want +got):\n%s", diff)
	}
}

func TestRenderText(t *testing.T) {
	r := sampleReport()
	var b bytes.Buffer
	if err := r.Render(&b, "text"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"relay-lab bench --format markdown", "Test CPU 3000, 2 cores, go1.26.8", "RabbitMQ 3.10.8",
		"net/http alone, no broker: 12,000 requests/s", "relay ÷ raw",
		"6,000/s", "12,000/s", "0.50×", "≥ 0.80× raw", "not met", "n/a: no plugin", "≤ 50 MiB", "19.2 MiB",
		"120.0 / 20.0", "240.0 / 40.0", "199 / 41", "20.0 / 20.0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
	// One line per row, after the heading and the table's header.
	lines := strings.Split(strings.TrimSpace(out[strings.Index(out, "queue "):]), "\n")
	if len(lines) != 1+len(r.Rows) {
		t.Errorf("table has %d lines, want %d:\n%s", len(lines), 1+len(r.Rows), out)
	}
	// Columns line up: every line puts "figure"'s column at the same place.
	col := strings.Index(lines[0], "figure")
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l[col:], "ingest") && !strings.HasPrefix(l[col:], "worker") &&
			!strings.HasPrefix(l[col:], "retry") && !strings.HasPrefix(l[col:], "memory") {
			t.Errorf("line %q does not start its figure at column %d", l, col)
		}
	}
}

func TestRenderMarkdown(t *testing.T) {
	r := sampleReport()
	var b bytes.Buffer
	if err := r.Render(&b, "markdown"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"# Benchmarks\n", "- machine: Test CPU 3000, 2 cores, go1.26.8, linux/amd64",
		"- broker: RabbitMQ 3.10.8", "`relay-lab bench --format markdown`",
		"| queue | figure | relay | raw | relay ÷ raw | target | verdict |",
		"| classic | ingest: requests/s vs publishes/s | 6,000/s | 12,000/s | 0.50× | ≥ 0.80× raw | not met |",
		"| quorum | retry (plugin): round trips/s | n/a: no plugin | n/a: no plugin | — |",
		"**Ingest.**", "**Worker.**", "**Retry round trip through the stages.**", "**Retry with the delayed-message plugin.**", "**Memory.**",
		"12,000 requests/s here", "relay's share of it is classic: 50%; quorum: 50%",
		"classic: 6,000 requests/s against 12,000 (0.50×, target not met)",
		"busy: classic: relay 108%, raw 36%",              // (120+240) µs × 6000/s ÷ 2 cores; (20+40) µs × 12000/s ÷ 2
		"keeps classic: relay 0.84 cores, raw 0.86 cores", // 70 µs × 12000/s; 66 µs × 13000/s
		"100,000 messages waited",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown report lacks %q:\n%s", want, out)
		}
	}
	// Every table line has as many cells as the header.
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "| ") {
			if got := strings.Count(l, " | ") + 1; got != len(columns) {
				t.Errorf("table line has %d cells, want %d: %q", got, len(columns), l)
			}
		}
	}
}

// TestRenderMarkdownSection renders the report as another broker's
// section of the page: between its markers, with its headings a level
// down, so that it sits under the page's own title.
func TestRenderMarkdownSection(t *testing.T) {
	r := sampleReport()
	r.Broker, r.Options.Section = "RabbitMQ 4.3.6", "4.3"
	var b bytes.Buffer
	if err := r.Render(&b, "markdown"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if want := "<!-- bench:4.3:start -->\n## On RabbitMQ 4.3.6 (`--section 4.3`)\n\n"; !strings.HasPrefix(out, want) {
		t.Errorf("section starts %q, want %q", out[:min(len(out), 80)], want)
	}
	if !strings.HasSuffix(out, "\n<!-- bench:4.3:end -->\n") {
		t.Errorf("section does not end with its end marker: %q", out[max(0, len(out)-80):])
	}
	for _, want := range []string{"\n### Results\n", "\n### What limits each figure\n", "- broker: RabbitMQ 4.3.6"} {
		if !strings.Contains(out, want) {
			t.Errorf("section lacks %q", want)
		}
	}
	if strings.Contains(out, "# Benchmarks") || strings.Contains(out, "\n## Results") {
		t.Errorf("section carries the page's own headings:\n%s", out)
	}
}

// TestRenderNative explains the native rows of a 4.3 run next to the
// dead-letter loop and the direct hand-off of the same run, and follows
// the broker's version where the plugin is concerned.
func TestRenderNative(t *testing.T) {
	cost := func(cpu time.Duration) *Cost { return &Cost{CPUPerMsg: cpu, BrokerCPUPerMsg: 2 * cpu} }
	r := sampleReport()
	r.Broker = "RabbitMQ 4.3.6"
	r.Rows = append(r.Rows,
		Row{Queue: "quorum", Figure: FigDirectRate, Unit: UnitRate, Relay: ptr(2000), Raw: ptr(2500),
			Target: &Target{RatioAtLeast, 0.9}, RelayCost: cost(100 * time.Microsecond), RawCost: cost(95 * time.Microsecond)},
		Row{Queue: "quorum", Figure: FigNativeRate, Unit: UnitRate, Relay: ptr(1800), Raw: ptr(2000),
			Target: &Target{RatioAtLeast, 0.9}, RelayCost: cost(90 * time.Microsecond), RawCost: cost(60 * time.Microsecond)},
		Row{Queue: "quorum", Figure: FigNativeBrokerCPU, Unit: UnitMicros, Relay: ptr(180), Raw: ptr(120), Target: &Target{RatioAtMost, 1.3}},
	)
	r.Evaluate()
	var b bytes.Buffer
	if err := r.Render(&b, "markdown"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"**Retry with the native backend** (RabbitMQ 4.3's delayed retry, quorum queues only). relay against raw, quorum: 1,800 round trips/s against 2,000 (0.90×",
		"the raw dead-letter loop (nack, a TTL wait queue, dead-lettered back) 2,500 round trips/s at 190 µs of broker CPU each",
		"relay's direct hand-off 2,000 round trips/s at 200 µs",
		"the raw native loop 2,000 round trips/s at 120 µs", "relay's native backend 1,800 round trips/s at 180 µs",
		"relay native ÷ relay direct: 0.90×; raw native ÷ raw dead-letter loop: 0.80×",
		"Mnesia, which RabbitMQ 4.3.6 no longer has",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Mnesia table of its own") {
		t.Errorf("a 4.3 report says the plugin keeps its messages in Mnesia")
	}
	if got, want := r.classicMemoryNote(), "On RabbitMQ 4.3.6 every classic queue is of version 2"; !strings.HasPrefix(got, want) {
		t.Errorf("classic queues on 4.3: %q, want %q…", got, want)
	}
	// Before 4.3 the native rows say n/a, and why.
	r = sampleReport()
	r.Rows = append(r.Rows, Row{Queue: "quorum", Figure: FigNativeRate, Unit: UnitRate, Note: "n/a: RabbitMQ 4.3 or later"})
	b.Reset()
	if err := r.Render(&b, "markdown"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"**Retry with the native backend.** n/a: RabbitMQ 4.3 or later: RabbitMQ 4.3's delayed retry"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("3.10 report lacks %q", want)
		}
	}
}

func TestRenderJSON(t *testing.T) {
	r := sampleReport()
	var b bytes.Buffer
	if err := r.Render(&b, "json"); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatalf("the JSON report does not decode: %v\n%s", err, b.String())
	}
	if diff := cmp.Diff(r, &back); diff != "" {
		t.Errorf("JSON round trip (-rendered +decoded):\n%s", diff)
	}
	for _, want := range []string{`"verdict": "not met"`, `"note": "n/a: no plugin"`, `"ratio": 0.5`, `"http_floor_per_s": 12000`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("JSON report lacks %s", want)
		}
	}
}

func TestRenderUnknownFormat(t *testing.T) {
	if err := sampleReport().Render(&bytes.Buffer{}, "yaml"); err == nil {
		t.Error("Render(yaml) = nil, want an error")
	}
}

// historyReport is a report of the history's figures: SQLite against the
// worker, PostgreSQL skipped, and the reads of a full store.
func historyReport() *Report {
	r := sampleReport()
	r.Options.HistoryNotifications = 1_000_000
	r.HistoryFilled = 75 * time.Second
	r.Rows = append(r.Rows,
		Row{Queue: "classic", Figure: FigHistorySQLiteRate, Unit: UnitRate, Relay: ptr(18000), Raw: ptr(12000), Baseline: "worker",
			Target: &Target{RatioAtLeast, 1}, RelayCost: &Cost{CPUPerMsg: 90 * time.Microsecond, AllocsPerMsg: 120}},
		Row{Queue: "classic", Figure: FigHistoryPostgresRate, Unit: UnitRate, Raw: ptr(12000), Baseline: "worker",
			Note: "skipped: no PostgreSQL at 127.0.0.1:5432/test", Target: &Target{RatioAtLeast, 1}},
		Row{Figure: FigHistoryGetP50, Detail: "with 1,000,000 stored", Unit: UnitMs, Relay: ptr(0.33), Raw: ptr(0.16), Baseline: "store.Get"},
		Row{Figure: FigHistoryGetP99, Detail: "with 1,000,000 stored", Unit: UnitMs, Relay: ptr(1.2), Raw: ptr(0.48), Baseline: "store.Get"},
	)
	return r
}

func TestRenderHistory(t *testing.T) {
	r := historyReport()
	var b bytes.Buffer
	if err := r.Render(&b, "markdown"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"| classic | history (sqlite): events stored/s | 18,000/s | 12,000/s (worker) | 1.50× | ≥ 1.00× worker | met |",
		"| classic | history (postgres): events stored/s | skipped: no PostgreSQL at 127.0.0.1:5432/test | skipped: no PostgreSQL at 127.0.0.1:5432/test | — | ≥ 1.00× worker | — |",
		"| — | history: GET /v1/notifications/{id} p99 with 1,000,000 stored | 1.20 ms | 0.48 ms (store.Get) | 2.50× | — | — |",
		"1000000 notifications in the history while 10000 reads are timed",
		"**History.**", "`DATA_DIR/history.db`", "batches of 500 messages",
		"the worker's messages/s of this run on classic queues, its fastest: 12,000/s",
		"SQLite: 18,000/s (1.50× the worker, target met), 90 µs of CPU and 120 allocations per event.", "The ids are the API's: time-ordered",
		"PostgreSQL: skipped: no PostgreSQL at 127.0.0.1:5432/test. The ids",
		"**Reading the history.** A SQLite store was filled with 1,000,000 notifications",
		"that took 1m15s (13,333 notifications/s", "made in order and loaded in that order",
		"10,000 GET /v1/notifications/{id}", "p50 0.33 ms and p99 1.20 ms through the API, 0.16 ms and 0.48 ms for `Get` alone",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown report lacks %q:\n%s", want, out)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "| ") {
			if got := strings.Count(l, " | ") + 1; got != len(columns) {
				t.Errorf("table line has %d cells, want %d: %q", got, len(columns), l)
			}
		}
	}

	// Without the worker, the rates have nothing to be held against.
	r = historyReport()
	r.Rows = r.Rows[len(r.Rows)-4:]
	r.Rows[0].Queue, r.Rows[0].Raw = "", nil
	b.Reset()
	if err := r.Render(&b, "markdown"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| — | history (sqlite): events stored/s | 18,000/s | — | — | ≥ 1.00× worker | — |",
		"the worker was not measured in this run",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("markdown report without the worker lacks %q:\n%s", want, b.String())
		}
	}

	b.Reset()
	r = historyReport()
	if err := r.Render(&b, "json"); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, &back); diff != "" {
		t.Errorf("JSON round trip (-rendered +decoded):\n%s", diff)
	}
}
