// Package dead is `relay dead list|show|replay|purge|job`: the command-line
// tools for messages parked in the dead-letter queue. They call the API's
// dead-letter routes (`relay api` or `relay all`, at --api or RELAY_API
// with --token or API_TOKENS), so they act on the broker the API serves
// and on no other: the same filters, the same limit, the same JSON, and
// an id that matches nothing is an error.
package dead

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/relay-demo/relay/internal/apiclient"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

// DefaultLimit is how many messages `relay dead list` shows without
// --limit; 0 shows every one. GET /v1/dead-letters reads ?limit the same
// way.
const DefaultLimit = notification.DeadLetterLimit

// options are a verb's parsed arguments.
type options struct {
	verb, id, source, recipient string
	// The selection's other filters.
	channel, reason, endpoint, since, until, errText, tenant string
	all, json, yes, dryRun, job, cancel                      bool
	limit                                                    int
	api                                                      apiclient.Flags
}

// selection is o's filters as the API takes them.
func (o options) selection() apiclient.Selection {
	return apiclient.Selection{ID: o.id, Source: o.source, Recipient: o.recipient, Channel: o.channel, Reason: o.reason,
		Endpoint: o.endpoint, Since: o.since, Until: o.until, Error: o.errText, Tenant: o.tenant, All: o.all}
}

// narrowed reports whether o names any filter.
func (o options) narrowed() bool {
	s := o.selection()
	s.All = false
	return s != apiclient.Selection{}
}

// filterFlags are the flags of the filters besides --id, for the errors.
const filterFlags = "--id, --source, --recipient, --channel, --reason, --endpoint, --since, --until, --error or --tenant"

// registerFilters adds the filters every verb that selects takes.
func (o *options) registerFilters(fs *flag.FlagSet) {
	fs.StringVar(&o.channel, "channel", "", "only the copies of this `channel` (email, webhook…), from any of its lanes")
	fs.StringVar(&o.reason, "reason", "", "only the copies parked for this `reason`: "+strings.Join(retry.Reasons, ", "))
	fs.StringVar(&o.endpoint, "endpoint", "", "only the webhook copies for this endpoint `id` (ep_…)")
	fs.StringVar(&o.since, "since", "", "only the copies parked at or after this `time` (RFC 3339, e.g. 2026-03-14T09:00:00Z)")
	fs.StringVar(&o.until, "until", "", "only the copies parked before this `time` (RFC 3339)")
	fs.StringVar(&o.errText, "error", "", "only the copies whose last error holds this `text` (any case)")
	fs.StringVar(&o.tenant, "tenant", "", "only this `tenant`'s copies, \"default\" for the default tenant's: an operator's token's\n"+
		"choice (without it, every tenant's); a tenant's token acts on its own tenant's copies only")
}

// parse reads a verb's flags (and show's ID), and refuses what does not go
// together. It needs no API; getenv gives the defaults of --api and
// --token.
func parse(args []string, getenv func(string) string, stdout io.Writer) (options, error) {
	if len(args) == 0 {
		return options{}, errors.New("usage: relay dead list|show|replay|purge|job [flags]; add -h to a verb for its flags")
	}
	o := options{verb: args[0]}
	args = args[1:]
	fs := flag.NewFlagSet("relay dead "+o.verb, flag.ContinueOnError)
	fs.SetOutput(stdout)
	o.api.Register(fs, getenv("RELAY_API"), apiclient.Token(getenv, os.Stderr))
	fs.StringVar(&o.source, "source", "", "only messages parked from this `queue` (e.g. email-queue)")
	if o.verb != "job" {
		fs.StringVar(&o.recipient, "recipient", "", "only the copies for this recipient `address` (exact match; an email has a copy per recipient)")
	}
	switch o.verb {
	case "list":
		o.registerFilters(fs)
		fs.StringVar(&o.id, "id", "", "only the message with this `id`")
		fs.IntVar(&o.limit, "limit", DefaultLimit, "show at most `n` messages (0: all)")
		fs.BoolVar(&o.json, "json", false, "print JSON, one object per line")
	case "show":
		fs.BoolVar(&o.json, "json", false, "print JSON, one object per parked copy a line, as GET /v1/dead-letters/{id}")
		fs.Usage = func() {
			fmt.Fprintln(stdout, "usage: relay dead show ID [--source Q] [--recipient ADDRESS] [--json]\n\n"+
				"Prints every parked copy of the message ID (one per channel it was parked from, and for\n"+
				"email one per recipient) in full: its history, every header and the body (JSON as JSON,\n"+
				"anything else as base64).")
			fs.PrintDefaults()
		}
		// The id comes first (relay dead show ID --json) or after the
		// flags; the flag package stops at the first argument.
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			o.id, args = args[0], args[1:]
		}
	case "replay", "purge":
		o.registerFilters(fs)
		fs.StringVar(&o.id, "id", "", "only the message with this `id`")
		fs.BoolVar(&o.all, "all", false, "every parked message")
		fs.BoolVar(&o.dryRun, "dry-run", false, "only say how many parked messages the filters select now; touch none")
		fs.BoolVar(&o.job, "job", false, "run as a job in the API (POST /v1/dead-letters/jobs) and follow its progress on stderr;\n"+
			"a job goes on if this command stops, and another API process resumes it if its own stops")
		if o.verb == "purge" {
			fs.BoolVar(&o.yes, "yes", false, "do not ask for confirmation")
		}
	case "job":
		fs.BoolVar(&o.json, "json", false, "print the job as JSON, as GET /v1/dead-letters/jobs/{id}")
		fs.BoolVar(&o.cancel, "cancel", false, "cancel the job: it stops after the copy in hand; what it did stays done")
		fs.Usage = func() {
			fmt.Fprintln(stdout, "usage: relay dead job ID [--cancel] [--json]\n\n"+
				"Prints a dead-letter job (relay dead replay|purge --job starts one): its state, how many\n"+
				"parked copies it selected, replayed or purged, and left parked, and its last error.")
			fs.PrintDefaults()
		}
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			o.id, args = args[0], args[1:]
		}
	default:
		return o, fmt.Errorf("unknown verb %q: want list, show, replay, purge or job", o.verb)
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	rest := fs.Args()
	if (o.verb == "show" || o.verb == "job") && o.id == "" && len(rest) > 0 {
		o.id, rest = rest[0], rest[1:]
	}
	if len(rest) > 0 {
		return o, fmt.Errorf("unexpected argument %q", rest[0])
	}
	switch {
	case o.verb == "show" && o.id == "":
		return o, errors.New("relay dead show needs an id: relay dead show ID [--source Q] [--recipient ADDRESS] [--json]")
	case o.verb == "job" && o.id == "":
		return o, errors.New("relay dead job needs an id: relay dead job ID [--json]")
	case o.all && o.narrowed():
		return o, fmt.Errorf("relay dead %s: --all selects every parked message: leave out %s, or --all", o.verb, filterFlags)
	case (o.verb == "replay" || o.verb == "purge") && !o.all && !o.narrowed():
		return o, fmt.Errorf("relay dead %s needs a filter (%s) or --all", o.verb, filterFlags)
	case o.dryRun && o.job:
		return o, fmt.Errorf("relay dead %s: --dry-run counts and --job acts: give one", o.verb)
	case o.limit < 0:
		return o, fmt.Errorf("--limit %d: want 0 or more (0: all)", o.limit)
	}
	return o, nil
}

// Run dispatches `relay dead <list|show|replay|purge|job> [flags]`. stdin
// answers purge's confirmation question; a job's progress goes to
// stderr.
func Run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout io.Writer) error {
	return run(ctx, args, getenv, stdin, stdout, os.Stderr)
}

func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	// Parked messages carry what any publisher wrote: nothing of it
	// reaches the terminal as a control sequence.
	stdout = apiclient.Terminal(stdout)
	o, err := parse(args, getenv, stdout)
	if err != nil {
		return err
	}
	api := o.api.Client()
	sel := o.selection()
	q := sel.Query()
	if o.verb != "list" {
		q = url.Values{}
		for k, v := range map[string]string{"source": o.source, "recipient": o.recipient} {
			if v != "" {
				q.Set(k, v)
			}
		}
	}
	explain := func(err error) error { return notParkedHint(o.api.Explain(err)) }

	switch o.verb {
	case "list":
		q.Set("limit", strconv.Itoa(o.limit))
		list, err := api.DeadLetters(ctx, q)
		if err != nil {
			return explain(err)
		}
		return printList(stdout, list, o.json)
	case "show":
		list, err := api.DeadLetter(ctx, o.id, q)
		if err != nil {
			return explain(err)
		}
		return printShow(stdout, list, o.json)
	case "job":
		get := api.DeadLetterJob
		if o.cancel {
			get = api.CancelDeadLetterJob
		}
		j, err := get(ctx, o.id)
		if err != nil {
			return o.api.Explain(err)
		}
		return printJob(stdout, j, o.json)
	}
	if o.dryRun {
		n, err := api.CountDeadLetters(ctx, o.verb, sel)
		if err != nil {
			return explain(err)
		}
		fmt.Fprintf(stdout, "%d parked message(s) match; dry run: nothing was %s\n", n, map[string]string{"replay": "replayed", "purge": "purged"}[o.verb])
		return nil
	}
	total := -1 // how many the selection holds, when counted
	if o.verb == "purge" && !o.yes {
		n, err := selected(ctx, api, o, q)
		if err != nil {
			return explain(err)
		}
		if n == 0 {
			fmt.Fprintln(stdout, "nothing to purge")
			return nil
		}
		fmt.Fprintf(stdout, "Delete %d parked message(s) for good? Type yes to confirm: ", n)
		answer, _ := bufio.NewReader(stdin).ReadString('\n')
		if strings.TrimSpace(answer) != "yes" {
			return errors.New("purge cancelled: nothing was deleted")
		}
		total = n
	}
	if o.job {
		if total < 0 {
			// A dry run first gives the progress line its "of N"; without
			// it the job runs all the same.
			if n, err := api.CountDeadLetters(ctx, o.verb, sel); err == nil {
				total = n
			}
		}
		return runJob(ctx, api, o, total, stdout, stderr, time.Second/2)
	}
	if o.verb == "replay" {
		// The API records each replay in the history before it answers.
		n, err := api.ReplayDeadLetters(ctx, sel)
		if !answered(err) {
			return explain(err)
		}
		fmt.Fprintf(stdout, "replayed %d message(s) to their source queues with a fresh retry count\n", n)
		if err != nil {
			return explain(err)
		}
		return nil
	}
	n, err := api.PurgeDeadLetters(ctx, sel)
	if !answered(err) {
		return explain(err)
	}
	fmt.Fprintf(stdout, "purged %d message(s)\n", n)
	if err != nil {
		return explain(err)
	}
	return nil
}

// runJob starts o's replay or purge as a job and follows it every poll
// until it ends: a progress line on stderr (rewritten in place on a
// terminal, a line per change otherwise), and how it ended on stdout.
// total is how many a dry run counted before, -1 if unknown. The job goes
// on if ctx ends first.
func runJob(ctx context.Context, api *apiclient.Client, o options, total int, stdout, stderr io.Writer, poll time.Duration) error {
	j, err := api.StartDeadLetterJob(ctx, o.verb, o.selection())
	if err != nil {
		return o.api.Explain(err)
	}
	tty := isTerminal(stderr)
	fmt.Fprintf(stderr, "started job %s (relay dead job %s shows it)\n", j.ID, j.ID)
	last := ""
	for j.State == "running" {
		if line := progressLine(j, total); line != last {
			if tty {
				fmt.Fprintf(stderr, "\r\033[K%s", line)
			} else {
				fmt.Fprintln(stderr, line)
			}
			last = line
		}
		select {
		case <-ctx.Done():
			if tty {
				fmt.Fprintln(stderr)
			}
			return fmt.Errorf("stopped following job %s; it goes on: relay dead job %s shows it", j.ID, j.ID)
		case <-time.After(poll):
		}
		if j, err = api.DeadLetterJob(ctx, j.ID); err != nil {
			if tty {
				fmt.Fprintln(stderr)
			}
			return o.api.Explain(err)
		}
	}
	if tty && last != "" {
		fmt.Fprintln(stderr)
	}
	verb := map[string]string{"replay": "replayed", "purge": "purged"}[j.Action]
	fmt.Fprintf(stdout, "job %s %s: %s %d of %d matched message(s), %d left parked\n", j.ID, j.State, verb, j.Done, j.Matched, j.Failed)
	if j.State != "done" {
		return fmt.Errorf("job %s %s: %s", j.ID, j.State, cmp.Or(j.LastError, "no error given"))
	}
	if j.Failed > 0 {
		return fmt.Errorf("job %s left %d message(s) parked: %s", j.ID, j.Failed, j.LastError)
	}
	return nil
}

// progressLine is a running job's progress in one line; total is how
// many a dry run counted before it started (-1: not counted).
func progressLine(j notification.DeadLetterJob, total int) string {
	verb := map[string]string{"replay": "replayed", "purge": "purged"}[j.Action]
	of := ""
	if total > 0 {
		// The count is of the queue before the job: a copy parked since
		// can make done pass it.
		of = fmt.Sprintf(" of about %d (%d%%)", total, min(100, 100*j.Done/int64(total)))
	}
	return fmt.Sprintf("job %s: %d%s %s, %d matched, %d failed", j.ID, j.Done, of, verb, j.Matched, j.Failed)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// printJob prints a job: with asJSON as GET /v1/dead-letters/jobs/{id}
// answers it, otherwise a field a line.
func printJob(w io.Writer, j notification.DeadLetterJob, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(j)
	}
	bw := bufio.NewWriter(w)
	field := func(name, value string) {
		if value != "" {
			fmt.Fprintf(bw, "%-12s%s\n", name, value)
		}
	}
	field("id", j.ID)
	field("action", j.Action)
	field("state", j.State)
	field("selection", string(j.Selection))
	field("matched", fmt.Sprint(j.Matched))
	field("done", fmt.Sprint(j.Done))
	field("failed", fmt.Sprint(j.Failed))
	field("started", stamp(j.StartedAt))
	if j.FinishedAt != nil {
		field("finished", stamp(*j.FinishedAt))
	}
	if j.Takeovers > 0 {
		field("takeovers", fmt.Sprint(j.Takeovers))
	}
	if j.LastError != "" {
		field("last error", oneLine(j.LastError, 200))
	}
	return bw.Flush()
}

// answered reports whether a replay or purge got as far as the dead-letter
// queue, so that how many it moved is worth printing: done, or stopped
// part way (a queue that is not relay's, a broker error), but not a
// request the API refused or never got.
func answered(err error) bool {
	var e *apiclient.Error
	return err == nil || errors.As(err, &e) && (e.Status == http.StatusConflict || e.Status == http.StatusServiceUnavailable)
}

// selected counts the parked copies a purge would delete: a dry run,
// which holds none of them in memory. An id alone is shown first, so
// that one nothing matches is an error.
func selected(ctx context.Context, api *apiclient.Client, o options, q url.Values) (int, error) {
	if o.id != "" {
		if _, err := api.DeadLetter(ctx, o.id, q); err != nil {
			return 0, err
		}
	}
	return api.CountDeadLetters(ctx, "purge", o.selection())
}

// notParked is the API's 404 for an id nothing matches: retry.ErrNotParked,
// with the API's words.
type notParked struct{ err error }

func (e notParked) Error() string        { return e.err.Error() + " (relay dead list shows what is parked)" }
func (e notParked) Unwrap() error        { return e.err }
func (e notParked) Is(target error) bool { return target == retry.ErrNotParked }

// notParkedHint says where to look when an id matches nothing.
func notParkedHint(err error) error {
	if errors.Is(err, apiclient.ErrNotFound) {
		return notParked{err}
	}
	return err
}

func printList(w io.Writer, list []notification.DeadLetter, asJSON bool) error {
	w = apiclient.Terminal(w)
	if asJSON {
		enc := json.NewEncoder(w)
		for _, p := range list {
			if err := enc.Encode(p); err != nil {
				return err
			}
		}
		return nil
	}
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "the dead-letter queue is empty (for this filter)")
		return err
	}
	// A RECIPIENT column when any copy is one recipient's (email).
	perRecipient := slices.ContainsFunc(list, func(p notification.DeadLetter) bool { return p.Recipient != "" })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "ID\tSOURCE\tREASON\tRETRIES\tREPLAYS\tFIRST FAILURE\tPARKED\tLAST ERROR"
	if perRecipient {
		head = strings.Replace(head, "SOURCE", "RECIPIENT\tSOURCE", 1)
	}
	fmt.Fprintln(tw, head)
	for _, p := range list {
		id := p.ID
		if perRecipient {
			id += "\t" + cmp.Or(p.Recipient, "-")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", id, p.Source, p.Reason, p.Retries, p.Replays,
			stamp(p.FirstFailedAt), stamp(p.ParkedAt), oneLine(p.LastError, 60))
	}
	return tw.Flush()
}

// printShow prints parked copies in full: with asJSON one
// notification.DeadLetterDetail a line, the objects GET
// /v1/dead-letters/{id} answers; otherwise a block each, for people.
func printShow(w io.Writer, list []notification.DeadLetterDetail, asJSON bool) error {
	bw := bufio.NewWriter(apiclient.Terminal(w))
	enc := json.NewEncoder(bw)
	for i, d := range list {
		if asJSON {
			if err := enc.Encode(d); err != nil {
				return err
			}
			continue
		}
		if i > 0 {
			fmt.Fprintln(bw)
		}
		field := func(name, value string) {
			if value != "" {
				fmt.Fprintf(bw, "%-15s%s\n", name, indent(value, 15))
			}
		}
		field("id", d.ID)
		field("recipient", d.Recipient)
		field("source", d.Source)
		field("reason", d.Reason)
		field("retries", fmt.Sprint(d.Retries))
		if d.Replays > 0 {
			field("replays", fmt.Sprintf("%d (%d retries in the rounds before)", d.Replays, d.PriorRetries))
		}
		field("first failure", stamp(d.FirstFailedAt))
		field("parked", stamp(d.ParkedAt))
		if !d.PublishedAt.IsZero() {
			field("published", stamp(d.PublishedAt))
		}
		field("last error", d.LastError)
		field("prior error", d.PriorError)
		field("content type", d.ContentType)
		field("encoding", d.ContentEncoding)
		if len(d.Headers) == 0 {
			fmt.Fprintln(bw, "headers        (none)")
		} else {
			fmt.Fprintln(bw, "headers")
		}
		keys := make([]string, 0, len(d.Headers))
		for k := range d.Headers {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(bw, "  %s: %s\n", k, headerValue(d.Headers[k]))
		}
		switch {
		case d.Body != nil:
			fmt.Fprintf(bw, "body (JSON, %d bytes)\n", d.Size)
			var pretty strings.Builder
			penc := json.NewEncoder(&pretty)
			penc.SetIndent("  ", "  ")
			penc.SetEscapeHTML(false)
			if err := penc.Encode(d.Body); err != nil {
				return err
			}
			fmt.Fprint(bw, "  "+pretty.String())
		case d.BodyBase64 != "":
			fmt.Fprintf(bw, "body (base64, %d bytes)\n", d.Size)
			for s := d.BodyBase64; s != ""; {
				n := min(len(s), 76)
				fmt.Fprintf(bw, "  %s\n", s[:n])
				s = s[n:]
			}
		default:
			fmt.Fprintln(bw, "body (empty)")
		}
	}
	return bw.Flush()
}

// headerValue prints a header's value: a string as it is, anything else
// as JSON.
func headerValue(v any) string {
	if s, ok := v.(string); ok {
		return oneLine(s, 200)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// indent puts n spaces before every line of s but the first.
func indent(s string, n int) string {
	return strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+strings.Repeat(" ", n))
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

// oneLine puts s on one line of at most n characters.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	if s == "" {
		return "-"
	}
	return s
}
