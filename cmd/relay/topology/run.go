// Package topology is `relay topology`: it declares the pipeline's
// exchanges and queues and prints them, as a list or a Mermaid diagram
// drawn from the same declaration the services use.
package topology

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/config"
	"github.com/relay-demo/relay/retry"
)

// Config is the topology command's environment.
type Config struct {
	config.Broker
}

// Run parses args (--format text|mermaid, --no-declare) and does the work.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("relay topology", flag.ContinueOnError)
	fs.SetOutput(stdout)
	format := fs.String("format", "text", "output `format`: text or mermaid")
	noDeclare := fs.Bool("no-declare", false, "print the plan without touching the broker (needs DELAY_BACKEND other than auto)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *format != "text" && *format != "mermaid" {
		return fmt.Errorf("--format %q: want text or mermaid", *format)
	}
	var cfg Config
	if err := config.Parse(getenv, &cfg); err != nil {
		return err
	}
	topo, err := cfg.Topology(channel.Routes())
	if err != nil {
		return err
	}
	if *noDeclare {
		if topo.Backend == retry.Auto {
			return errors.New("--no-declare cannot probe the broker: set DELAY_BACKEND to plugin, ttl, levels or native")
		}
	} else {
		if topo, err = retry.Resolve(ctx, topo, cfg.URLs(), nil); err != nil {
			return err
		}
		if topo.Backend == retry.Auto {
			return ctx.Err()
		}
	}
	if !*noDeclare {
		conn, err := retry.DialAny(cfg.URLs(), "relay topology")
		if err != nil {
			return err
		}
		defer conn.Close()
		if err := topo.Declare(ctx, conn); err != nil {
			return err
		}
	}
	plan := topo.Plan()
	if *format == "mermaid" {
		_, err = io.WriteString(stdout, plan.Mermaid())
		return err
	}
	_, err = fmt.Fprintf(stdout, "delay backend: %s, queue type: %s, policy: %s\n%s", topo.Backend, orClassic(topo.QueueType), topo.Policy, plan)
	return err
}

func orClassic(q retry.QueueType) retry.QueueType {
	if q == "" {
		return retry.Classic
	}
	return q
}
