package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/relay-demo/relay/internal/config"
)

// usageError is a usage error (exit code 2) with a message of its own,
// which may mark it further (errUnknown).
type usageError struct {
	msg  string
	also error
}

func (e usageError) Error() string { return e.msg }

func (e usageError) Unwrap() []error { return []error{errUsage, e.also} }

// unknownCommand is the error for args, which name no command: the
// command it likely misspells, if one is near, and where the list is.
func unknownCommand(args []string) error {
	msg := fmt.Sprintf("relay: unknown command %q", args[0])
	if near, ok := config.Nearest(args[0], commandWords()); ok {
		msg += fmt.Sprintf(": did you mean relay %s?", near)
	}
	return usageError{msg + " (`relay help` lists the commands)", errUnknown}
}

// unknownVerb is the error for `relay <group> <verb>` when the group, such
// as dead or worker, has no such verb: the one it likely misspells, if one
// is near, and the group's verbs.
func unknownVerb(group, verb string, verbs []string) error {
	msg := fmt.Sprintf("relay %s needs one of: %s", group, strings.Join(verbs, ", "))
	if verb == "" || strings.HasPrefix(verb, "-") {
		return usageError{msg, nil}
	}
	known := msg
	msg = fmt.Sprintf("relay %s has no command %q", group, verb)
	if near, ok := config.Nearest(verb, verbs); ok {
		msg += fmt.Sprintf(": did you mean relay %s %s?", group, near)
	}
	return usageError{msg + " (" + known + ")", errUnknown}
}

// commandWords lists the first word of every command, each once.
func commandWords() []string {
	var out []string
	seen := map[string]bool{}
	for _, c := range commands() {
		w, _, _ := strings.Cut(c.name, " ")
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// groupHelp is `relay <group> --help` for a group of commands such as
// dead or worker: its commands and what each does.
func groupHelp(group string) runFunc {
	return func(_ context.Context, _ []string, _ func(string) string, stdout io.Writer) error {
		fmt.Fprintf(stdout, "usage: relay %s <command> [arguments]\n\nCommands:\n", group)
		for _, c := range commands() {
			if strings.HasPrefix(c.name, group+" ") {
				fmt.Fprintf(stdout, "  %-16s %s\n", c.name, c.summary)
			}
		}
		fmt.Fprintf(stdout, "\n`relay %s <command> --help` says more about one.\n", group)
		return nil
	}
}
