// Command relay-lab measures relay and teaches its retry designs: `relay-lab
// bench` measures relay's paths against raw amqp091-go, `relay-lab workshop`
// runs the retry strategies side by side. It lives in the lab module so that
// neither is part of the relay binary a copy of the template builds.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/relay-demo/relay/lab/bench"
	"github.com/relay-demo/relay/lab/workshop"
)

// errUsage marks a command line relay-lab cannot run; it exits 2.
var errUsage = errors.New("usage: relay-lab <command> [arguments]; `relay-lab help` lists the commands")

type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error
}

var commands = []command{
	{"workshop", "run the retry strategies side by side (list, run, compare, topology, docs)", workshop.Run},
	{"bench", "measure relay's paths against raw amqp091-go on the broker (--format text|markdown|json, --quick, --out FILE)", bench.Run},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		usage(stderr)
		return errUsage
	}
	name, rest := args[0], args[1:]
	if name == "help" || name == "-h" || name == "--help" || name == "-help" {
		if len(rest) == 0 {
			usage(stdout)
			return nil
		}
		name, rest = rest[0], []string{"-h"}
	}
	for _, c := range commands {
		if c.name == name {
			return c.run(ctx, rest, getenv, stdout)
		}
	}
	usage(stderr)
	return fmt.Errorf("%w (unknown command %q)", errUsage, name)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "relay-lab: relay measured and taught.\n\nCommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nEach command's -h lists its flags.")
}

// exitCode prints err, if any, to stderr and returns the exit code: 0, 2
// for a usage error, 1 otherwise.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, err)
		return 2
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "relay-lab") && !strings.HasPrefix(msg, "usage: relay-lab") {
		msg = "relay-lab: " + msg
	}
	fmt.Fprintln(stderr, msg)
	return 1
}
