package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/relay-demo/relay/cmd/relay/cancel"
	"github.com/relay-demo/relay/cmd/relay/dead"
	"github.com/relay-demo/relay/cmd/relay/health"
	"github.com/relay-demo/relay/cmd/relay/link"
	"github.com/relay-demo/relay/cmd/relay/send"
	"github.com/relay-demo/relay/cmd/relay/status"
	"github.com/relay-demo/relay/cmd/relay/topology"
	"github.com/relay-demo/relay/demo/all"
	"github.com/relay-demo/relay/demo/flaky"
	"github.com/relay-demo/relay/internal/apiclient"
	"github.com/relay-demo/relay/services/api"
	"github.com/relay-demo/relay/services/retrier"
	"github.com/relay-demo/relay/services/worker"
)

var errUsage = errors.New("usage: relay <command> [arguments]; `relay help` lists the commands")

// runFunc runs a command with its arguments.
type runFunc func(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error

// command is one subcommand of relay.
type command struct {
	name, summary string
	run           runFunc
	// configs, for a long-running service, returns the configuration
	// structs it parses from the environment, its own first, as its Run
	// reads them: `relay <service> --help`, `relay help env` and the
	// tables of docs/configuration.md list their variables. Nil for a
	// tool, and for relay all, which reads every service's.
	configs func() ([]any, error)
	// env, for a service, returns the tables of the variables it reads,
	// which `relay <service> --help` prints. Nil for a tool, whose flags
	// say what it takes.
	env func() ([]envTable, error)
	// verbs are the words a tool takes before its flags (relay
	// completion bash), for the completion scripts.
	verbs []string
}

// service adapts a long-running service's Run, which takes no arguments.
func service(run func(context.Context, func(string) string, io.Writer) error) runFunc {
	return func(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
		if len(args) > 0 {
			return fmt.Errorf("%w (unexpected %q: services are configured by environment; --help lists the variables)", errUsage, strings.Join(args, " "))
		}
		return run(ctx, getenv, stdout)
	}
}

// serviceCommand is the command of a long-running service: run, which
// takes no arguments, and the configuration structs it reads.
func serviceCommand(name, summary string, run func(context.Context, func(string) string, io.Writer) error, configs func() ([]any, error)) command {
	return command{name: name, summary: summary, run: service(run), configs: configs, env: serviceEnv(name)}
}

// structs returns the configs of a service that reads cfgs.
func structs(cfgs ...any) func() ([]any, error) {
	return func() ([]any, error) { return cfgs, nil }
}

// workerFor runs the worker of one channel.
func workerFor(channel string) func(context.Context, func(string) string, io.Writer) error {
	return func(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
		return worker.Run(ctx, channel, getenv, stdout)
	}
}

// deadVerb runs one verb of `relay dead`, answering its questions from stdin.
func deadVerb(verb string, stdin io.Reader) runFunc {
	return func(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
		return dead.Run(ctx, append([]string{verb}, args...), getenv, stdin, stdout)
	}
}

func commands() []command {
	cmds := []command{
		serviceCommand("api", "run the ingest HTTP API (POST /v1/notifications) and the dashboard", api.Run,
			structs(&api.Config{}, &api.EndpointsConfig{})),
	}
	// A worker command for every one of relay's own channels.
	for _, c := range worker.Channels() {
		cmds = append(cmds, serviceCommand("worker "+c.Name, c.Summary, workerFor(c.Name),
			func() ([]any, error) { return worker.Env(c.Name) }))
	}
	return append(cmds, []command{
		serviceCommand("retrier", "run the error and requeue stages of the retry pipeline", retrier.Run, structs(&retrier.Config{})),
		{name: "all", summary: "run every service in one process, wired together for the local demo", run: service(all.Run), env: configTables},
		serviceCommand("flaky", "run the fake, deliberately unreliable SMTP server and webhook receiver", flaky.Run, structs(&flaky.Config{})),
		{name: "send", summary: "post demo notifications to the API (--n N, --watch; --at TIME or --in DURATION to schedule them)", run: send.Run},
		{name: "cancel", summary: "cancel what has not gone out of a notification: copies still scheduled or waiting for a retry (relay cancel <id>)", run: cancel.Run},
		{name: "status", summary: "print a notification's copies and attempts from the API's history (relay status <id>, --json)", run: status.Run},
		{name: "dashboard", summary: "print a one-time link that logs the dashboard in with your token, without the token in it (--id ID opens a notification)", run: link.Run},
		{name: "providers", summary: "print the mail servers and SMS gateways with the circuits and limits the workers share (--json)", run: status.RunProviders},
		{name: "dead list", summary: "list parked messages (--source Q, --id ID, --recipient ADDRESS, --channel C, --reason R, --endpoint EP, --since T, --until T, --error TEXT, --limit N, --json)", run: deadVerb("list", os.Stdin)},
		{name: "dead replay", summary: "send parked messages back with a fresh retry count (filters as list's, or --all; --dry-run counts, --job runs it as a job and follows it)", run: deadVerb("replay", os.Stdin)},
		{name: "dead purge", summary: "delete parked messages for good (filters as list's, or --all; --dry-run, --job) [--yes]", run: deadVerb("purge", os.Stdin)},
		{name: "dead show", summary: "print a parked message in full: history, headers, payload (relay dead show ID, --source Q, --recipient ADDRESS, --json)", run: deadVerb("show", os.Stdin)},
		{name: "dead job", summary: "print a dead-letter job: its state and counts (relay dead job ID, --json); --cancel stops it", run: deadVerb("job", os.Stdin)},
		{name: "topology", summary: "declare the exchanges and queues and print them (--format mermaid, --no-declare)", run: topology.Run},
		{name: "health", summary: "check a service's health endpoint for a container health check: exit 0 on 2xx (relay health http://127.0.0.1:8080/readyz)", run: health.Run},
		{name: "version", summary: "print relay's version and the revision it was built from (also --version)", run: runVersion},
		{name: "completion", summary: "print a shell completion script: relay completion bash|zsh|fish", run: runCompletion,
			verbs: shells},
	}...)
}

// isHelp reports whether args ask a service for its help.
func isHelp(args []string) bool {
	return len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help")
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		usage(stderr)
		return errUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "--help", "-help":
		return help(ctx, rest, getenv, stdout)
	case "--version", "-version", "-v":
		return runVersion(ctx, rest, getenv, stdout)
	}
	c, rest, err := lookup(args)
	if err != nil {
		return err
	}
	if c.env != nil && isHelp(rest) {
		return serviceHelp(stdout, c)
	}
	return c.run(ctx, rest, getenv, stdout)
}

// errUnknown marks a command relay does not have.
var errUnknown = errors.New("unknown command")

// lookup finds the command args name, one word or two ("worker email",
// "dead list"), and returns it with the arguments that follow its name.
func lookup(args []string) (command, []string, error) {
	if len(args) == 0 {
		return command{}, nil, errUsage
	}
	name, rest := args[0], args[1:]
	if len(rest) > 0 {
		for _, c := range commands() {
			if c.name == name+" "+rest[0] {
				return c, rest[1:], nil
			}
		}
	}
	for _, c := range commands() {
		if c.name == name {
			return c, rest, nil
		}
	}
	var verbs []string
	for _, c := range commands() {
		if v, ok := strings.CutPrefix(c.name, name+" "); ok {
			verbs = append(verbs, v)
		}
	}
	if len(verbs) > 0 {
		if isHelp(rest) {
			return command{name: name, summary: "list the " + name + " commands", run: groupHelp(name)}, rest, nil
		}
		return command{}, nil, unknownVerb(name, first(rest), verbs)
	}
	return command{}, nil, unknownCommand(args)
}

// first is args' first word, or "".
func first(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

// help is `relay help`: the command list; `relay help env [--format
// text|markdown]`, every service's variables; `relay help <command>`, a
// command's own help.
func help(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) == 0 {
		usage(stdout)
		return nil
	}
	if args[0] == "env" {
		return envCommand(args[1:], stdout)
	}
	c, rest, err := lookup(args)
	if err != nil && len(args) == 1 {
		// A group of commands, such as dead, lists its own.
		if g, _, gerr := lookup([]string{args[0], "--help"}); gerr == nil {
			return g.run(ctx, nil, getenv, stdout)
		}
	}
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("%w: relay help takes one command, got %q", errUsage, strings.Join(args, " "))
	}
	if c.env != nil {
		return serviceHelp(stdout, c)
	}
	return c.run(ctx, []string{"-h"}, getenv, stdout)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "relay: notifications over RabbitMQ, with retries done right.\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-16s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nServices read their configuration from the environment: `relay <service> --help`\n"+
		"lists a service's variables, `relay help env` every one. A tool's -h lists its flags.")
}

// exitCode prints err, if any, to stderr the way relay reports errors and
// returns the process's exit code: 0, 2 for a usage error, 1 otherwise.
// An error may quote what a server answered, so it reaches the terminal
// through apiclient.Terminal, as the tools' output on stdout does.
func exitCode(err error, stderr io.Writer) int {
	stderr = apiclient.Terminal(stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, err)
		return 2
	}
	fmt.Fprintln(stderr, errorLine(err))
	return 1
}

// errorLine is the line relay prints for err: "relay: " and the error, but
// once only. A message that already names relay, as the tools' own usage
// errors do ("relay dead replay needs --id, …", "usage: relay dead
// list|show|replay|purge"), stands as it is.
func errorLine(err error) string {
	msg := err.Error()
	for _, p := range []string{"relay ", "relay:", "usage: relay"} {
		if strings.HasPrefix(msg, p) {
			return msg
		}
	}
	return "relay: " + msg
}
