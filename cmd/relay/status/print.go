package status

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/relay-demo/relay/internal/apiclient"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

// printer writes a notification's timeline as text.
type printer struct {
	w     io.Writer
	width int
	full  bool
	// now is when the answer was read: "due in 3s" is relative to it.
	now time.Time
	loc *time.Location
}

// minError is the room an error keeps on a line however long the rest is.
const minError = 20

func (p printer) notification(n *notification.View) error {
	var b strings.Builder
	b.WriteString(n.ID)
	if !n.Accepted {
		b.WriteString("  (known only from its attempts so far)")
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "  created     %s\n", n.CreatedAt.In(p.loc).Format("2006-01-02 15:04:05.000 MST"))
	fmt.Fprintf(&b, "  channels    %s\n", list(n.Channels))
	fmt.Fprintf(&b, "  recipients  %s\n", list(n.Recipients))
	day := n.CreatedAt.In(p.loc).Format(time.DateOnly)
	width := nameWidth(n.Copies)
	for _, c := range n.Copies {
		b.WriteString("\n")
		b.WriteString(p.copyStatus(c, width))
		b.WriteString("\n")
		labels := 0
		for _, a := range c.Attempts {
			labels = max(labels, utf8.RuneCountInString(apiclient.Label(a)))
		}
		for i, a := range c.Attempts {
			at := a.At.In(p.loc)
			// The date only when it is not the day the lines above are on.
			stamp := at.Format("15:04:05.000")
			if d := at.Format(time.DateOnly); d != day {
				stamp, day = d+" "+stamp, d
			}
			b.WriteString(p.attempt(stamp, labels, a, c.Decided(i)))
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(p.w, b.String())
	return err
}

func list(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ", ")
}

// maxNameWidth bounds the column copy names are padded to: a longer name,
// a long recipient's, is followed by two spaces and pushes only its own
// status to the right.
const maxNameWidth = 40

// copyName is how a copy's head line names it: its channel, then its
// recipient when it has one of its own.
func copyName(c notification.Copy) string {
	if c.Recipient == "" {
		return c.Channel
	}
	return c.Channel + " " + c.Recipient
}

// nameWidth is the column the copies' statuses start at, so that they
// line up: two spaces after the longest name, at least 9 columns as for
// "webhook", at most maxNameWidth.
func nameWidth(copies []notification.Copy) int {
	width := 9
	for _, c := range copies {
		if w := utf8.RuneCountInString(copyName(c)) + 2; w > width && w <= maxNameWidth {
			width = w
		}
	}
	return width
}

// copyStatus is the head line of a copy: where it stands now, its status
// at column width.
func (p printer) copyStatus(c notification.Copy, width int) string {
	name := copyName(c)
	pad := max(width-utf8.RuneCountInString(name), 2)
	head := name + strings.Repeat(" ", pad) + string(c.Status)
	switch c.Status {
	case notification.StatusParked:
		return head + "  reason " + c.Reason
	case notification.StatusScheduled:
		if c.NextAttemptAt == nil {
			return head
		}
		due := c.NextAttemptAt.In(p.loc)
		when := "in " + apiclient.Millis(due.Sub(p.now).Milliseconds())
		if !due.After(p.now) {
			when = "due " + apiclient.Millis(p.now.Sub(due).Milliseconds()) + " ago, on its way"
		}
		return fmt.Sprintf("%s  due %s (%s)", head, due.Format("2006-01-02 15:04:05.000"), when)
	case notification.StatusQueued:
		if c.Round > 0 {
			return fmt.Sprintf("%s  replayed, round %d not attempted yet", head, c.Round)
		}
		return head + "  not attempted yet"
	case notification.StatusRetrying:
		last := len(c.Attempts) - 1
		if last < 0 || !c.Decided(last) || c.NextAttemptAt == nil {
			return head + "  the retry stage has not scheduled the next attempt yet"
		}
		due := c.NextAttemptAt.In(p.loc)
		when := "in " + apiclient.Millis(due.Sub(p.now).Milliseconds())
		if !due.After(p.now) {
			when = apiclient.Millis(p.now.Sub(due).Milliseconds()) + " ago"
		}
		return fmt.Sprintf("%s  attempt %d due %s (%s)", head, c.Attempts[last].N+1, due.Format("15:04:05.000"), when)
	}
	return head
}

// attempt is the line of one attempt: when it ended, which one it was,
// how it ended, the waits around it, and the error, cut to fit the line.
func (p printer) attempt(stamp string, labels int, a notification.Attempt, decided bool) string {
	line := fmt.Sprintf("  %s  %-*s  %-9s", stamp, labels, apiclient.Label(a), apiclient.OutcomeOf(a))
	var notes []string
	if a.Provider != "" {
		notes = append(notes, "via "+a.Provider)
	}
	if a.Outcome == retry.Parked && a.Reason != "" {
		notes = append(notes, "reason "+a.Reason)
	}
	if a.WaitedMS != nil {
		notes = append(notes, "waited "+apiclient.Millis(*a.WaitedMS))
	}
	// A failure's delay is the retry stage's only once it decided.
	if a.Outcome == retry.Failed && decided && a.DelayMS != nil {
		notes = append(notes, "next in "+apiclient.Millis(*a.DelayMS))
	}
	for _, n := range notes {
		line += "  " + n
	}
	if a.Error == "" {
		return strings.TrimRight(line, " ")
	}
	line = strings.TrimRight(line, " ") + "  "
	if p.full {
		return line + apiclient.OneLine(a.Error)
	}
	return line + apiclient.Clip(a.Error, max(p.width-utf8.RuneCountInString(line), minError))
}
