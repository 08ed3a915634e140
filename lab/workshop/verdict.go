package workshop

import (
	"fmt"
	"strings"
	"time"

	"github.com/relay-demo/relay/lab/strategy"
)

// The thresholds a verdict judges by.
const (
	// hammering is the number of downstream calls per notification past
	// which a design is said to hammer the downstream.
	hammering = 3.0
	// blocking is the head-of-line p99 past which notifications are said to
	// have waited behind others. Below it, what HoL measures is mostly the
	// hops of a busy broker, which the delay figures show anyway.
	blocking = 200 * time.Millisecond
)

// verdictWidth is the longest verdict: what the text output leaves in
// Width columns beside the longest strategy name (quorum-delivery-limit).
const verdictWidth = Width - 4 - len("quorum-delivery-limit")

// verdicts sets the Verdict of every row, each judged against the others.
func verdicts(rows []Figures) {
	for i := range rows {
		rows[i].Verdict = rowVerdict(rows[i], rows)
	}
}

// rowVerdict sums up one row in a line of at most verdictWidth characters,
// from its figures alone and from what the other rows of the same compare
// managed: "poor:" and the worst of its faults, or "good:" and what it kept.
func rowVerdict(f Figures, rows []Figures) string {
	switch {
	case f.Skipped != "":
		return notRunnable(f.Skipped)
	case f.Failed != "":
		return fit("failed: " + strings.SplitN(f.Failed, "\n", 2)[0])
	}
	// The most notifications any design delivered: the ones this row
	// parked beyond that would have recovered.
	best := 0
	for _, r := range rows {
		if r.Skipped == "" && r.Failed == "" {
			best = max(best, r.Delivered)
		}
	}
	var faults []string
	if f.Lost > 0 {
		faults = append(faults, fmt.Sprintf("lost %d", f.Lost))
	}
	if f.TimedOut {
		if f.InFlight > 0 {
			faults = append(faults, fmt.Sprintf("%d never settled", f.InFlight))
		} else {
			faults = append(faults, "stopped by its time bound")
		}
	}
	if gaveUp := min(f.Parked, best-f.Delivered); gaveUp > 0 {
		faults = append(faults, fmt.Sprintf("parked %d that others delivered", gaveUp))
	}
	if f.Duplicates > 0 {
		faults = append(faults, fmt.Sprintf("%d duplicate deliveries", f.Duplicates))
	}
	if f.Accepted > 0 {
		if per := float64(f.Attempts) / float64(f.Accepted); per >= hammering {
			faults = append(faults, fmt.Sprintf("%.1f attempts per notification", per))
		}
	}
	if f.Attempts > f.Accepted && f.ScheduledP99 <= 0 {
		faults = append(faults, "retries without a pause")
	}
	if time.Duration(f.HoLP99) >= blocking {
		faults = append(faults, fmt.Sprintf("waits behind others (HoL p99 %s)", f.HoLP99))
	}
	if len(faults) > 0 {
		return fit("poor: " + strings.Join(faults, "; "))
	}
	// Parked ones, if any, are ones no design delivered.
	good := []string{fmt.Sprintf("%d delivered", f.Delivered)}
	if f.Parked > 0 {
		good[0] += fmt.Sprintf(", %d parked", f.Parked)
	}
	if f.ScheduledP99 > 0 {
		good = append(good, fmt.Sprintf("p99 delay %s asked, %s taken", f.ScheduledP99, f.ActualP99))
	}
	good = append(good, fmt.Sprintf("%.2f pub/notif", f.PublishesPer))
	return fit("good: " + strings.Join(good, "; "))
}

// notRunnable shortens why a strategy did not run to its first clause: the
// rest is under the table.
func notRunnable(reason string) string {
	reason = strings.TrimPrefix(reason, strategy.ErrUnsupported.Error()+": ")
	if i := strings.IndexAny(reason, ";("); i > 0 {
		reason = strings.TrimSpace(reason[:i])
	}
	if !strings.HasPrefix(reason, "not runnable") {
		reason = "not runnable: " + reason
	}
	return fit(reason)
}

// fit cuts a verdict to verdictWidth characters.
func fit(v string) string { return fitTo(v, verdictWidth) }

// fitTo cuts v to width characters, at the end of a clause where it can.
func fitTo(v string, width int) string {
	width = max(width, 10)
	for len([]rune(v)) > width {
		i := strings.LastIndex(v, "; ")
		if i < 0 {
			return string([]rune(v)[:width-1]) + "…"
		}
		v = v[:i]
	}
	return v
}
