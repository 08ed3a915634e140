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
}

var columns = []string{
	"strategy", "accepted", "delivered", "parked", "in flight", "lost", "dups", "attempts",
	"delay sched p50 / p99", "delay actual p50 / p99", "healthy p50 / p99", "HoL p99", "pub/notif", "wall",
}

// cells renders one row of the table.
func (f Figures) cells() []string {
	if f.Skipped != "" || f.Failed != "" {
		out := []string{f.Strategy, "skipped"}
		if f.Failed != "" {
			out[1] = "failed"
		}
		for len(out) < len(columns) {
			out = append(out, "-")
		}
		return out
	}
	wall := f.Wall.String()
	if f.TimedOut {
		wall += " (bound)"
	}
	return []string{
		f.Strategy, fmt.Sprint(f.Accepted), fmt.Sprint(f.Delivered), fmt.Sprint(f.Parked), fmt.Sprint(f.InFlight),
		fmt.Sprint(f.Lost), fmt.Sprint(f.Duplicates), fmt.Sprint(f.Attempts),
		pair(f.ScheduledP50, f.ScheduledP99), pair(f.ActualP50, f.ActualP99), pair(f.HealthyP50, f.HealthyP99),
		f.HoLP99.String(), fmt.Sprintf("%.2f", f.PublishesPer), wall,
	}
}

// skipped lists the strategies that did not run or failed, and why.
func skipped(rows []Figures) []string {
	var out []string
	for _, f := range rows {
		if f.Skipped != "" {
			out = append(out, f.Strategy+" was skipped: "+f.Skipped)
		}
		if f.Failed != "" {
			out = append(out, f.Strategy+" failed: "+f.Failed)
		}
	}
	return out
}

// notes explain the columns under every table.
var notes = []string{
	"lost = accepted - delivered - parked - in flight: in none of the strategy's queues when the run stopped.",
	"dups: deliveries of a notification the downstream had already accepted.",
	"delay: the wait before each retry, as the strategy scheduled it and as it happened (failure to next attempt).",
	"healthy: publish to first attempt of the notifications that never failed.",
	"HoL p99: per notification, the time spent queued behind others beyond its schedule (before the first " +
		"attempt: beyond the baseline; before each retry: beyond the scheduled delay); 99th percentile.",
	"pub/notif: confirmed publishes per notification, the first included; the broker's own dead-lettering and " +
		"requeues are not publishes.",
	"(bound): the run was stopped by its time bound before every notification was delivered or parked.",
}

// writeText prints the rows as an aligned table, with the notes that
// explain the columns when notes is set.
func writeText(w io.Writer, rows []Figures, withNotes bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(columns, "\t"))
	for _, f := range rows {
		fmt.Fprintln(tw, strings.Join(f.cells(), "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	all := skipped(rows)
	if withNotes {
		all = append(all, notes...)
	} else {
		all = append(all, "The columns are explained under `relay workshop compare` and in docs/workshop/README.md.")
	}
	fmt.Fprintln(w)
	for _, n := range all {
		fmt.Fprint(w, wrap(n, "  ", 100))
	}
	return nil
}

// writeMarkdown prints the rows as a Markdown table.
func writeMarkdown(w io.Writer, rows []Figures) error {
	var b strings.Builder
	b.WriteString("| " + strings.Join(columns, " | ") + " |\n|")
	for i := range columns {
		if i == 0 {
			b.WriteString("---|")
		} else {
			b.WriteString("--:|")
		}
	}
	b.WriteString("\n")
	for _, f := range rows {
		b.WriteString("| " + strings.Join(f.cells(), " | ") + " |\n")
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
