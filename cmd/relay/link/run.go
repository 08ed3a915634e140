// Package link is `relay dashboard`: it prints a one-time link that logs
// the dashboard in (POST /v1/dashboard/links), and opens a notification's
// detail with --id. The link carries a code the page exchanges once for
// the token, within two minutes; never the token itself.
package link

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/relay-demo/relay/internal/apiclient"
)

// Run parses the flags and prints the link.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	stdout = apiclient.Terminal(stdout)
	fs := flag.NewFlagSet("relay dashboard", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: relay dashboard [flags]\n\n"+
			"Prints a link to the dashboard that logs it in once with your token, without the token in the link:\n"+
			"a code the page exchanges for it, good for one use within two minutes. --id opens a notification's detail.\n\nFlags:")
		fs.PrintDefaults()
	}
	var api apiclient.Flags
	api.Register(fs, getenv("RELAY_API"), apiclient.Token(getenv, os.Stderr))
	id := fs.String("id", "", "open the detail of the notification with this `id` (ntf_…)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("relay dashboard takes flags only, not %q: relay dashboard --id ntf_…", fs.Arg(0))
	}
	if api.Token == "" {
		return fmt.Errorf("relay dashboard makes a link that logs in with your token: pass one of the API's API_TOKENS with --token (or API_TOKENS)")
	}
	c := api.Client()
	l, err := c.DashboardLink(ctx, *id)
	if err != nil {
		return api.Explain(err)
	}
	fmt.Fprintln(stdout, c.Base()+l.Path)
	if l.ExpiresAt != nil {
		left := time.Until(*l.ExpiresAt).Round(time.Second)
		fmt.Fprintf(stdout, "Open it within %s (until %s), once: it logs this browser tab in with your token, which the link does not hold.\n",
			left, l.ExpiresAt.Local().Format("15:04:05"))
	}
	return nil
}
