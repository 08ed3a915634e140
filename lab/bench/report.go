package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"
)

// The figures of the table, one row each per queue type.
const (
	FigIngestRate = "ingest: requests/s vs publishes/s"
	FigIngestP50  = "ingest: latency p50"
	FigIngestP99  = "ingest: latency p99"
	// FigBatchRate is POST /v1/notifications/batch in notifications/s
	// against the raw publisher of the ingest figure.
	FigBatchRate = "ingest (batch): notifications/s vs publishes/s"
	// FigIngestMinimal and FigBatchMinimal hold the API against a minimal
	// net/http service publishing one confirmed message per notification.
	FigIngestMinimal = "ingest: requests/s vs a minimal HTTP publisher"
	FigBatchMinimal  = "ingest (batch): notifications/s vs a minimal HTTP publisher"
	FigWorkerRate    = "worker: messages/s"
	// The retry figures: TTL and plugin, each through the stages and with
	// the direct hand-off, against the same raw loop.
	FigRetryRate             = "retry (ttl): round trips/s"
	FigRetryP50              = "retry (ttl): extra latency p50"
	FigRetryP99              = "retry (ttl): extra latency p99"
	FigRetryBrokerCPU        = "retry (ttl): broker CPU per round trip"
	FigDirectRate            = "retry (ttl, direct): round trips/s"
	FigDirectP50             = "retry (ttl, direct): extra latency p50"
	FigDirectP99             = "retry (ttl, direct): extra latency p99"
	FigDirectBrokerCPU       = "retry (ttl, direct): broker CPU per round trip"
	FigPluginRate            = "retry (plugin): round trips/s"
	FigPluginP50             = "retry (plugin): extra latency p50"
	FigPluginP99             = "retry (plugin): extra latency p99"
	FigPluginBrokerCPU       = "retry (plugin): broker CPU per round trip"
	FigPluginDirectRate      = "retry (plugin, direct): round trips/s"
	FigPluginDirectP50       = "retry (plugin, direct): extra latency p50"
	FigPluginDirectP99       = "retry (plugin, direct): extra latency p99"
	FigPluginDirectBrokerCPU = "retry (plugin, direct): broker CPU per round trip"
	// The native figures: RabbitMQ 4.3's delayed retry on a quorum queue,
	// relay's consumer against a raw consumer of the same queue arguments.
	FigNativeRate      = "retry (native): round trips/s"
	FigNativeP50       = "retry (native): extra latency p50"
	FigNativeP99       = "retry (native): extra latency p99"
	FigNativeBrokerCPU = "retry (native): broker CPU per round trip"
	// The memory figures, with Options.Waiting messages in the delay
	// stage: per queue type on TTL, once on the plugin.
	FigDelayedRSS          = "memory (ttl): RSS while messages wait in the delay stage"
	FigDelayedGrowth       = "memory (ttl): RSS growth while they pile up"
	FigBrokerGrowth        = "memory (ttl): broker mem_used growth"
	FigBrokerPerMsg        = "memory (ttl): broker mem_used per waiting message"
	FigBrokerAllocPerMsg   = "memory (ttl): broker allocated per waiting message"
	FigBrokerQueue         = "memory (ttl): wait queue's own memory"
	FigPluginDelayedRSS    = "memory (plugin): RSS while messages wait in the delay stage"
	FigPluginDelayedGrowth = "memory (plugin): RSS growth while they pile up"
	FigPluginBrokerGrowth  = "memory (plugin): broker mem_used growth"
	FigPluginBrokerPerMsg  = "memory (plugin): broker mem_used per waiting message"
	FigPluginAllocPerMsg   = "memory (plugin): broker allocated per waiting message"
	FigStreamsIdle         = "dashboard: API RSS idle"
	FigStreamsOpen         = "dashboard: API RSS with idle event streams open"
	FigStreamsClosed       = "dashboard: API RSS after the streams closed"
	// The history's figures are measured once a run, not per queue type.
	FigHistorySQLiteRate   = "history (sqlite): events stored/s"
	FigHistoryPostgresRate = "history (postgres): events stored/s"
	FigHistoryGetP50       = "history: GET /v1/notifications/{id} p50"
	FigHistoryGetP99       = "history: GET /v1/notifications/{id} p99"
)

// Units of the figures.
const (
	UnitRate   = "/s"
	UnitMs     = "ms"
	UnitMiB    = "MiB"
	UnitMicros = "µs"
	UnitBytes  = "B"
)

// Verdicts of a row against its target.
const (
	Met    = "met"
	NotMet = "not met"
)

// TargetKind says how a Target compares.
type TargetKind string

// The kinds of target.
const (
	// RatioAtLeast: relay ÷ raw must be at least Value.
	RatioAtLeast TargetKind = "ratio-at-least"
	// RatioAtMost: relay ÷ raw must be at most Value.
	RatioAtMost TargetKind = "ratio-at-most"
	// AtMost: relay's figure must be at most Value, in the row's unit.
	AtMost TargetKind = "at-most"
)

// Target is what a figure should reach. It is reported, never asserted.
type Target struct {
	Kind  TargetKind `json:"kind"`
	Value float64    `json:"value"`
}

// Describe writes the target for a row in unit, such as "≥ 0.80× raw".
func (t Target) Describe(unit string) string { return t.describe(unit, "") }

// describe writes the target for a row in unit whose ratio is against
// baseline; empty means raw.
func (t Target) describe(unit, baseline string) string {
	if baseline == "" {
		baseline = "raw"
	}
	switch t.Kind {
	case RatioAtLeast:
		return fmt.Sprintf("≥ %.2f× %s", t.Value, baseline)
	case RatioAtMost:
		return fmt.Sprintf("≤ %.2f× %s", t.Value, baseline)
	case AtMost:
		return fmt.Sprintf("≤ %s %s", trimFloat(t.Value), unit)
	}
	return string(t.Kind)
}

// Verdict says whether relay's figure (and raw's, for a ratio) meets the
// target: Met, NotMet, or "" when a figure is missing.
func (t Target) Verdict(relay, raw *float64) string {
	if relay == nil {
		return ""
	}
	ok := false
	switch t.Kind {
	case RatioAtLeast, RatioAtMost:
		r := ratio(relay, raw)
		if r == nil {
			return ""
		}
		if t.Kind == RatioAtLeast {
			ok = *r >= t.Value
		} else {
			ok = *r <= t.Value
		}
	case AtMost:
		ok = *relay <= t.Value
	default:
		return ""
	}
	if ok {
		return Met
	}
	return NotMet
}

// ratio is relay ÷ raw, or nil when either is missing or raw is zero.
func ratio(relay, raw *float64) *float64 {
	if relay == nil || raw == nil || *raw == 0 || math.IsNaN(*relay) || math.IsNaN(*raw) {
		return nil
	}
	r := *relay / *raw
	return &r
}

// Row is one figure on one queue type: relay's value next to the raw
// amqp091-go baseline's, their ratio and the target's verdict.
type Row struct {
	// Queue is the queue type; empty for a figure no queue takes part in.
	Queue  string `json:"queue"`
	Figure string `json:"figure"`
	// Detail follows the figure's name in the table, such as how many
	// notifications the store held.
	Detail string   `json:"detail,omitempty"`
	Unit   string   `json:"unit"`
	Relay  *float64 `json:"relay"`
	Raw    *float64 `json:"raw"`
	// Baseline names what Raw is when it is not the raw amqp091-go side,
	// such as "worker" for the history's rate held against the worker's.
	Baseline string `json:"baseline,omitempty"`
	// Note stands in for figures that were not measured, with the reason.
	Note   string  `json:"note,omitempty"`
	Target *Target `json:"target,omitempty"`
	// Ratio and Verdict are filled by Evaluate.
	Ratio   *float64 `json:"ratio"`
	Verdict string   `json:"verdict,omitempty"`
	// RelayCost and RawCost are the per-message costs of the runs a
	// throughput row was measured in.
	RelayCost *Cost `json:"relay_cost,omitempty"`
	RawCost   *Cost `json:"raw_cost,omitempty"`
}

// Report is the outcome of one bench run.
type Report struct {
	Machine Machine `json:"machine"`
	Broker  string  `json:"broker"`
	Command string  `json:"command"`
	// Prefix starts the name of everything the run declared (and deleted).
	Prefix  string        `json:"prefix"`
	Started time.Time     `json:"started"`
	Elapsed time.Duration `json:"elapsed_ns"`
	Options Options       `json:"options"`
	Rows    []Row         `json:"rows"`
	// HTTPFloor is what net/http alone does on this machine with the
	// ingest figure's clients and body and no broker at all, in requests
	// per second: the ceiling of any HTTP ingest here. Zero when the
	// ingest figure was not measured.
	HTTPFloor float64 `json:"http_floor_per_s"`
	// StreamsSettled is how long after the dashboard's event streams
	// closed the API's RSS was back within 10 % of idle (or the time the
	// figure gave up waiting). Zero when the streams figure was not
	// measured.
	StreamsSettled time.Duration `json:"streams_settled_ns"`
	// HistoryFilled is how long filling the history with
	// Options.HistoryNotifications took, for the GET figure. Zero when
	// that figure was not measured.
	HistoryFilled time.Duration `json:"history_filled_ns"`
	// BrokerMemLimit is the broker's memory high watermark (mem_limit)
	// as the management API reported it before the memory figure; zero
	// when it was not read.
	BrokerMemLimit uint64 `json:"broker_mem_limit_bytes,omitempty"`
	// Isolation is the webhook endpoints' isolation: a healthy endpoint's
	// figures beside a sick one, with and without the breaker. Nil when
	// that figure was not measured.
	Isolation *IsolationResult `json:"isolation,omitempty"`
	// Noisy is how far one receiver's backlog holds back another's
	// webhooks, with and without lanes.
	Noisy *NoisyResult `json:"noisy,omitempty"`
	// RateLimits are the email channel under a limit, one per delay
	// backend: the throughput that reached the mail server against the
	// limit, and its busiest second.
	RateLimits []RateLimitResult `json:"rate_limits,omitempty"`
	// DeadLetters is a bulk replay job over a dead-letter queue. Nil
	// when that figure was not measured.
	DeadLetters *DeadLettersResult `json:"dead_letters,omitempty"`
}

// Evaluate fills each row's ratio and verdict.
func (r *Report) Evaluate() {
	for i := range r.Rows {
		row := &r.Rows[i]
		row.Ratio = ratio(row.Relay, row.Raw)
		row.Verdict = ""
		if row.Target != nil {
			row.Verdict = row.Target.Verdict(row.Relay, row.Raw)
		}
	}
}

// Row returns the row of a figure on a queue type.
func (r *Report) Row(queue, figure string) (Row, bool) {
	for _, row := range r.Rows {
		if row.Queue == queue && row.Figure == figure {
			return row, true
		}
	}
	return Row{}, false
}

// Render writes the report in format: text, markdown or json.
func (r *Report) Render(w io.Writer, format string) error {
	r.Evaluate()
	switch format {
	case "text":
		return r.text(w)
	case "markdown":
		return r.markdown(w)
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	return fmt.Errorf("report format %q: want text, markdown or json", format)
}

// columns are the table's headings.
var columns = []string{"queue", "figure", "relay", "raw", "relay ÷ raw", "target", "verdict",
	"CPU µs/msg relay / raw", "broker CPU µs/msg relay / raw", "allocs/msg relay / raw", "peak RSS MiB relay / raw"}

// cells writes a row as the table's cells.
func (row Row) cells() []string {
	relay, raw := formatValue(row.Relay, row.Unit), formatValue(row.Raw, row.Unit)
	if row.Raw != nil && row.Baseline != "" {
		raw += " (" + row.Baseline + ")"
	}
	if row.Note != "" {
		relay, raw = row.Note, row.Note
	}
	ratioText, target := "—", "—"
	if row.Ratio != nil {
		ratioText = fmt.Sprintf("%.2f×", *row.Ratio)
	}
	if row.Target != nil {
		target = row.Target.describe(row.Unit, row.Baseline)
	}
	verdict := row.Verdict
	if verdict == "" {
		verdict = "—"
	}
	queue, figure := row.Queue, row.Figure
	if queue == "" {
		queue = "—"
	}
	if row.Detail != "" {
		figure += " " + row.Detail
	}
	return []string{queue, figure, relay, raw, ratioText, target, verdict,
		costPair(row.RelayCost, row.RawCost, func(c Cost) string { return fmt.Sprintf("%.1f", float64(c.CPUPerMsg)/1e3) }),
		costPair(row.RelayCost, row.RawCost, func(c Cost) string {
			if c.BrokerCPUPerMsg == 0 {
				return "—" // the broker's process was not visible
			}
			return fmt.Sprintf("%.1f", float64(c.BrokerCPUPerMsg)/1e3)
		}),
		costPair(row.RelayCost, row.RawCost, func(c Cost) string { return fmt.Sprintf("%.0f", c.AllocsPerMsg) }),
		costPair(row.RelayCost, row.RawCost, func(c Cost) string { return fmt.Sprintf("%.1f", mib(c.PeakRSS)) }),
	}
}

func costPair(relay, raw *Cost, f func(Cost) string) string {
	if relay == nil && raw == nil {
		return "—"
	}
	side := func(c *Cost) string {
		if c == nil {
			return "—"
		}
		return f(*c)
	}
	return side(relay) + " / " + side(raw)
}

// formatValue writes a figure in its unit: rates whole with thousands
// separators, milliseconds and MiB with a sensible number of digits.
func formatValue(v *float64, unit string) string {
	if v == nil {
		return "—"
	}
	switch unit {
	case UnitRate:
		return thousands(int64(math.Round(*v))) + UnitRate
	case UnitMs:
		switch a := math.Abs(*v); {
		case a < 10:
			return fmt.Sprintf("%.2f ms", *v)
		case a < 100:
			return fmt.Sprintf("%.1f ms", *v)
		default:
			return fmt.Sprintf("%.0f ms", *v)
		}
	case UnitMiB:
		return fmt.Sprintf("%.1f MiB", *v)
	case UnitMicros:
		if math.Abs(*v) < 100 {
			return fmt.Sprintf("%.1f µs", *v)
		}
		return fmt.Sprintf("%.0f µs", *v)
	case UnitBytes:
		return fmt.Sprintf("%.0f B", *v)
	}
	return trimFloat(*v) + " " + unit
}

// thousands writes n with commas between groups of three digits.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func trimFloat(v float64) string { return fmt.Sprintf("%g", v) }

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func (r *Report) text(w io.Writer) error {
	if _, err := fmt.Fprintf(w, "relay-lab bench: %s\nmachine: %s, %d cores, %s, %s\nbroker: %s\nelapsed: %s\n",
		r.Command, r.Machine.CPU, r.Machine.Cores, r.Machine.Go, r.Machine.OS, r.Broker, r.Elapsed.Round(time.Second)); err != nil {
		return err
	}
	if r.HTTPFloor > 0 {
		if _, err := fmt.Fprintf(w, "net/http alone, no broker: %s requests/s\n", thousands(int64(r.HTTPFloor))); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintln(w); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(columns, "\t"))
	for _, row := range r.Rows {
		fmt.Fprintln(tw, strings.Join(row.cells(), "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for i, rl := range r.RateLimits {
		if i == 0 {
			fmt.Fprintln(w)
		}
		if _, err := fmt.Fprintf(w, "rate limit %g/s (burst %d), %d email workers, %s backend on %s queues: %.1f/s, %.0f %% of the limit; most in a second %d (in any one-second window %d); %d of %d delivered, %d twice; %d deferrals, %d late for their slot; load %.1f\n",
			rl.Options.Rate, rl.Options.Burst, rl.Options.Replicas, rl.Options.Backend, rl.Options.QueueType, rl.Throughput, rl.Ratio*100, rl.MaxInSecond, rl.MaxInWindow,
			rl.Delivered, rl.Options.Emails, rl.Duplicates, rl.Deferrals, rl.Missed, rl.Load); err != nil {
			return err
		}
	}
	if d := r.DeadLetters; d != nil {
		if _, err := fmt.Fprintf(w, "\ndead letters, %s queues: a replay job of %d of %d parked copies in %s (%.0f/s); RSS %.1f MiB before, %.1f MiB at most; %d arrived, %d twice, %d lost; %d left parked\n",
			d.Options.QueueType, d.Selected, d.Options.Copies, fmtDur(d.Elapsed), d.PerSecond, mib(d.RSSBefore), mib(d.RSSPeak), d.Arrived, d.Duplicates, d.Lost, d.LeftParked); err != nil {
			return err
		}
	}
	if r.Noisy != nil {
		fmt.Fprintln(w)
		for _, n := range r.Noisy.Rows {
			if _, err := fmt.Fprintf(w, "noisy neighbour, %s, WORK_LANES=%d (one lane: %s): B p99 %s alone, %s while A floods (%.1fx; the API's answer %s; after A's POSTs, answered in %s: %s, %s), %d not arrived; A %.1f/s alone, %.1f/s beside B (%.2fx); targets met: %s\n",
				noisyReceiversLabel(n.Receivers), n.Lanes, yesNo(n.SameLane), fmtDur(n.BAlone.P99), fmtDur(n.BFlood.P99), n.P99Ratio, fmtDur(n.BAccept.P99),
				fmtDur(n.APosts), latencyOrNone(n.BAfterPosts.P99, n.BAfterPosts.N), ratioOrNone(n.AfterRatio), n.BMissing,
				n.AAlone, n.ABeside, n.ThroughputRatio, yesNo(n.Meets)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Table writes the rows as a Markdown table.
func (r *Report) Table(w io.Writer) error {
	r.Evaluate()
	var b strings.Builder
	b.WriteString("| " + strings.Join(columns, " | ") + " |\n")
	b.WriteString(strings.Repeat("|---", len(columns)) + "|\n")
	for _, row := range r.Rows {
		cells := row.cells()
		for i, c := range cells {
			cells[i] = strings.ReplaceAll(c, "|", `\|`)
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
