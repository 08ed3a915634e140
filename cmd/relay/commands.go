package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/relay-demo/relay/services/all"
	"github.com/relay-demo/relay/services/api"
	"github.com/relay-demo/relay/services/flaky"
	"github.com/relay-demo/relay/services/retrier"
	"github.com/relay-demo/relay/services/tools/bench"
	"github.com/relay-demo/relay/services/tools/dead"
	"github.com/relay-demo/relay/services/tools/send"
	"github.com/relay-demo/relay/services/tools/status"
	"github.com/relay-demo/relay/services/tools/topology"
	"github.com/relay-demo/relay/services/tools/workshop"
	"github.com/relay-demo/relay/services/worker"
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

// workerFor runs the worker of one channel.
func workerFor(channel string) func(context.Context, func(string) string, io.Writer) error {
	return func(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
		return worker.Run(ctx, channel, getenv, stdout)
	}
}

// deadVerb runs one verb of `relay dead`, answering its questions from stdin.
func deadVerb(verb string, stdin io.Reader) func(context.Context, []string, func(string) string, io.Writer) error {
	return func(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
		return dead.Run(ctx, append([]string{verb}, args...), getenv, stdin, stdout)
	}
}

func commands() []command {
	cmds := []command{
		{"api", "run the ingest HTTP API (POST /v1/notifications) and the dashboard", service(api.Run)},
	}
	// A worker command for every channel in the registry.
	for _, c := range worker.Channels() {
		cmds = append(cmds, command{"worker " + c.Name, c.Summary, service(workerFor(c.Name))})
	}
	return append(cmds, []command{
		{"retrier", "run the error and requeue stages of the retry pipeline", service(retrier.Run)},
		{"all", "run every service in one process, wired together for the local demo", service(all.Run)},
		{"flaky", "run the fake, deliberately unreliable SMTP server and webhook receiver", service(flaky.Run)},
		{"send", "post demo notifications to the API (--n N, --watch)", send.Run},
		{"status", "print a notification's copies and attempts from the API's history (relay status <id>, --json)", status.Run},
		{"dead list", "list parked messages (--source Q, --id ID, --limit N, --json)", deadVerb("list", os.Stdin)},
		{"dead replay", "send parked messages back with a fresh retry count (--id ID | --source Q | --all)", deadVerb("replay", os.Stdin)},
		{"dead purge", "delete parked messages for good (--id ID | --source Q | --all) [--yes]", deadVerb("purge", os.Stdin)},
		{"workshop", "run the retry strategies side by side (list, run, compare, topology, docs)", workshop.Run},
		{"bench", "measure relay's paths against raw amqp091-go on the broker (--format text|markdown|json, --quick, --out FILE)", bench.Run},
		{"topology", "declare the exchanges and queues and print them (--format mermaid, --no-declare)", topology.Run},
	}...)
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
	var verbs []string
	for _, c := range commands() {
		if v, ok := strings.CutPrefix(c.name, name+" "); ok {
			verbs = append(verbs, v)
		}
	}
	if len(verbs) > 0 {
		return fmt.Errorf("%w: relay %s needs one of: %s", errUsage, name, strings.Join(verbs, ", "))
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
