// Package cancel is `relay cancel <id>`: it takes back what has not gone
// out of a notification (DELETE /v1/notifications/{id}) and prints which
// copies were cancelled and which had gone out already.
package cancel

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/relay-demo/relay/internal/apiclient"
)

// Run parses the flags and cancels the notification the one argument
// names.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	stdout = apiclient.Terminal(stdout)
	fs := flag.NewFlagSet("relay cancel", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: relay cancel [flags] <notification id>\n\n"+
			"Cancels every copy of the notification still scheduled or waiting for a retry: it is never delivered.\n"+
			"A copy already delivered stays delivered. Cancelling again changes nothing.\n\nFlags:")
		fs.PrintDefaults()
	}
	var api apiclient.Flags
	api.Register(fs, getenv("RELAY_API"), apiclient.Token(getenv, os.Stderr))
	var ids []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		ids = append(ids, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(ids) != 1 {
		return fmt.Errorf("relay cancel takes one notification id, not %d: relay cancel ntf_…", len(ids))
	}
	id := ids[0]
	res, err := api.Client().Cancel(ctx, id)
	var aerr *apiclient.Error
	switch {
	case errors.Is(err, apiclient.ErrNotFound):
		return fmt.Errorf("no notification %s in the API's history", id)
	case errors.As(err, &aerr) && aerr.Status == http.StatusConflict:
		return fmt.Errorf("nothing left to cancel of %s: every copy has gone out or is on its way (relay status %s)", id, id)
	case err != nil:
		return api.Explain(err)
	}
	for _, c := range res.Cancelled {
		fmt.Fprintf(stdout, "%s\t%s\tcancelled\n", id, name(c.Channel, c.Recipient))
	}
	for _, c := range res.NotCancelled {
		fmt.Fprintf(stdout, "%s\t%s\t%s, not cancelled\n", id, name(c.Channel, c.Recipient), c.Status)
	}
	return nil
}

// name is a copy as relay status prints it: the channel, and the
// recipient of a copy per recipient.
func name(channel, recipient string) string {
	return strings.TrimSpace(channel + " " + recipient)
}
