package apiclient

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

// OneLine returns s with every run of white space, line breaks included,
// made one space, so that a multi-line error prints on one line.
func OneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// Clip returns s on one line, cut to at most width characters at a word
// boundary and ended with "…" when it is longer. Where the last boundary
// would leave less than half of width (a long word such as a URL,
// or a single word longer than width), it is cut inside the word instead:
// an error is not cut down to its first word.
func Clip(s string, width int) string {
	s = OneLine(s)
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	if width < 1 {
		return ""
	}
	r := []rune(s)
	room := width - 1 // for the ellipsis
	cut := -1
	for i := room; i > 0 && i >= room/2; i-- {
		if r[i] == ' ' {
			cut = i
			break
		}
	}
	if cut < 0 {
		return string(r[:room]) + "…"
	}
	// Punctuation that only announced what was cut goes with it.
	return strings.TrimRight(string(r[:cut]), " :;,") + "…"
}

// Millis writes a duration in milliseconds the short way: "350ms",
// "1.2s", "15s", "2m30s", "5m".
func Millis(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d < time.Second && d > -time.Second:
		return strconv.FormatInt(ms, 10) + "ms"
	case d < 10*time.Second:
		return strconv.FormatFloat(d.Round(100*time.Millisecond).Seconds(), 'f', -1, 64) + "s"
	}
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Deferred is how an attempt's outcome reads when its wait is a deferral
// (notification.Attempt.Deferred): the copy was held back or asked to come
// back later, and spent no retry.
const Deferred = "deferred"

// OutcomeOf is the word for how attempt a ended: its outcome, or Deferred
// for a failure whose wait spends no retry.
func OutcomeOf(a notification.Attempt) string {
	if a.Outcome == retry.Failed && a.Deferred {
		return Deferred
	}
	return string(a.Outcome)
}

// Label names an attempt: "attempt 2", "attempt 1, round 1" after a
// replay, and "round 1" for the replay itself. A cancellation is no
// attempt, nothing was sent: it stands before the attempt it stopped,
// "before attempt 1".
func Label(a notification.Attempt) string {
	var l string
	switch {
	case a.N == 0:
		return "round " + strconv.Itoa(a.Round)
	case a.Round > 0:
		l = "attempt " + strconv.Itoa(a.N) + ", round " + strconv.Itoa(a.Round)
	default:
		l = "attempt " + strconv.Itoa(a.N)
	}
	if a.Outcome == retry.Cancelled {
		return "before " + l
	}
	return l
}
