package main

import (
	"flag"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/caarlos0/env/v11"

	"github.com/relay-demo/relay/internal/config"
	"github.com/relay-demo/relay/services/worker"
)

// envVar is one environment variable a configuration struct reads, as its
// tags describe it (internal/config documents them).
type envVar struct {
	key        string
	def        string // the envDefault value, when hasDefault
	hasDefault bool
	required   bool // env:"KEY,required"
	secret     bool // secret:"true": the start-up log masks it
	help       string
	// inBroker is true for the variables of the broker's struct, which
	// every process on the pipeline embeds.
	inBroker bool
	// zero is what the variable holds when it is unset and has no
	// default: "empty" for text and lists, "0" or "false".
	zero string
}

// envVars lists the variables the structs cfgs point to read, in the
// order caarlos0/env reads them, embedded structs included. A variable
// read by more than one field is listed once, where it first appears.
func envVars(cfgs ...any) ([]envVar, error) {
	var out []envVar
	seen := map[string]bool{}
	for _, cfg := range cfgs {
		params, err := env.GetFieldParams(cfg)
		if err != nil {
			return nil, fmt.Errorf("the env tags of %T: %w", cfg, err)
		}
		tags := map[string]envVar{}
		varTags(reflect.TypeOf(cfg).Elem(), brokerType(), false, tags)
		for _, p := range params {
			if seen[p.Key] {
				continue
			}
			seen[p.Key] = true
			v := tags[p.Key]
			v.key, v.def, v.hasDefault, v.required = p.Key, p.DefaultValue, p.HasDefaultValue, p.Required
			out = append(out, v)
		}
	}
	return out, nil
}

// varTags collects the help and secret tags of t's variables, embedded
// structs included, and whether broker, the broker's struct, declares
// them.
func varTags(t, broker reflect.Type, inBroker bool, into map[string]envVar) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		key := strings.Split(f.Tag.Get("env"), ",")[0]
		if key == "" {
			if f.Type.Kind() == reflect.Struct {
				varTags(f.Type, broker, inBroker || f.Type == broker, into)
			}
			continue
		}
		if _, ok := into[key]; !ok {
			into[key] = envVar{help: f.Tag.Get("help"), secret: f.Tag.Get("secret") == "true", inBroker: inBroker, zero: zeroText(f.Type)}
		}
	}
}

// zeroText says what a field of type t holds when its variable is unset.
func zeroText(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "0"
	}
	return "empty"
}

// defaultText says what a variable holds when it is unset: its default,
// "required" or its type's zero.
func defaultText(v envVar, quote func(string) string) string {
	switch {
	case v.required:
		return "required"
	case v.hasDefault && v.def != "":
		return quote(v.def)
	case v.hasDefault || v.zero == "empty":
		return "empty"
	}
	return quote(v.zero)
}

// brokerType returns the struct of the broker's settings, which the
// Config of every process on the pipeline (api, the workers, the
// retrier) embeds, and flaky's does not: docs/configuration.md gives it
// one table of its own instead of one per service, and `relay <service>
// --help` prints it apart from the service's own.
func brokerType() reflect.Type { return reflect.TypeFor[config.Broker]() }

// envTable is one table of environment variables: a part of a service's
// --help, and one of the tables of docs/configuration.md, between
// <!-- env:id --> and <!-- /env:id -->.
type envTable struct {
	id, title string
	vars      []envVar
	// readBy names, by variable, the channels that read it: the column
	// the table of every channel's variables has.
	readBy map[string][]string
}

const brokerTitle = "The broker and the retry policy, read by every process on the pipeline"

// serviceConfigs returns the configuration structs the service name
// parses from the environment, its own first, as its entry in the
// command table lists them.
func serviceConfigs(name string) ([]any, error) {
	for _, c := range commands() {
		if c.name == name && c.configs != nil {
			return c.configs()
		}
	}
	return nil, fmt.Errorf("relay %s reads no configuration struct", name)
}

// serviceEnv returns the tables of the variables relay <name> reads: the
// broker's, the service's own, and for a worker its channel's.
func serviceEnv(name string) func() ([]envTable, error) {
	return func() ([]envTable, error) {
		cfgs, err := serviceConfigs(name)
		if err != nil {
			return nil, err
		}
		ch, isWorker := strings.CutPrefix(name, "worker ")
		// A worker's own struct is its first; every other service's
		// structs are all its own.
		ownCfgs := cfgs
		if isWorker {
			ownCfgs = cfgs[:1]
		}
		own, err := envVars(ownCfgs...)
		if err != nil {
			return nil, err
		}
		broker, own := splitBroker(own)
		var tables []envTable
		if len(broker) > 0 {
			tables = append(tables, envTable{id: "broker", title: brokerTitle, vars: broker})
		}
		if !isWorker {
			return append(tables, envTable{id: name, title: "relay " + name, vars: own}), nil
		}
		tables = append(tables, envTable{id: "worker", title: "Every worker", vars: own})
		// The channel's structs, less what the worker's own already read
		// (CONCURRENCY).
		all, err := envVars(cfgs...)
		if err != nil {
			return nil, err
		}
		return append(tables, envTable{id: "channel-" + ch, title: "The " + ch + " channel", vars: without(all, append(broker, own...))}), nil
	}
}

// configTables returns the tables of docs/configuration.md: the broker's,
// then each service's own variables, the channels' in one table.
func configTables() ([]envTable, error) {
	var tables []envTable
	broker := brokerType()
	brokerVars, err := envVars(reflect.New(broker).Interface())
	if err != nil {
		return nil, err
	}
	tables = append(tables, envTable{id: "broker", title: brokerTitle, vars: brokerVars})
	own := func(id, title, service string) error {
		cfgs, err := serviceConfigs(service)
		if err != nil {
			return err
		}
		if strings.HasPrefix(service, "worker ") {
			cfgs = cfgs[:1]
		}
		vars, err := envVars(cfgs...)
		if err != nil {
			return err
		}
		_, vars = splitBroker(vars)
		tables = append(tables, envTable{id: id, title: title, vars: vars})
		return nil
	}
	if err := own("retrier", "relay retrier", "retrier"); err != nil {
		return nil, err
	}
	channels := worker.Channels()
	if len(channels) == 0 {
		return nil, fmt.Errorf("no channel is registered")
	}
	if err := own("worker", "Every worker (relay worker <channel>)", "worker "+channels[0].Name); err != nil {
		return nil, err
	}
	workerVars := tables[len(tables)-1].vars
	t := envTable{id: "channels", title: "The channels (relay worker <channel> reads its channel's)", readBy: map[string][]string{}}
	for _, c := range channels {
		cfgs, err := serviceConfigs("worker " + c.Name)
		if err != nil {
			return nil, err
		}
		vars, err := envVars(cfgs[1:]...)
		if err != nil {
			return nil, err
		}
		for _, v := range without(vars, append(brokerVars, workerVars...)) {
			if _, seen := t.readBy[v.key]; !seen {
				t.vars = append(t.vars, v)
			}
			t.readBy[v.key] = append(t.readBy[v.key], c.Name)
		}
	}
	tables = append(tables, t)
	if err := own("api", "relay api", "api"); err != nil {
		return nil, err
	}
	if err := own("flaky", "relay flaky (the fake downstreams)", "flaky"); err != nil {
		return nil, err
	}
	return tables, nil
}

// splitBroker parts vars into the broker's and the others.
func splitBroker(vars []envVar) (broker, rest []envVar) {
	for _, v := range vars {
		if v.inBroker {
			broker = append(broker, v)
		} else {
			rest = append(rest, v)
		}
	}
	return broker, rest
}

// without returns vars less those whose key is in drop.
func without(vars, drop []envVar) []envVar {
	var out []envVar
	for _, v := range vars {
		if !slices.ContainsFunc(drop, func(d envVar) bool { return d.key == v.key }) {
			out = append(out, v)
		}
	}
	return out
}

// serviceHelp is `relay <service> --help`.
func serviceHelp(w io.Writer, c command) error {
	tables, err := c.env()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "usage: relay %s\n\n%s.\n\n", c.name, capitalize(c.summary))
	fmt.Fprintf(w, "It takes no arguments: it reads these environment variables.\n")
	if c.name == "all" {
		fmt.Fprintf(w, "Every service in it reads the one environment, and relay all fills in\nwhat the demo needs where it is unset.\n")
	}
	writeText(w, tables)
	return nil
}

// envCommand is `relay help env [--format text|markdown]`: every service's
// variables. The markdown is docs/configuration.md's tables, with their markers.
func envCommand(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("relay help env", flag.ContinueOnError)
	fs.SetOutput(w)
	format := fs.String("format", "text", "output `format`: text, or markdown (the tables of docs/configuration.md)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w (relay help env takes flags only, got %q)", errUsage, strings.Join(fs.Args(), " "))
	}
	tables, err := configTables()
	if err != nil {
		return err
	}
	switch *format {
	case "text":
		writeText(w, tables)
	case "markdown":
		for i, t := range tables {
			if i > 0 {
				fmt.Fprintln(w)
			}
			io.WriteString(w, markdownBlock(t))
		}
	default:
		return fmt.Errorf("%w (--format %q: want text or markdown)", errUsage, *format)
	}
	return nil
}

// writeText writes tables for a terminal: each variable on a line with
// its default, then what it holds, indented.
func writeText(w io.Writer, tables []envTable) {
	for _, t := range tables {
		fmt.Fprintf(w, "\n%s:\n", t.title)
		for _, v := range t.vars {
			var notes []string
			if chans := t.readBy[v.key]; len(chans) > 0 {
				notes = append(notes, strings.Join(chans, ", "))
			}
			switch d := defaultText(v, strconv.Quote); d {
			case "required":
				notes = append(notes, d)
			case "empty":
			default:
				notes = append(notes, "default "+d)
			}
			if v.secret {
				notes = append(notes, "secret")
			}
			line := "  " + v.key
			if len(notes) > 0 {
				line += " (" + strings.Join(notes, ", ") + ")"
			}
			fmt.Fprintln(w, line)
			for _, l := range wrap(v.help, 80-8) {
				fmt.Fprintln(w, "        "+l)
			}
		}
	}
}

// markdownBlock is t as docs/configuration.md holds it: a table between its markers.
func markdownBlock(t envTable) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<!-- env:%s -->\n", t.id)
	if t.readBy != nil {
		b.WriteString("| variable | channels | default | meaning |\n|---|---|---|---|\n")
	} else {
		b.WriteString("| variable | default | meaning |\n|---|---|---|\n")
	}
	for _, v := range t.vars {
		def := defaultText(v, func(s string) string { return "`" + s + "`" })
		meaning := markdownText(v.help)
		if v.secret {
			meaning += " (secret: the start-up log masks it)"
		}
		if t.readBy != nil {
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", v.key, strings.Join(t.readBy[v.key], ", "), def, meaning)
		} else {
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", v.key, def, meaning)
		}
	}
	fmt.Fprintf(&b, "<!-- /env:%s -->\n", t.id)
	return b.String()
}

// markdownText escapes what a table cell would otherwise read as markup.
func markdownText(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(s)
}

// wrap breaks s into lines of at most width bytes at spaces; a longer
// word has a line of its own.
func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
