package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/relay-demo/relay/internal/config"
	"github.com/relay-demo/relay/services/worker"
)

// elsewhere lists the variables relay reads outside the configuration
// structs: the tools' API and token, and the demo's webhook target.
var elsewhere = []string{"RELAY_API", "API_TOKEN", "DEMO_WEBHOOK_URL"}

// knownVariables lists every variable relay reads: those of the
// configuration tables (docs/configuration.md), every channel's numbered
// ones, and elsewhere.
func knownVariables() ([]string, error) {
	tables, err := configTables()
	if err != nil {
		return nil, err
	}
	known := slices.Clone(elsewhere)
	for _, t := range tables {
		for _, v := range t.vars {
			known = append(known, v.key)
		}
	}
	for _, c := range worker.Channels() {
		known = append(known, worker.NumberedEnv(c.Name)...)
	}
	return known, nil
}

// warnUnknownEnv writes to stderr, before a service starts, a warning
// for each variable of environ relay does not read but that looks meant
// for it (config.Unknown): a misspelled setting is otherwise ignored in
// silence and its default used.
func warnUnknownEnv(args, environ []string, stderr io.Writer) {
	c, rest, err := lookup(args)
	if err != nil || c.env == nil || isHelp(rest) {
		return
	}
	known, err := knownVariables()
	if err != nil {
		return
	}
	// The types NOTIFICATION_TYPES lists bring in their own variables.
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "NOTIFICATION_TYPES="); ok {
			known = append(known, config.TypeVariables(v)...)
		}
	}
	for _, w := range config.Unknown(environ, known) {
		fmt.Fprintln(stderr, "relay: warning: "+w)
	}
}
