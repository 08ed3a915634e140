package workshop

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Report is what compare prints: the conditions and one row per strategy.
type Report struct {
	Scenario string    `json:"scenario"`
	Summary  string    `json:"summary"`
	N        int       `json:"n"`
	Seed     uint64    `json:"seed"`
	Policy   string    `json:"policy"`
	Baseline Duration  `json:"baseline_first_attempt_p50_ms"`
	Rows     []Figures `json:"rows"`
	// Took is how long the whole compare ran, baseline included.
	Took Duration `json:"took_ms"`
}

// Width is the most columns the default text output takes: the table, the
// verdicts and the notes.
const Width = 120

// column is one column of the table: its header and its cell in a row.
type column struct {
	name string
	cell func(Figures) string
	// narrow columns make the default table; the others need --wide.
	narrow bool
}

var columns = []column{
	{"strategy", func(f Figures) string { return f.Strategy }, true},
	{"accepted", func(f Figures) string { return fmt.Sprint(f.Accepted) }, false},
	{"delivered", func(f Figures) string { return fmt.Sprint(f.Delivered) }, true},
	{"parked", func(f Figures) string { return fmt.Sprint(f.Parked) }, true},
	{"in flight", func(f Figures) string { return fmt.Sprint(f.InFlight) }, true},
	{"lost", func(f Figures) string { return fmt.Sprint(f.Lost) }, true},
	{"dups", func(f Figures) string { return fmt.Sprint(f.Duplicates) }, true},
	{"attempts", func(f Figures) string { return fmt.Sprint(f.Attempts) }, true},
	{"delay p99", func(f Figures) string { return pair(f.ScheduledP99, f.ActualP99) }, true},
	{"delay sched p50 / p99", func(f Figures) string { return pair(f.ScheduledP50, f.ScheduledP99) }, false},
	{"delay actual p50 / p99", func(f Figures) string { return pair(f.ActualP50, f.ActualP99) }, false},
	{"healthy p50 / p99", func(f Figures) string { return pair(f.HealthyP50, f.HealthyP99) }, false},
	{"HoL p99", func(f Figures) string { return f.HoLP99.String() }, true},
	{"pub/notif", func(f Figures) string { return fmt.Sprintf("%.2f", f.PublishesPer) }, true},
	{"wall", func(f Figures) string {
		if f.TimedOut {
			return f.Wall.String() + "*"
		}
		return f.Wall.String()
	}, true},
}

// tableColumns are the columns of the default table or, with wide, all of
// them but the narrow table's summary of the delays, shown there whole.
func tableColumns(wide bool) []column {
	var out []column
	for _, c := range columns {
		if wide && c.name != "delay p99" || !wide && c.narrow {
			out = append(out, c)
		}
	}
	return out
}

func headers(cols []column) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.name
	}
	return out
}

// cells renders one row of the table.
func (f Figures) cells(cols []column) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		switch {
		case i == 0:
			out[i] = f.Strategy
		case i == 1 && f.Failed != "":
			out[i] = "failed"
		case i == 1 && f.Skipped != "":
			out[i] = "skipped"
		case f.Failed != "" || f.Skipped != "":
			out[i] = "-"
		default:
			out[i] = c.cell(f)
		}
	}
	return out
}

// skipped lists the strategies that did not run or failed, and why, where
// the verdict had to shorten it.
func skipped(rows []Figures) []string {
	var out []string
	for _, f := range rows {
		switch {
		case f.Skipped != "" && f.Verdict != f.Skipped:
			out = append(out, f.Strategy+" did not run: "+f.Skipped)
		case f.Failed != "":
			out = append(out, f.Strategy+" failed: "+f.Failed)
		}
	}
	return out
}

// notes explain the columns under every table.
var notes = []string{
	"Every consumer of the strategy is up and the whole load published before the clock starts; the broker " +
		"releases the notifications at the scenario's pace, so publishing and start-up speed are in no figure.",
	"lost = accepted - delivered - parked - in flight: in none of the strategy's queues when the run stopped.",
	"dups: deliveries of a notification the downstream had already accepted.",
	"delay p99: the wait before a retry, as the strategy scheduled it / as it happened (failure to next " +
		"attempt), 99th percentile; --wide shows p50 too.",
	"healthy (--wide): arrival to first attempt of the notifications that never failed.",
	"HoL p99: per notification, the time spent queued behind others beyond its schedule (before the first " +
		"attempt: beyond when a plain queue without failures reached it; before each retry: beyond the " +
		"scheduled delay); 99th percentile.",
	"pub/notif: confirmed publishes per notification, the first included; the broker's own dead-lettering and " +
		"requeues are not publishes.",
	"*: the run was stopped by its time bound before every notification was delivered or parked.",
}

// verdictLines are the rows' verdicts, names aligned, each cut to fit width.
func verdictLines(rows []Figures, width int) []string {
	name := 0
	for _, f := range rows {
		name = max(name, len(f.Strategy))
	}
	var out []string
	for _, f := range rows {
		if f.Verdict == "" {
			continue
		}
		out = append(out, fmt.Sprintf("  %-*s  %s", name, f.Strategy, fitTo(f.Verdict, width-name-4)))
	}
	return out
}

// writeText prints the rows as an aligned table, then their verdicts, then
// why a strategy did not run and, with withNotes, what the columns mean.
// Unless wide, every line fits in Width columns.
func writeText(w io.Writer, rows []Figures, withNotes, wide bool) error {
	cols := tableColumns(wide)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(headers(cols), "\t"))
	for _, f := range rows {
		fmt.Fprintln(tw, strings.Join(f.cells(cols), "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if lines := verdictLines(rows, Width); len(lines) > 0 {
		fmt.Fprintln(w, "\nVerdicts:")
		fmt.Fprintln(w, strings.Join(lines, "\n"))
	}
	all := skipped(rows)
	if withNotes {
		all = append(all, notes...)
	} else {
		all = append(all, "The columns are explained under `relay-lab workshop compare` and in docs/workshop/README.md.")
	}
	fmt.Fprintln(w)
	for _, n := range all {
		fmt.Fprint(w, wrap(n, "  ", 100))
	}
	return nil
}

// writeMarkdown prints the rows as a Markdown table, the verdicts as a
// list under it, and the notes.
func writeMarkdown(w io.Writer, rows []Figures, wide bool) error {
	cols := tableColumns(wide)
	var b strings.Builder
	b.WriteString("| " + strings.Join(headers(cols), " | ") + " |\n|")
	for i := range cols {
		if i == 0 {
			b.WriteString("---|")
		} else {
			b.WriteString("--:|")
		}
	}
	b.WriteString("\n")
	for _, f := range rows {
		b.WriteString("| " + strings.Join(f.cells(cols), " | ") + " |\n")
	}
	b.WriteString("\n")
	for _, f := range rows {
		if f.Verdict != "" {
			b.WriteString("- `" + f.Strategy + "`: " + f.Verdict + "\n")
		}
	}
	b.WriteString("\n")
	for _, n := range append(skipped(rows), notes...) {
		b.WriteString("- " + n + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeJSON prints the whole report.
func writeJSON(w io.Writer, r Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
