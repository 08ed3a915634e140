package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/retry"
)

// handoffReport is a report of the figures of issue #16 as a run of both
// queue types without the plugin makes them: batch ingest, the retry
// hand-offs with their broker CPU, and the memory with the broker's.
func handoffReport() *Report {
	cost := func(cpu, broker time.Duration, allocs float64) *Cost {
		return &Cost{CPUPerMsg: cpu, AllocsPerMsg: allocs, PeakRSS: 30 << 20, BrokerCPUPerMsg: broker}
	}
	r := &Report{
		Machine: Machine{CPU: "Test CPU 3000", Cores: 2, Go: "go1.26.8", OS: "linux/amd64"},
		Broker:  "RabbitMQ 3.10.8", Command: "relay-lab bench --format markdown", Prefix: "bench.0123abcd.",
		Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Elapsed: 9 * time.Minute, BrokerMemLimit: 10000 << 20,
		Options: Options{Format: "markdown", Clients: 64, BatchSize: 100, BatchClients: 8, Prefetch: 16, Concurrency: 8, Window: 16,
			Delay: 50 * time.Millisecond, Waiting: 1_000_000, Ingest: 20000, Consume: 50000, RoundTrips: 5000, Latency: 1000, Rounds: 2},
	}
	raw := cost(90*time.Microsecond, 260*time.Microsecond, 235)
	for _, q := range []string{"classic", "quorum"} {
		direct := 2300.0
		if q == "quorum" {
			direct = 2000 // 0.80×: the goal missed on one queue type only
		}
		r.Rows = append(r.Rows,
			Row{Queue: q, Figure: FigBatchRate, Detail: "(100 per request)", Unit: UnitRate, Relay: ptr(9000), Raw: ptr(12000),
				Target: &Target{RatioAtLeast, batchTarget}, RelayCost: cost(250*time.Microsecond, 330*time.Microsecond, 307),
				RawCost: cost(30*time.Microsecond, 100*time.Microsecond, 41)},
			Row{Queue: q, Figure: FigRetryRate, Unit: UnitRate, Relay: ptr(1000), Raw: ptr(2500),
				Target: &Target{RatioAtLeast, retryRateTarget}, RelayCost: cost(350*time.Microsecond, 700*time.Microsecond, 651), RawCost: raw},
			Row{Queue: q, Figure: FigRetryP50, Unit: UnitMs, Relay: ptr(3.3), Raw: ptr(2.9)},
			Row{Queue: q, Figure: FigRetryP99, Unit: UnitMs, Relay: ptr(7.9), Raw: ptr(6.5), Target: &Target{RatioAtMost, retryP99Target}},
			Row{Queue: q, Figure: FigRetryBrokerCPU, Unit: UnitMicros, Relay: ptr(700), Raw: ptr(260), Target: &Target{RatioAtMost, retryBrokerCPUTarget}},
			Row{Queue: q, Figure: FigDirectRate, Unit: UnitRate, Relay: ptr(direct), Raw: ptr(2500),
				Target: &Target{RatioAtLeast, retryRateTarget}, RelayCost: cost(150*time.Microsecond, 320*time.Microsecond, 335), RawCost: raw},
			Row{Queue: q, Figure: FigDirectP50, Unit: UnitMs, Relay: ptr(2.5), Raw: ptr(2.9)},
			Row{Queue: q, Figure: FigDirectP99, Unit: UnitMs, Relay: ptr(9), Raw: ptr(6.5), Target: &Target{RatioAtMost, retryP99Target}},
			Row{Queue: q, Figure: FigDirectBrokerCPU, Unit: UnitMicros, Relay: ptr(320), Raw: ptr(260), Target: &Target{RatioAtMost, retryBrokerCPUTarget}},
			Row{Queue: q, Figure: FigPluginRate, Unit: UnitRate, Note: "n/a: no plugin", Target: &Target{RatioAtLeast, retryRateTarget}},
			Row{Queue: q, Figure: FigPluginBrokerCPU, Unit: UnitMicros, Note: "n/a: no plugin", Target: &Target{RatioAtMost, retryBrokerCPUTarget}},
			Row{Queue: q, Figure: FigPluginDirectRate, Unit: UnitRate, Note: "n/a: no plugin", Target: &Target{RatioAtLeast, retryRateTarget}},
			Row{Queue: q, Figure: FigPluginDirectBrokerCPU, Unit: UnitMicros, Note: "n/a: no plugin", Target: &Target{RatioAtMost, retryBrokerCPUTarget}},
		)
	}
	// The broker's memory: read on classic, the management API gone by
	// the time quorum was measured.
	classic := waited{waiting: 24 << 20, growth: 1 << 20, broker: &brokerWaited{
		before: nodeMemory{Used: 500 << 20, Allocated: 300 << 20},
		after:  nodeMemory{Used: 4000 << 20, Allocated: 2500 << 20}, queue: &queueMemory{Messages: 1_000_000, Memory: 1200 << 20}}}
	quorum := waited{waiting: 25 << 20, growth: 2 << 20, note: "n/a: management API unreachable at http://localhost:15672"}
	r.Rows = append(r.Rows, waitedRows(retry.Classic, retry.TTL, classic, 1_000_000)...)
	r.Rows = append(r.Rows, waitedRows(retry.Quorum, retry.TTL, quorum, 1_000_000)...)
	r.Rows = append(r.Rows, Row{Figure: FigPluginBrokerGrowth, Unit: UnitMiB, Note: "n/a: no plugin"})
	return r
}

func TestRenderHandoffs(t *testing.T) {
	r := handoffReport()
	var b bytes.Buffer
	if err := r.Render(&b, "markdown"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		// The table: every new row, its target and verdict.
		"| classic | ingest (batch): notifications/s vs publishes/s (100 per request) | 9,000/s | 12,000/s | 0.75× | ≥ 1.00× raw | not met | 250.0 / 30.0 | 330.0 / 100.0 | 307 / 41 |",
		"| classic | retry (ttl): round trips/s | 1,000/s | 2,500/s | 0.40× | ≥ 0.90× raw | not met |",
		"| classic | retry (ttl): broker CPU per round trip | 700 µs | 260 µs | 2.69× | ≤ 1.30× raw | not met | — |",
		"| classic | retry (ttl, direct): round trips/s | 2,300/s | 2,500/s | 0.92× | ≥ 0.90× raw | met | 150.0 / 90.0 | 320.0 / 260.0 | 335 / 235 |",
		"| quorum | retry (ttl, direct): round trips/s | 2,000/s | 2,500/s | 0.80× | ≥ 0.90× raw | not met |",
		"| classic | retry (ttl, direct): extra latency p99 | 9.00 ms | 6.50 ms | 1.38× | ≤ 2.00× raw | met |",
		"| classic | retry (ttl, direct): broker CPU per round trip | 320 µs | 260 µs | 1.23× | ≤ 1.30× raw | met |",
		"| quorum | retry (plugin, direct): round trips/s | n/a: no plugin | n/a: no plugin | — | ≥ 0.90× raw | — |",
		"| quorum | retry (plugin, direct): broker CPU per round trip | n/a: no plugin | n/a: no plugin | — | ≤ 1.30× raw | — |",
		"| classic | memory (ttl): RSS while messages wait in the delay stage | 24.0 MiB | — | — | ≤ 50 MiB | met |",
		"| classic | memory (ttl): broker mem_used growth | 3500.0 MiB | — |",
		"| classic | memory (ttl): broker mem_used per waiting message | 3670 B | — |",
		"| classic | memory (ttl): broker allocated per waiting message | 2307 B | — |",
		"| classic | memory (ttl): wait queue's own memory | 1200.0 MiB | — |",
		"| quorum | memory (ttl): broker mem_used growth | n/a: management API unreachable at http://localhost:15672 |",
		"| — | memory (plugin): broker mem_used growth | n/a: no plugin | n/a: no plugin |",
		"batches of 100 notifications from 8 clients, 20000 notifications per side",
		"1000000 messages waiting in the delay stage of each backend",
		// The prose, with this run's numbers and the reasons goals are missed.
		"**Ingest in batches.** relay against raw, classic: 9,000 notifications/s against 12,000 (0.75×, target not met)",
		"100 notifications per `POST /v1/notifications/batch` from 8 keep-alive clients at once (20,000 notifications per side)",
		"Per notification the broker spent 330 µs (classic), 330 µs (quorum) against 100 µs (classic), 100 µs (quorum) per raw publish (3.30× (classic), 3.30× (quorum))",
		"classic: 580 µs of CPU, this process and the broker together, against 130 µs (4.46×)",
		"The goal (≥ 1.00× raw) is not met, and batching cannot meet it alone",
		"**Retry round trip through the stages.** relay against raw, classic: 1,000 round trips/s against 2,500 (0.40×, target not met)",
		"Its CPU per round trip (its own row, target ≤ 1.30× raw): classic: 700 µs against 260 µs (2.69×, target not met)",
		"The goal (≥ 0.90× raw) is not met: the two hops are the measured reason, costing the broker 2.69× (classic), 2.69× (quorum) the raw loop's CPU per round trip and this process 3.89× (classic), 3.89× (quorum)",
		"The direct hand-off, next, removes both hops.",
		"**Retry with the direct hand-off.** relay against raw, classic: 2,300 round trips/s against 2,500 (0.92×, target met); quorum: 2,000 round trips/s against 2,500 (0.80×, target not met). The raw loop is the one above",
		"per round trip classic: 320 µs against 260 µs (1.23×, target met)",
		"relay's consumer runs 8 handlers", "that time was 6.96ms (classic), 8ms (quorum)",
		"The goal (≥ 0.90× raw) is not met on quorum: the measured reason is that one confirmed publish per retry",
		"classic: 2.50 ms at p50 against 2.90 (0.86×)",
		"**Retry with the delayed-message plugin.** n/a: no plugin: the broker has no `x-delayed-message` exchange type, so only the TTL backend was measured, through the stages and with the direct hand-off.",
		"**Memory.** 1,000,000 messages waited in the delay stage of each backend",
		"relay's RSS: TTL classic 24.0 MiB (growth 1.0 MiB); TTL quorum 25.0 MiB (growth 2.0 MiB)",
		"TTL classic: mem_used +3500.0 MiB, 3670 B per waiting message (allocated: 2307 B), the wait queue's own process 1200.0 MiB (1258 B per message); at that size, were nothing paged out, the node's mem_limit (10000 MiB) would be reached at about 2,857,142 waiting messages",
		"TTL quorum: n/a: management API unreachable at http://localhost:15672; plugin: n/a: no plugin.",
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

	b.Reset()
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

// TestRenderHandoffsAlone renders the direct hand-off without the stages
// and the batch ingest without the single one: the prose refers to
// neither.
func TestRenderHandoffsAlone(t *testing.T) {
	r := handoffReport()
	var rows []Row
	for _, row := range r.Rows {
		if row.Figure != FigRetryRate && row.Figure != FigRetryP50 && row.Figure != FigRetryP99 && row.Figure != FigRetryBrokerCPU &&
			row.Figure != FigPluginRate && row.Figure != FigPluginBrokerCPU {
			rows = append(rows, row)
		}
	}
	r.Rows = rows
	var b bytes.Buffer
	if err := r.Render(&b, "markdown"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, unwanted := range []string{"**Retry round trip through the stages.**", "The raw loop is the one above", "**Ingest.**", "through the stages and"} {
		if strings.Contains(out, unwanted) {
			t.Errorf("markdown report has %q:\n%s", unwanted, out)
		}
	}
	for _, want := range []string{"**Retry with the direct hand-off.**", "so only the TTL backend was measured, with the direct hand-off."} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown report lacks %q:\n%s", want, out)
		}
	}
}

func TestWaitedRows(t *testing.T) {
	w := waited{waiting: 30 << 20, growth: 1 << 20, broker: &brokerWaited{
		before: nodeMemory{Used: 1000 << 20, Allocated: 600 << 20},
		after:  nodeMemory{Used: 900 << 20, Allocated: 700 << 20}}}
	tests := []struct {
		name    string
		qt      retry.QueueType
		backend retry.Backend
		w       waited
		want    []Row
	}{
		{"plugin: no queue type, no wait queue; the node freed more than the messages took", retry.Classic, retry.Plugin, w, []Row{
			{Figure: FigPluginDelayedRSS, Unit: UnitMiB, Relay: ptr(30), Target: &Target{AtMost, maxRSSMiB}},
			{Figure: FigPluginDelayedGrowth, Unit: UnitMiB, Relay: ptr(1), Target: &Target{AtMost, maxGrowthMiB}},
			{Figure: FigPluginBrokerGrowth, Unit: UnitMiB, Relay: ptr(-100)},
			{Figure: FigPluginBrokerPerMsg, Unit: UnitBytes, Relay: ptr(-100 * (1 << 20) / 1000.0)},
			{Figure: FigPluginAllocPerMsg, Unit: UnitBytes, Relay: ptr(100 * (1 << 20) / 1000.0)},
		}},
		{"management API unreachable", retry.Quorum, retry.TTL, waited{waiting: 30 << 20, note: "n/a: management API: no"}, []Row{
			{Queue: "quorum", Figure: FigDelayedRSS, Unit: UnitMiB, Relay: ptr(30), Target: &Target{AtMost, maxRSSMiB}},
			{Queue: "quorum", Figure: FigDelayedGrowth, Unit: UnitMiB, Relay: ptr(0), Target: &Target{AtMost, maxGrowthMiB}},
			{Queue: "quorum", Figure: FigBrokerGrowth, Unit: UnitMiB, Note: "n/a: management API: no"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, waitedRows(tt.qt, tt.backend, tt.w, 1000)); diff != "" {
				t.Errorf("waitedRows (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFormatValueIssue16Units(t *testing.T) {
	for _, tt := range []struct {
		v    float64
		unit string
		want string
	}{
		{702.4, UnitMicros, "702 µs"},
		{45.25, UnitMicros, "45.2 µs"},
		{3670.4, UnitBytes, "3670 B"},
		{-5254, UnitBytes, "-5254 B"},
	} {
		if got := formatValue(&tt.v, tt.unit); got != tt.want {
			t.Errorf("formatValue(%v, %q) = %q, want %q", tt.v, tt.unit, got, tt.want)
		}
	}
}

func TestRetryNames(t *testing.T) {
	seen := map[string]bool{}
	for _, backend := range []retry.Backend{retry.TTL, retry.Plugin} {
		for _, who := range []string{sideStages, sideDirect} {
			f := retryNames(backend, who)
			for _, name := range []string{f.rate, f.p50, f.p99, f.broker} {
				if seen[name] {
					t.Errorf("%s %s: %q names another row too", backend, who, name)
				}
				seen[name] = true
				prefix := "retry (" + string(backend)
				if who == sideDirect {
					prefix += ", direct"
				}
				if !strings.HasPrefix(name, prefix+"): ") {
					t.Errorf("%s %s: %q, want it to start with %q", backend, who, name, prefix+"): ")
				}
			}
		}
	}
}

func TestBatchBody(t *testing.T) {
	var req struct {
		Notifications []json.RawMessage `json:"notifications"`
	}
	if err := json.Unmarshal(batchBody(3), &req); err != nil {
		t.Fatal(err)
	}
	if len(req.Notifications) != 3 {
		t.Fatalf("batch of %d notifications, want 3", len(req.Notifications))
	}
	for i, n := range req.Notifications {
		if !bytes.Equal(n, requestBody) {
			t.Errorf("notification %d is %s, want %s", i, n, requestBody)
		}
	}
}
