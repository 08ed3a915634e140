package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/relay-demo/relay/services/retrier"
	"github.com/relay-demo/relay/services/topology"
)

var errUsage = errors.New("usage: relay <command> [arguments]; `relay help` lists the commands")

// command is one subcommand of relay.
type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error
}

// service adapts a long-running service's Run, which takes no arguments.
func service(run func(context.Context, func(string) string, io.Writer) error) func(context.Context, []string, func(string) string, io.Writer) error {
	return func(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
		if len(args) > 0 {
			return fmt.Errorf("%w (unexpected %q: services are configured by environment)", errUsage, strings.Join(args, " "))
		}
		return run(ctx, getenv, stdout)
	}
}

func commands() []command {
	return []command{
		{"retrier", "run the error and requeue stages of the retry pipeline", service(retrier.Run)},
		{"topology", "declare the exchanges and queues and print them (--format mermaid, --no-declare)", topology.Run},
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		usage(stderr)
		return errUsage
	}
	name, rest := args[0], args[1:]
	if name == "help" || name == "-h" || name == "--help" {
		usage(stdout)
		return nil
	}
	// Two-word commands: "worker email", "dead list".
	if len(rest) > 0 {
		for _, c := range commands() {
			if c.name == name+" "+rest[0] {
				return c.run(ctx, rest[1:], getenv, stdout)
			}
		}
	}
	for _, c := range commands() {
		if c.name == name {
			return c.run(ctx, rest, getenv, stdout)
		}
	}
	usage(stderr)
	return fmt.Errorf("%w: unknown command %q", errUsage, strings.Join(args, " "))
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "relay: notifications over RabbitMQ, with retries done right.\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-16s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nConfiguration is read from the environment; see README.md.")
}
