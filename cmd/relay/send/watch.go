package send

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/relay-demo/relay/internal/apiclient"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

// history is the part of the API the watcher reads.
type history interface {
	Notification(ctx context.Context, id string) (*notification.View, error)
}

// watcher follows notifications in the API's history and prints each
// attempt of each copy once, in order, when its outcome is known.
type watcher struct {
	history history
	out     io.Writer
	width   int
	full    bool
	// poll is the pause between two requests, for all notifications
	// together: one request at a time, whatever their number.
	poll time.Duration
	// grace is how long an attempt waits for the one before it to show
	// in the history (they are recorded as they arrive, not always in
	// order) before it is printed without it.
	grace time.Duration
	loc   *time.Location
	now   func() time.Time
}

// tracked is one notification being followed.
type tracked struct {
	id     string
	copies []*copyWatch
	// due is when it is worth asking again: now, or while every copy
	// left waits for a retry, when the first of them is due.
	due    time.Time
	polled time.Time
	left   int
	// err is why the last request about it got no timeline.
	err error
}

// copyWatch is what was printed of one channel copy.
type copyWatch struct {
	channel string
	// recipient is the copy's recipient, for a channel with a copy per
	// recipient (email); empty otherwise.
	recipient string
	// last is the last attempt printed, when started.
	last    notification.Attempt
	started bool
	// gapSince is when an attempt was first seen whose predecessor is
	// missing from the history.
	gapSince time.Time
	// done is the copy's final outcome, delivered or parked, once printed.
	done retry.Outcome
}

// problemHistoryUnavailable is the API's problem type for a history it
// cannot read, or does not keep.
const problemHistoryUnavailable = "https://relay.dev/problems/history-unavailable"

// minError is the room an error keeps on a line however long the rest is.
const minError = 20

// follow polls the history for every notification sent until each copy is
// delivered or parked, or timeout passes, then prints the summary.
func (w *watcher) follow(ctx context.Context, sent []apiclient.Accepted, timeout time.Duration) error {
	deadline := w.now().Add(timeout)
	var all []*tracked
	seen := map[string]bool{}
	total := 0
	for _, s := range sent {
		if seen[s.ID] { // the same Idempotency-Key twice
			continue
		}
		seen[s.ID] = true
		t := &tracked{id: s.ID}
		if len(s.Copies) > 0 {
			for _, c := range s.Copies {
				t.copies = append(t.copies, &copyWatch{channel: c.Channel, recipient: c.Recipient})
			}
		} else {
			// An API from before copies: one per channel.
			for _, ch := range s.Channels {
				t.copies = append(t.copies, &copyWatch{channel: ch})
			}
		}
		t.left = len(t.copies)
		total += t.left
		all = append(all, t)
	}
	left, delivered, parked, cancelled := total, 0, 0, 0
	next := w.now() // no request before this: the pause after the last one
	for left > 0 {
		t := pick(all)
		at := next
		if t.due.After(at) {
			at = t.due
		}
		if at.After(deadline) {
			if err := w.wait(ctx, deadline); err != nil {
				return err
			}
			return stillInFlight(all, left, total, timeout)
		}
		if err := w.wait(ctx, at); err != nil {
			return err
		}
		now := w.now()
		n, err := w.history.Notification(ctx, t.id)
		next, t.polled = w.now().Add(w.poll), now
		if err != nil {
			if err := w.failed(ctx, t, now, err); err != nil {
				return err
			}
			continue
		}
		t.err = nil
		var lines [][]printed
		for _, cw := range t.copies {
			c, ok := copyOf(n, cw.channel, cw.recipient)
			if !ok || cw.done != "" {
				continue // not in the history yet, or finished
			}
			var ls []printed
			for _, a := range cw.next(c, now, w.grace) {
				ls = append(ls, printed{a.At, w.line(t.id, cw.name(), a)})
			}
			lines = append(lines, ls)
			switch cw.done {
			case retry.Delivered:
				delivered++
			case retry.Parked:
				parked++
			case retry.Cancelled:
				cancelled++
			}
			if cw.done != "" {
				t.left--
				left--
			}
		}
		for _, l := range merge(lines) {
			fmt.Fprintln(w.out, l)
		}
		t.due = w.dueAfter(t, n, now)
	}
	noun := "copies"
	if delivered == 1 {
		noun = "copy"
	}
	if cancelled > 0 {
		fmt.Fprintf(w.out, "done: %d %s delivered, %d parked, %d cancelled\n", delivered, noun, parked, cancelled)
		return nil
	}
	fmt.Fprintf(w.out, "done: %d %s delivered, %d parked\n", delivered, noun, parked)
	return nil
}

// failed decides what a failed request means: wait and ask again, or stop.
func (w *watcher) failed(ctx context.Context, t *tracked, now time.Time, err error) error {
	var apiErr *apiclient.Error
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, apiclient.ErrNotFound):
		// The API records a notification in its history shortly after it
		// answers 202; until then the history does not know it.
		t.err, t.due = fmt.Errorf("the history has no record of %s", t.id), now
	case errors.Is(err, apiclient.ErrUnauthorized):
		return err
	case errors.As(err, &apiErr) && apiErr.Type == problemHistoryUnavailable && apiErr.RetryAfter == 0:
		// Not a moment's trouble (that comes with a Retry-After): this
		// API keeps no history at all.
		return fmt.Errorf("--watch follows notifications in the API's history: %w", err)
	case errors.As(err, &apiErr) && apiErr.Status < 500:
		return fmt.Errorf("read the history of %s: %w", t.id, err)
	default:
		t.err, t.due = err, now.Add(max(time.Second, w.poll))
		if apiErr != nil && apiErr.RetryAfter > 0 {
			t.due = now.Add(apiErr.RetryAfter)
		}
	}
	return nil
}

// stillInFlight is the error of a watch that timed out.
func stillInFlight(all []*tracked, left, total int, timeout time.Duration) error {
	var waiting []string
	for _, t := range all {
		if t.left == 0 {
			continue
		}
		if t.err != nil {
			waiting = append(waiting, t.err.Error())
			continue
		}
		for _, cw := range t.copies {
			if cw.done == "" {
				waiting = append(waiting, t.id+" "+cw.name())
			}
		}
	}
	if len(waiting) > 5 {
		waiting = append(waiting[:5], "…")
	}
	return fmt.Errorf("%d of %d copies still in flight after %s: %s", left, total, timeout, strings.Join(waiting, ", "))
}

// pick returns the unfinished notification to ask about next: the first
// due, and among those due together, the one asked about least recently.
func pick(all []*tracked) *tracked {
	var best *tracked
	for _, t := range all {
		if t.left == 0 {
			continue
		}
		if best == nil || cmp.Or(t.due.Compare(best.due), t.polled.Compare(best.polled)) < 0 {
			best = t
		}
	}
	return best
}

// dueAfter is when t is worth asking about again: at once while anything
// may change, or when the first next attempt is due while every copy left
// waits for one and all it did so far is printed.
func (w *watcher) dueAfter(t *tracked, n *notification.View, now time.Time) time.Time {
	var due time.Time
	for _, cw := range t.copies {
		if cw.done != "" {
			continue
		}
		c, ok := copyOf(n, cw.channel, cw.recipient)
		if !ok || c.Status != notification.StatusRetrying || c.NextAttemptAt == nil || !c.NextAttemptAt.After(now) ||
			len(c.Attempts) == 0 || !cw.started || cw.last.Round != c.Attempts[len(c.Attempts)-1].Round ||
			cw.last.N != c.Attempts[len(c.Attempts)-1].N {
			return now
		}
		if due.IsZero() || c.NextAttemptAt.Before(due) {
			due = *c.NextAttemptAt
		}
	}
	if due.IsZero() {
		return now
	}
	return due
}

// name is how a line names the copy: its channel, and its recipient when
// it has one.
func (cw *copyWatch) name() string {
	if cw.recipient == "" {
		return cw.channel
	}
	return cw.channel + " " + cw.recipient
}

func copyOf(n *notification.View, channel, recipient string) (notification.Copy, bool) {
	for _, c := range n.Copies {
		if c.Channel == channel && c.Recipient == recipient {
			return c, true
		}
	}
	return notification.Copy{}, false
}

// wait returns at t, or when ctx ends.
func (w *watcher) wait(ctx context.Context, t time.Time) error {
	d := t.Sub(w.now())
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// next returns the attempts of c to print now, in order, and notes them
// as printed. It stops at the first attempt whose outcome the history
// does not know for good yet (see notification.Copy.Decided), and before an
// attempt whose predecessor is missing, for the grace period.
func (cw *copyWatch) next(c notification.Copy, now time.Time, grace time.Duration) []notification.Attempt {
	var out []notification.Attempt
	for i, a := range c.Attempts {
		if cw.started && !after(a, cw.last) {
			continue // printed already, or given up on
		}
		if !cw.follows(a) {
			if cw.gapSince.IsZero() {
				cw.gapSince = now
			}
			if now.Sub(cw.gapSince) < grace {
				break
			}
		}
		if !c.Decided(i) {
			break
		}
		out = append(out, a)
		cw.last, cw.started, cw.gapSince = a, true, time.Time{}
		if a.Outcome.Terminal() && i == len(c.Attempts)-1 {
			cw.done = a.Outcome
		}
	}
	return out
}

// follows reports whether a is the attempt that comes right after the
// last one printed.
func (cw *copyWatch) follows(a notification.Attempt) bool {
	l := cw.last
	switch {
	case !cw.started:
		return a.Round == 0 && a.N == 1
	case l.N == 0: // a replay: its round's first attempt
		return a.Round == l.Round && a.N == 1
	case l.Outcome == retry.Parked: // the next round's replay
		return a.Round == l.Round+1 && a.N == 0
	}
	return a.Round == l.Round && a.N == l.N+1
}

// after reports whether a comes after b in (round, attempt) order.
func after(a, b notification.Attempt) bool {
	return cmp.Or(cmp.Compare(a.Round, b.Round), cmp.Compare(a.N, b.N)) > 0
}

// line is the line of one attempt:
//
//	15:04:05.000  ntf_… email   attempt 1  failed  <error>  next in 1s
//	15:04:05.000  ntf_… email   attempt 2  deferred  <why>  next in 229ms
//	15:04:05.000  ntf_… email   attempt 3  delivered
//	15:04:05.000  ntf_… webhook attempt 5  parked  reason max-retries  <error>
//
// A failure whose wait is a deferral (a rate limit's slot, a downstream's
// Retry-After: no retry spent) reads "deferred". Cut to the width, the
// error keeps the room the rest of the line leaves it. Where that is less
// than minError (a narrow terminal) the error goes on a line of its own
// below, indented, rather than be cut to a word, with "next in" when that
// does not fit above either; a line still too long names the notification
// by the end of its id (the ids are printed whole as they are sent).
func (w *watcher) line(id, channel string, a notification.Attempt) string {
	head := w.head(id, channel, a)
	if !w.full && runes(head) > w.width {
		head = w.head(shortID(id), channel, a)
	}
	tail := ""
	switch a.Outcome {
	case retry.Failed:
		if a.DelayMS != nil {
			tail = "next in " + apiclient.Millis(*a.DelayMS)
		}
	case retry.Parked:
	default:
		return head
	}
	text := apiclient.OneLine(a.Error)
	var line string
	switch {
	case text == "" || w.full:
		line = join(head, text, tail)
	case runes(join(head, text, tail)) <= w.width:
		line = join(head, text, tail)
	case w.width-runes(join(head, "", tail))-2 >= minError:
		line = join(head, apiclient.Clip(text, w.width-runes(join(head, "", tail))-2), tail)
	case runes(join(head, "", tail)) <= w.width:
		line = join(head, "", tail) + "\n" + errorIndent + apiclient.Clip(text, max(w.width-len(errorIndent), minError))
	default:
		below := join(tail, "", "")
		line = head + "\n" + errorIndent + join(below, apiclient.Clip(text, max(w.width-len(errorIndent)-runes(below)-2, minError)), "")
	}
	return line
}

// head is the start of an attempt's line: when, which copy, which attempt,
// how it ended, and for a parked copy why.
func (w *watcher) head(id, channel string, a notification.Attempt) string {
	head := fmt.Sprintf("%s  %s %-7s %s  %s", a.At.In(w.loc).Format("15:04:05.000"), id, channel, apiclient.Label(a), apiclient.OutcomeOf(a))
	if a.Outcome == retry.Parked && a.Reason != "" {
		head += "  reason " + a.Reason
	}
	return head
}

// join joins the parts of a line that are not empty, two spaces apart.
func join(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "  ")
}

func runes(s string) int { return utf8.RuneCountInString(s) }

// shortID is a notification id cut short: its prefix and its last
// characters, "ntf_…gznax6w2". An id begins with the time it was made, so
// the ids of one burst share their start; they differ at the end, which
// is random.
func shortID(id string) string {
	const keep = 8
	prefix, rest, ok := strings.Cut(id, "_")
	if !ok {
		prefix, rest = "", id
	} else {
		prefix += "_"
	}
	r := []rune(rest)
	if len(r) <= keep+1 {
		return id
	}
	return prefix + "…" + string(r[len(r)-keep:])
}

// errorIndent starts the line of an error that has no room on its
// attempt's line.
const errorIndent = "    "

// printed is the line of an attempt that ended at at.
type printed struct {
	at   time.Time
	text string
}

// merge interleaves the lines of several copies by time, keeping each
// copy's lines in their order.
func merge(copies [][]printed) []string {
	var out []string
	for {
		k := -1
		for i, ls := range copies {
			if len(ls) > 0 && (k < 0 || ls[0].at.Before(copies[k][0].at)) {
				k = i
			}
		}
		if k < 0 {
			return out
		}
		out = append(out, copies[k][0].text)
		copies[k] = copies[k][1:]
	}
}
