package workshop

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// timeline prints what a run does as it happens: one line per attempt and
// per parked notification, and a progress line now and then. Lines come
// from many goroutines; a mutex keeps them whole.
type timeline struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
	// attempts is false for a quiet run: progress lines only.
	attempts bool
}

// shown reports whether attempt k of a notification gets a line of its
// own: the first ten, every hundredth, and any success. A notification
// retried without pause can make thousands of attempts.
func shown(k int, ok bool) bool { return ok || k <= 10 || k%100 == 0 }

const timelineHeader = "%9s  %-12s %5s  %-9s  %9s  %9s  %s\n"

func (t *timeline) header() {
	if t.attempts {
		t.printf(timelineHeader, "time", "notification", "try", "outcome", "scheduled", "actual", "note")
	}
}

func (t *timeline) printf(format string, args ...any) {
	line := strings.TrimRight(fmt.Sprintf(format, args...), " \n") + "\n"
	t.mu.Lock()
	defer t.mu.Unlock()
	_, _ = io.WriteString(t.w, line)
}

func (t *timeline) since(at time.Time) string {
	return fmt.Sprintf("%.3fs", at.Sub(t.start).Seconds())
}

// attempt prints attempt k of id. sched and actual describe the wait
// before it (k > 1); a negative sched means the strategy had not said.
func (t *timeline) attempt(at time.Time, id string, k int, ok bool, sched, actual time.Duration, note string) {
	if !t.attempts || !shown(k, ok) {
		return
	}
	outcome, s, a := "failed", "", ""
	if ok {
		outcome = "delivered"
	}
	if k > 1 {
		s, a = Duration(sched).String(), Duration(actual).String()
		if sched < 0 {
			s = "?"
		}
	}
	if k > 10 && k%100 == 0 {
		note = strings.TrimSpace(note + " (past #10, every 100th attempt is shown)")
	}
	t.printf(timelineHeader, t.since(at), id, fmt.Sprint(k), outcome, s, a, note)
}

// parked prints a notification the dead-letter queue received.
func (t *timeline) parked(at time.Time, id string, attempts int, reason string) {
	if !t.attempts {
		return
	}
	t.printf(timelineHeader, t.since(at), id, "-", "parked", "", "", fmt.Sprintf("%s, after %d attempts", reason, attempts))
}

// progress prints where the run stands.
func (t *timeline) progress(at time.Time, name string, accepted, delivered, parked int) {
	t.printf("  %s %s: %d accepted, %d delivered, %d parked, %d pending\n",
		t.since(at), name, accepted, delivered, parked, accepted-delivered-parked)
}

// wrap breaks text into lines of at most width characters, each starting
// with indent.
func wrap(text, indent string, width int) string {
	var b strings.Builder
	line := indent
	for _, word := range strings.Fields(text) {
		if len(line) > len(indent) && len(line)+1+len(word) > width {
			b.WriteString(line + "\n")
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += word
	}
	if len(line) > len(indent) {
		b.WriteString(line + "\n")
	}
	return b.String()
}
