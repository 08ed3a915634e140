package status

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/relay-demo/relay/internal/apiclient"
)

// RunProviders is `relay providers`: the mail servers and SMS gateways,
// with the circuits and limits every worker replica shares, read from the
// API's GET /v1/providers.
func RunProviders(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	return runProviders(ctx, args, getenv, stdout, clock{now: time.Now, loc: time.Local})
}

func runProviders(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer, c clock) error {
	stdout = apiclient.Terminal(stdout)
	fs := flag.NewFlagSet("relay providers", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: relay providers [flags]\n\nPrints each channel's mail servers or SMS gateways in the order copies try them, with the circuit the workers last recorded and the limit they share.\n\nFlags:")
		fs.PrintDefaults()
	}
	var api apiclient.Flags
	api.Register(fs, getenv("RELAY_API"), apiclient.Token(getenv, os.Stderr))
	asJSON := fs.Bool("json", false, "print the API's answer as it is")
	width := fs.Int("width", 100, "cut each error at a word boundary to fit lines of this many `columns`")
	full := fs.Bool("full", false, "print every error in full")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("relay providers takes no arguments; got %q", fs.Arg(0))
	}
	if *width < 40 {
		return fmt.Errorf("--width %d: want 40 columns or more", *width)
	}
	client := api.Client()
	if *asJSON {
		raw, err := client.ProvidersJSON(ctx)
		if err != nil {
			return api.Explain(err)
		}
		_, err = stdout.Write(append(raw, '\n'))
		return err
	}
	ps, err := client.Providers(ctx)
	if err != nil {
		return api.Explain(err)
	}
	p := printer{w: stdout, width: *width, full: *full, now: c.now(), loc: c.loc}
	return p.providers(ps)
}

// providers writes each channel's providers, a line each:
//
//	email
//	  1  primary  open    since 12:00:01 (25s ago)  421 try again later
//	  2  backup   closed  4/s, burst 2: next slot in 250ms, 3 waiting
func (p printer) providers(ps []apiclient.Provider) error {
	var b strings.Builder
	if len(ps) == 0 {
		b.WriteString("No providers yet: an email or sms worker declares its mail servers or gateways in the history store when it starts\n(with a limit, or HISTORY_DSN or DATA_DIR set).\n")
		_, err := io.WriteString(p.w, b.String())
		return err
	}
	names, states := 0, 0
	for _, pr := range ps {
		names = max(names, utf8.RuneCountInString(pr.Name))
		states = max(states, utf8.RuneCountInString(pr.Circuit.State))
	}
	channel := ""
	for _, pr := range ps {
		if pr.Channel != channel {
			if channel != "" {
				b.WriteString("\n")
			}
			channel = pr.Channel
			b.WriteString(channel + "\n")
		}
		b.WriteString(p.provider(pr, names, states))
		b.WriteString("\n")
	}
	_, err := io.WriteString(p.w, b.String())
	return err
}

// provider is the line of one provider, its name and state padded to
// names and states columns.
func (p printer) provider(pr apiclient.Provider, names, states int) string {
	line := fmt.Sprintf("  %d  %-*s  %-*s", pr.Position+1, names, pr.Name, states, pr.Circuit.State)
	var notes []string
	if pr.Circuit.State != "closed" && pr.Circuit.Since != nil {
		since := pr.Circuit.Since.In(p.loc)
		notes = append(notes, fmt.Sprintf("since %s (%s ago)", since.Format("15:04:05"), apiclient.Millis(p.now.Sub(since).Milliseconds())))
	}
	if pr.Rate == nil {
		notes = append(notes, "no limit")
	} else {
		r := fmt.Sprintf("%s/s, burst %d", strconv.FormatFloat(pr.Rate.PerSecond, 'f', -1, 64), pr.Rate.Burst)
		if pr.Rate.NextSlotMS > 0 {
			r += ": next slot in " + apiclient.Millis(pr.Rate.NextSlotMS)
		}
		if pr.Rate.Waiting > 0 {
			r += fmt.Sprintf(", %d waiting", pr.Rate.Waiting)
		}
		notes = append(notes, r)
	}
	line += "  " + strings.Join(notes, "  ")
	// The last error says why a circuit opened; a closed one's is history.
	if pr.Circuit.State == "closed" || pr.Circuit.LastError == "" {
		return strings.TrimRight(line, " ")
	}
	line = strings.TrimRight(line, " ") + "  "
	if p.full {
		return line + apiclient.OneLine(pr.Circuit.LastError)
	}
	return line + apiclient.Clip(pr.Circuit.LastError, max(p.width-utf8.RuneCountInString(line), minError))
}
