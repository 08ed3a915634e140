// Package status is `relay status`: one notification's timeline, read from
// the API's history (GET /v1/notifications/{id}) and printed as text, one
// line per attempt.
package status

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/relay-demo/relay/internal/apiclient"
)

// Run parses the flags and prints the timeline of the notification the one
// argument names.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	return run(ctx, args, getenv, stdout, clock{now: time.Now, loc: time.Local})
}

// clock is the time the output is relative to and the zone it is written in.
type clock struct {
	now func() time.Time
	loc *time.Location
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer, c clock) error {
	// Error texts and recipients come from downstreams and publishers:
	// nothing of them reaches the terminal as a control sequence.
	stdout = apiclient.Terminal(stdout)
	fs := flag.NewFlagSet("relay status", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: relay status [flags] <notification id>\n\nPrints the notification's copies and every attempt of each, from the API's history.\n\nFlags:")
		fs.PrintDefaults()
	}
	var api apiclient.Flags
	api.Register(fs, getenv("RELAY_API"), apiclient.Token(getenv, os.Stderr))
	asJSON := fs.Bool("json", false, "print the API's answer as it is")
	width := fs.Int("width", 100, "cut each error at a word boundary to fit lines of this many `columns`")
	full := fs.Bool("full", false, "print every error in full")
	id, err := parse(fs, args)
	if err != nil {
		return err
	}
	if *width < 40 {
		return fmt.Errorf("--width %d: want 40 columns or more", *width)
	}
	client := api.Client()
	if *asJSON {
		raw, err := client.NotificationJSON(ctx, id)
		if err != nil {
			return explain(api, id, err)
		}
		_, err = stdout.Write(append(raw, '\n'))
		return err
	}
	n, err := client.Notification(ctx, id)
	if err != nil {
		return explain(api, id, err)
	}
	p := printer{w: stdout, width: *width, full: *full, now: c.now(), loc: c.loc}
	return p.notification(n)
}

// parse reads the flags, before and after the one id.
func parse(fs *flag.FlagSet, args []string) (string, error) {
	var ids []string
	for {
		if err := fs.Parse(args); err != nil {
			return "", err
		}
		if fs.NArg() == 0 {
			break
		}
		ids = append(ids, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(ids) != 1 {
		return "", fmt.Errorf("want one notification id, as in `relay status ntf_…`; got %d", len(ids))
	}
	return ids[0], nil
}

func explain(api apiclient.Flags, id string, err error) error {
	if errors.Is(err, apiclient.ErrNotFound) {
		return fmt.Errorf("no notification %s (or it is older than the history keeps)", id)
	}
	return api.Explain(err)
}
