package bench

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relay-demo/relay/retry"
)

// proseReport is sampleReport with every figure that has prose of its
// own: scheduled sends, the rate limit on two backends and the noisy
// neighbour, with its tenants row.
func proseReport() *Report {
	r := sampleReport()
	r.Options.Scheduled = 10000
	for _, q := range []string{"classic", "quorum"} {
		r.Rows = append(r.Rows,
			Row{Queue: q, Figure: FigScheduleP50, Unit: UnitMs, Relay: ptr(41.5)},
			Row{Queue: q, Figure: FigScheduleP99, Unit: UnitMs, Relay: ptr(77.3), Target: &Target{AtMost, scheduleP99Target}},
			Row{Queue: q, Figure: FigScheduleMax, Unit: UnitMs, Relay: ptr(81.9)},
			Row{Queue: q, Figure: FigScheduleEarly, Unit: unitNotifications, Relay: ptr(0), Target: &Target{AtMost, 0}},
		)
	}
	for _, be := range []retry.Backend{retry.TTL, retry.Levels} {
		o := RateLimitOptions{Backend: be}.withDefaults()
		r.RateLimits = append(r.RateLimits, RateLimitResult{Options: o, Load: 1.5, Delivered: o.Emails,
			Throughput: 49.6, Ratio: 0.992, MaxInSecond: 50, MaxInWindow: 52, WithinLimit: true, Deferrals: 1200})
	}
	r.Noisy = &NoisyResult{Options: NoisyOptions{Receivers: NoisyReceivers}.withDefaults(), WorkerConcurrency: 8, EndpointConcurrency: 4}
	r.DeadLetters = &DeadLettersResult{Options: DeadLettersOptions{}.withDefaults(), Selected: 50000, Elapsed: 333 * time.Second,
		PerSecond: 150.2, RSSBefore: 36 << 20, RSSPeak: 41 << 20, Arrived: 50000, LeftParked: 50000}
	return r
}

// renderMarkdown renders r as the page and returns it.
func renderMarkdown(t *testing.T, r *Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := r.Render(&b, "markdown"); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestMarkdownProseFollowsTheReport changes one input of the report per
// row and checks that the page's prose says what the report holds, and
// nothing of what it no longer holds.
func TestMarkdownProseFollowsTheReport(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*Report)
		want    []string
		notWant []string
	}{
		{
			name:   "ingest figures",
			change: func(r *Report) { *r.Rows[0].Relay, *r.Rows[0].Raw = 7777, 15554 },
			want:   []string{"classic: 7,777 requests/s against 15,554 (0.50×"},
			// The quorum row keeps its own figures.
			notWant: []string{"classic: 6,000 requests/s"},
		},
		{
			name:    "no CPU profile, no word of one",
			change:  func(r *Report) {},
			notWant: []string{"profile", "pprof", "a fifth", "a third", "half"},
		},
		{
			name:   "a CPU profile the run wrote",
			change: func(r *Report) { r.Options.CPUProfile = "ingest.pprof" },
			want:   []string{"This run wrote a CPU profile (`--cpuprofile ingest.pprof`): `go tool pprof -tagfocus bench=ingest/relay/<queue>`"},
		},
		{
			name:   "rate limit at the run's RETRY_DEFERRALS",
			change: func(r *Report) {},
			want: []string{"`RETRY_DELAYS=200ms,400ms,600ms`", "`SMTP_RATE=50` (`SMTP_BURST=1`)",
				"`RETRY_DEFERRALS=50` (the default is 10: at 50/s the last of the 500 emails wait about 10 s for their slots"},
		},
		{
			name: "rate limit at other settings",
			change: func(r *Report) {
				for i := range r.RateLimits {
					o := &r.RateLimits[i].Options
					o.Rate, o.Emails, o.Deferrals, o.Delays = 25, 1000, 80, "1s,2s"
				}
			},
			want:    []string{"`RETRY_DELAYS=1s,2s`", "`RETRY_DEFERRALS=80` (the default is 10: at 25/s the last of the 1000 emails wait about 40 s"},
			notWant: []string{"RETRY_DEFERRALS=50", "about 10 s", "200ms,400ms,600ms"},
		},
		{
			name: "rate limit at the default RETRY_DEFERRALS",
			change: func(r *Report) {
				for i := range r.RateLimits {
					r.RateLimits[i].Options.Deferrals = retry.DefaultDeferrals
				}
			},
			want:    []string{"`RETRY_DEFERRALS=10`."},
			notWant: []string{"the default is"},
		},
		{
			name: "scheduled sends' target from their row",
			change: func(r *Report) {
				for i := range r.Rows {
					if r.Rows[i].Figure == FigScheduleP99 {
						r.Rows[i].Target.Value = 80
					}
				}
			},
			want:    []string{"p99: classic: 77.3 ms; quorum: 77.3 ms (target ≤ 80 ms)"},
			notWant: []string{"100 ms"},
		},
		{
			name:    "scheduled sends of a full run",
			change:  func(r *Report) {},
			want:    []string{"then 200 more, over 18s, posted with `send_at`", "due from 2s ahead"},
			notWant: []string{",,"},
		},
		{
			name:    "scheduled sends of a quick run",
			change:  func(r *Report) { r.Options.Quick = true },
			want:    []string{"then 50 more, over 4s, posted with `send_at`"},
			notWant: []string{"200 more"},
		},
		{
			name: "dead letters at scale",
			change: func(r *Report) {
				d := r.DeadLetters
				d.Options.Copies, d.Selected, d.Arrived, d.Lost, d.Duplicates, d.LeftParked = 20000, 10000, 9998, 2, 1, 10002
				d.Elapsed, d.PerSecond, d.RSSPeak = 80*time.Second, 125, 44<<20
			},
			want: []string{"20,000 copies parked at once in a dead-letter queue (quorum queues)", "replayed the 10,000 email copies in 1m20s (125 copies/s)",
				"44.0 MiB at most", "9,998 of the selected copies arrived in the email queue, 1 twice and 2 never", "held 10,002 after"},
			notWant: []string{"50,000", "5m33s"},
		},
		{
			name:    "the noisy neighbour's worker settings",
			change:  func(r *Report) { r.Noisy.WorkerConcurrency, r.Noisy.EndpointConcurrency = 3, 2 },
			want:    []string{"CONCURRENCY 3, WEBHOOK_ENDPOINT_CONCURRENCY 2, its defaults as every other setting is"},
			notWant: []string{"CONCURRENCY 8", "CONCURRENCY 4"},
		},
		{
			name:   "the noisy neighbour's tenants row",
			change: func(r *Report) {},
			want: []string{"The \"tenants\" row names them as two endpoints too", "of two tenants (API_TENANT_TOKENS)",
				"A's endpoint and A's POSTs are tenant acme's, with its token; B's are tenant beta's, with another",
				"in this row it serves the two tokens in turn"},
		},
		{
			name:    "the noisy neighbour without its tenants row",
			change:  func(r *Report) { r.Noisy.Options.Receivers = []string{"endpoints", "hosts"} },
			notWant: []string{"tenants", "API_TENANT_TOKENS", "acme", "beta"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := proseReport()
			tt.change(r)
			out := renderMarkdown(t, r)
			prose := out[strings.Index(out, "## What limits each figure"):]
			for _, w := range tt.want {
				if !strings.Contains(prose, w) {
					t.Errorf("the prose lacks %q:\n%s", w, prose)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(prose, w) {
					t.Errorf("the prose holds %q:\n%s", w, prose)
				}
			}
		})
	}
}

// scaled is proseReport with every measured figure and every setting
// changed: the figures by a factor, the settings to other values.
func scaled() *Report {
	r := proseReport()
	r.Machine.Cores = 6
	r.Broker = "RabbitMQ 3.13.7"
	r.Started = r.Started.AddDate(3, 7, 13)
	r.Elapsed = 11*time.Minute + 7*time.Second
	r.HTTPFloor = 17389
	o := &r.Options
	o.Clients, o.Prefetch, o.Concurrency, o.Window = 48, 22, 11, 13
	o.Delay, o.Waiting, o.Ingest, o.Consume = 65*time.Millisecond, 90001, 30001, 40003
	o.RoundTrips, o.Latency, o.Rounds, o.Scheduled = 4007, 907, 3, 9011
	o.BatchSize, o.BatchClients, o.Streams = 73, 7, 1303
	// relay's figures and raw's by different factors, so that their
	// ratios change too.
	const k, kRaw = 1.37, 1.61
	for i := range r.Rows {
		row := &r.Rows[i]
		if row.Relay != nil {
			*row.Relay = *row.Relay*k + 0.3
		}
		if row.Raw != nil {
			*row.Raw = *row.Raw*kRaw + 0.7
		}
		for _, c := range []*Cost{row.RelayCost, row.RawCost} {
			if c != nil {
				c.CPUPerMsg = time.Duration(float64(c.CPUPerMsg)*k) + 300*time.Nanosecond
				c.BrokerCPUPerMsg = time.Duration(float64(c.BrokerCPUPerMsg)*k) + 700*time.Nanosecond
				c.AllocsPerMsg = c.AllocsPerMsg*k + 3
			}
		}
	}
	for i := range r.RateLimits {
		x := &r.RateLimits[i]
		x.Options.Rate, x.Options.Burst, x.Options.Replicas, x.Options.Emails = 37, 9, 6, 777
		x.Options.Deferrals, x.Options.Delays = 61, "300ms,700ms,900ms"
		x.Load, x.Delivered, x.Throughput, x.Ratio = 2.7, 777, 36.1, 0.976
		x.MaxInSecond, x.MaxInWindow, x.Deferrals = 37, 39, 1717
	}
	r.Noisy.WorkerConcurrency, r.Noisy.EndpointConcurrency = 13, 6
	n := &r.Noisy.Options
	n.Flood, n.Window, n.Every, n.SlowDelay, n.Lanes = 17011, 23*time.Second, 130*time.Millisecond, 40*time.Millisecond, []int{1, 6}
	d := r.DeadLetters
	d.Options.Copies, d.Options.QueueType, d.Selected, d.Arrived, d.LeftParked = 30006, retry.Classic, 15003, 15000, 15003
	d.Duplicates, d.Lost = 4, 7
	d.Elapsed, d.PerSecond, d.RSSBefore, d.RSSPeak = 97*time.Second, 154.7, 33<<20, 37<<20
	return r
}

// numberPattern finds the figures in a text: digits, with thousands
// separators and decimals, that do not end a word (p99, amqp091).
var numberPattern = regexp.MustCompile(`(?:^|[^\w.])(\d[\d,]*(?:\.\d+)?)`)

// fixedFigures are the numbers the prose states that no run measures or
// chooses: the design's own constants and names.
var fixedFigures = []string{
	"1", "2", "10", // WORK_LANES=1, of which there is one lane; the first probe due 2s ahead; retry.DefaultDeferrals
	"18", "200", // a full run's probes, and the window they are due in
	"250",                           // rateHold
	"0.9", "0.90", "5", "50", "100", // targets, which the rows carry and no run changes
	"127.0", "3.13", // 127.0.0.1; RabbitMQ 3.13
}

// TestMarkdownStatesNoFixedFigure renders two reports whose every figure
// and setting differs, and finds the numbers their prose shares: each is
// one of the design's constants (fixedFigures), never a figure of an
// earlier run written into the text.
func TestMarkdownStatesNoFixedFigure(t *testing.T) {
	figures := func(r *Report) map[string]bool {
		out := renderMarkdown(t, r)
		prose := out[strings.Index(out, "## What limits each figure"):]
		// The tables under the rate-limit and noisy paragraphs are
		// figures of their own, checked elsewhere.
		var kept []string
		for _, l := range strings.Split(prose, "\n") {
			if !strings.HasPrefix(l, "|") {
				kept = append(kept, l)
			}
		}
		found := map[string]bool{}
		for _, m := range numberPattern.FindAllStringSubmatch(strings.Join(kept, "\n"), -1) {
			found[m[1]] = true
		}
		return found
	}
	a, b := figures(proseReport()), figures(scaled())
	var shared []string
	for n := range a {
		if b[n] && !slices.Contains(fixedFigures, n) {
			shared = append(shared, n)
		}
	}
	slices.Sort(shared)
	if len(shared) > 0 {
		t.Errorf("the prose of two runs with different figures and settings both state %q: a number that does not come from the report", shared)
	}
}

// TestHistoryEventsPerNotification holds the average the history's prose
// states to the events historyNotification makes.
func TestHistoryEventsPerNotification(t *testing.T) {
	// Per hundred: 90 with a webhook and an email delivered at once (2
	// events), 9 with an email retried once (5), 1 parked after three
	// failures (9).
	if got, want := historyEventsPerNotification(), (90*2+9*5+1*9)/100.0; got != want {
		t.Errorf("historyEventsPerNotification() = %v, want %v", got, want)
	}
}

// TestNoisyMarkdownRows renders the noisy table for a row whose B posted
// only after A's POSTs were answered: every row has the header's cells,
// and the part with no sample reads "none", not a zero latency.
func TestNoisyMarkdownRows(t *testing.T) {
	r := NoisyResult{Options: NoisyOptions{}.withDefaults(), Rows: []NoisyRow{{
		Receivers: "endpoints", Lanes: 8,
		BAlone:      Latency{P50: 4 * time.Millisecond, P99: 9 * time.Millisecond, N: 150},
		BFlood:      Latency{P50: 6 * time.Millisecond, P99: 17 * time.Millisecond, N: 150},
		BAfterPosts: Latency{P50: 6 * time.Millisecond, P99: 17 * time.Millisecond, N: 150},
		APosts:      3 * time.Second, P99Ratio: 17.0 / 9, AfterRatio: 17.0 / 9,
		AAlone: 55, ABeside: 54, ThroughputRatio: 54.0 / 55,
	}}}
	var table []string
	for _, l := range strings.Split(NoisyMarkdown(r), "\n") {
		if strings.HasPrefix(l, "|") {
			table = append(table, l)
		}
	}
	if len(table) != 3 {
		t.Fatalf("table lines %q, want the header, its rule and one row", table)
	}
	cells := func(l string) []string { return strings.Split(strings.Trim(l, "|"), "|") }
	header, row := cells(table[0]), cells(table[2])
	if len(row) != len(header) || len(cells(table[1])) != len(header) {
		t.Fatalf("row has %d cells, rule %d, header %d: %q", len(row), len(cells(table[1])), len(header), table)
	}
	at := func(name string) string {
		for i, h := range header {
			if strings.TrimSpace(h) == name {
				return strings.TrimSpace(row[i])
			}
		}
		t.Fatalf("no column %q in %q", name, table[0])
		return ""
	}
	if got := at("B p99 while they are / after"); got != "none / 17ms" {
		t.Errorf("B while A's POSTs are answered / after: %q, want none / 17ms", got)
	}
	if got := at("A's POSTs answered in"); got != "3s" {
		t.Errorf("A's POSTs answered in %q, want 3s", got)
	}
	if got := at("after ÷ alone"); got != "1.9×" {
		t.Errorf("after ÷ alone %q, want 1.9×", got)
	}
}

// TestNoisyReceiversLabel names each row's receivers in the noisy table
// and the text report: the tenants row as two tenants' endpoints, the
// others by their value.
func TestNoisyReceiversLabel(t *testing.T) {
	tests := []struct {
		receivers, want string
	}{
		{"endpoints", "endpoints"},
		{"hosts", "hosts"},
		{"tenants", "tenants (two tenants' endpoints)"},
	}
	for _, tt := range tests {
		t.Run(tt.receivers, func(t *testing.T) {
			row := NoisyRow{Receivers: tt.receivers, Lanes: 8}
			r := NoisyResult{Options: NoisyOptions{Receivers: []string{tt.receivers}}.withDefaults(), Rows: []NoisyRow{row}}
			if md := NoisyMarkdown(r); !strings.Contains(md, "\n| "+tt.want+" | 8 |") {
				t.Errorf("the noisy table does not name the row %q:\n%s", tt.want, md)
			}
			rep := sampleReport()
			rep.Noisy = &r
			var b bytes.Buffer
			if err := rep.Render(&b, "text"); err != nil {
				t.Fatal(err)
			}
			if want := "noisy neighbour, " + tt.want + ", WORK_LANES=8"; !strings.Contains(b.String(), want) {
				t.Errorf("the text report lacks %q:\n%s", want, b.String())
			}
		})
	}
}
