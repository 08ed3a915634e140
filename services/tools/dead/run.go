// Package dead is `relay dead list|replay|purge`: the command-line tools
// for messages parked in the dead-letter queue.
package dead

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/services/internal/channel"
	"github.com/relay-demo/relay/services/internal/config"
	"github.com/relay-demo/relay/services/internal/events"
)

// Config is the dead-letter tools' environment.
type Config struct {
	config.Broker
}

// Run dispatches `relay dead <list|replay|purge> [flags]`. stdin answers
// purge's confirmation question.
func Run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: relay dead list|replay|purge [flags]; add -h to a verb for its flags")
	}
	verb, args := args[0], args[1:]
	fs := flag.NewFlagSet("relay dead "+verb, flag.ContinueOnError)
	fs.SetOutput(stdout)
	id := fs.String("id", "", "only the message with this `id`")
	source := fs.String("source", "", "only messages parked from this `queue` (e.g. email-queue)")
	var all, asJSON, yes *bool
	limit := new(int)
	switch verb {
	case "list":
		limit = fs.Int("limit", 50, "show at most `n` messages (0: all)")
		asJSON = fs.Bool("json", false, "print JSON, one object per line")
	case "replay", "purge":
		all = fs.Bool("all", false, "every parked message")
		if verb == "purge" {
			yes = fs.Bool("yes", false, "do not ask for confirmation")
		}
	default:
		return fmt.Errorf("unknown verb %q: want list, replay or purge", verb)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if all != nil && !*all && *id == "" && *source == "" {
		return fmt.Errorf("relay dead %s needs --id, --source or --all", verb)
	}
	if *limit < 0 {
		return fmt.Errorf("--limit %d: want 0 or more", *limit)
	}

	var cfg Config
	if err := config.Parse(getenv, &cfg); err != nil {
		return err
	}
	topo, err := cfg.Topology(channel.Routes())
	if err != nil {
		return err
	}
	filter := retry.Filter{ID: *id}
	if *source != "" {
		filter.Source = topo.Name(strings.TrimPrefix(*source, topo.Prefix))
	}
	conn, err := retry.DialAny(cfg.URLs(), "relay dead "+verb)
	if err != nil {
		return err
	}
	defer conn.Close()
	dl := retry.DeadLetters{Conn: conn, Topology: topo}

	switch verb {
	case "list":
		list, err := dl.List(ctx, filter, *limit)
		if err != nil {
			return err
		}
		return show(stdout, list, *asJSON)
	case "replay":
		// Each replay is an event, for the history: published, and
		// confirmed, before the command returns.
		emitter := events.NewEmitter(topo, "relay dead", nil)
		ectx, stop := context.WithCancel(ctx)
		emitted := make(chan error, 1)
		go func() { emitted <- emitter.Run(ectx, conn) }()
		dl.Observe = emitter.Observe
		n, err := dl.Replay(ctx, filter)
		stop()
		if eerr := <-emitted; eerr != nil {
			err = errors.Join(err, fmt.Errorf("record the replays in the history: %w", eerr))
		}
		fmt.Fprintf(stdout, "replayed %d message(s) to their source queues with a fresh retry count\n", n)
		return err
	default: // purge
		if !*yes {
			list, err := dl.List(ctx, filter, 0)
			if err != nil {
				return err
			}
			if len(list) == 0 {
				fmt.Fprintln(stdout, "nothing to purge")
				return nil
			}
			fmt.Fprintf(stdout, "Delete %d parked message(s) for good? Type yes to confirm: ", len(list))
			answer, _ := bufio.NewReader(stdin).ReadString('\n')
			if strings.TrimSpace(answer) != "yes" {
				return errors.New("purge cancelled: nothing was deleted")
			}
		}
		n, err := dl.Purge(ctx, filter)
		fmt.Fprintf(stdout, "purged %d message(s)\n", n)
		return err
	}
}

func show(w io.Writer, list []retry.DeadLetter, asJSON bool) error {
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
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSOURCE\tREASON\tRETRIES\tFIRST FAILURE\tPARKED\tLAST ERROR")
	for _, p := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", p.ID, p.Source, p.Reason, p.Retries,
			stamp(p.FirstFailedAt), stamp(p.ParkedAt), oneLine(p.LastError, 60))
	}
	return tw.Flush()
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n-1] + "…"
	}
	if s == "" {
		return "-"
	}
	return s
}
