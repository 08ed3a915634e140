// Package workshop is `relay-lab workshop`: it runs the retry strategies of
// package strategy against the same deliberately failing downstream and
// measures them side by side.
//
// The downstream runs in-process: the handler each strategy consumes with
// asks a seeded scenario (relay's fake downstream decision,
// flaky.Scenario.Decide, plus a chosen share of notifications that fail for
// a while) whether an attempt succeeds, and records every attempt by
// notification id. No HTTP is involved, so what is measured is the retry
// design and the broker, not a network stack.
//
// Every run waits until every consumer of the strategy is up, then
// publishes its whole load before the clock starts, for the broker to
// release at the scenario's pace: neither start-up nor publishing shows in
// the figures.
//
//	relay-lab workshop list
//	relay-lab workshop run <strategy> [--scenario S] [--n N] [--seed S] [--timeout D] [--jitter J] [--wide]
//	relay-lab workshop compare [--scenario S] [--n N] [--seed S] [--strategies a,b] [--format text|markdown|json] [--wide]
//	relay-lab workshop topology <strategy> [--format text|mermaid]
//	relay-lab workshop docs [--out docs/workshop]
//
// A pipeline strategy runs with the direct hand-off as <strategy>/direct,
// such as delay-levels/direct.
package workshop

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/relay-demo/relay/internal/config"
	"github.com/relay-demo/relay/internal/diagram"
	"github.com/relay-demo/relay/lab/strategy"
	"github.com/relay-demo/relay/retry"
)

// Config is the workshop's environment.
type Config struct {
	AMQPURL string `env:"AMQP_URL" envDefault:"amqp://guest:guest@localhost:5672/" help:"an amqp:// or amqps:// URL"`
}

const usage = `usage: relay-lab workshop <verb> [arguments]
  list                                   the strategies and the scenarios
  run <strategy> [flags]                 run one strategy, printing every attempt
  compare [flags]                        run every strategy on the same scenario: one table, one verdict each
  topology <strategy> [--format mermaid] the strategy's exchanges and queues (no broker needed)
  docs [--out docs/workshop]             rerun the commands in the workshop chapters and write their output in`

// Run dispatches to the workshop's verbs.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	verb, rest := args[0], args[1:]
	switch verb {
	case "list":
		return list(stdout)
	case "topology":
		return topology(rest, stdout)
	case "run", "compare", "docs":
	case "help", "-h", "--help":
		_, err := fmt.Fprintln(stdout, usage)
		return err
	default:
		return fmt.Errorf("unknown verb %q\n%s", verb, usage)
	}
	var cfg Config
	if err := config.Parse(getenv, &cfg); err != nil {
		return err
	}
	switch verb {
	case "run":
		return runCmd(ctx, cfg, rest, stdout)
	case "compare":
		return compareCmd(ctx, cfg, rest, stdout)
	default:
		return docsCmd(ctx, rest, getenv, stdout)
	}
}

// splitName takes the strategy name from the front (or the end) of args.
func splitName(fs *flag.FlagSet, args []string) (string, error) {
	name := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	if name == "" && fs.NArg() > 0 {
		name = fs.Arg(0)
	} else if fs.NArg() > 0 {
		return "", fmt.Errorf("unexpected %q", strings.Join(fs.Args(), " "))
	}
	if name == "" {
		return "", fmt.Errorf("name a strategy: %s", strings.Join(strategy.Names(), ", "))
	}
	if !strategy.Known(name) {
		return "", fmt.Errorf("unknown strategy %q: want one of %s, or %s after one of %s", name,
			strings.Join(strategy.Names(), ", "), strategy.DirectSuffix, strings.Join(strategy.Handoffs(), ", "))
	}
	return name, nil
}

// compared is what compare runs by default: every strategy, and
// delay-levels once more with the direct hand-off, so the table shows what
// the stages cost.
func compared() []string {
	var out []string
	for _, name := range strategy.Names() {
		out = append(out, name)
		if name == "delay-levels" {
			out = append(out, name+strategy.DirectSuffix)
		}
	}
	return out
}

func list(w io.Writer) error {
	fmt.Fprintln(w, "Strategies, in the order the workshop tells them:")
	for _, name := range strategy.Names() {
		s, err := strategy.New(name, strategy.Options{Policy: Policy})
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "\n  %s\n%s", name, wrap(s.Describe(), "    ", 100))
	}
	fmt.Fprint(w, "\n"+wrap(fmt.Sprintf("Hand-offs: %s also run with the direct hand-off, as <name>%s (the worker "+
		"publishes each retry to wait itself; no requeue stage).", strings.Join(strategy.Handoffs(), ", "), strategy.DirectSuffix), "", 100))
	fmt.Fprintln(w, "\nScenarios (the first is the default):")
	for _, sc := range Scenarios() {
		fmt.Fprintf(w, "  %-12s %s\n", sc.Name, sc.Summary)
	}
	_, err := fmt.Fprintf(w, "\nRetry policy for every strategy: %s\n", Policy)
	return err
}

func topology(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("relay-lab workshop topology", flag.ContinueOnError)
	fs.SetOutput(w)
	format := fs.String("format", "text", "output `format`: text, mermaid or svg (the dashboard's drawing)")
	name, err := splitName(fs, args)
	if err != nil {
		return err
	}
	s, err := strategy.New(name, strategy.Options{Policy: Policy})
	if err != nil {
		return err
	}
	switch *format {
	case "mermaid":
		_, err = io.WriteString(w, s.Plan().Mermaid())
	case "svg":
		_, err = io.WriteString(w, diagram.FromPlan(s.Plan(), "").SVG(name+": the topology it declares"))
	case "text":
		_, err = io.WriteString(w, s.Plan().String())
	default:
		err = fmt.Errorf("--format %q: want text, mermaid or svg", *format)
	}
	return err
}

// runFlags are the flags run and compare share.
type runFlags struct {
	scenario string
	n        int
	seed     uint64
	bound    time.Duration
	jitter   float64
	wide     bool
}

func (r *runFlags) register(fs *flag.FlagSet, bound time.Duration) {
	fs.StringVar(&r.scenario, "scenario", Scenarios()[0].Name, "the `scenario` the downstream plays (relay-lab workshop list)")
	fs.IntVar(&r.n, "n", 0, "how many notifications to publish (0: the scenario's default)")
	fs.Uint64Var(&r.seed, "seed", 1, "seed choosing which notifications fail")
	fs.DurationVar(&r.bound, "timeout", bound, "stop a strategy that has not settled after this long")
	fs.Float64Var(&r.jitter, "jitter", 0, "spread every delay over ±`J`×delay (0 to 1); only the designs that "+
		"schedule each delay per message honour it")
	fs.BoolVar(&r.wide, "wide", false, "show every column (wider than 120 columns)")
}

func (r *runFlags) resolve() (Scenario, error) {
	sc, err := FindScenario(r.scenario)
	if err != nil {
		return sc, err
	}
	if r.n == 0 {
		r.n = sc.N
	}
	if r.n < 1 || r.n > 100000 {
		return sc, fmt.Errorf("--n %d: want 1 to 100000", r.n)
	}
	if r.bound <= 0 || r.bound > time.Hour {
		return sc, fmt.Errorf("--timeout %s: want a positive duration up to 1h", r.bound)
	}
	if r.jitter < 0 || r.jitter > 1 {
		return sc, fmt.Errorf("--jitter %g: want 0 to 1", r.jitter)
	}
	return sc, nil
}

func (r *runFlags) spec(cfg Config, name string, sc Scenario) spec {
	p := Policy
	p.Jitter = r.jitter
	return spec{url: cfg.AMQPURL, strategy: name, scenario: sc, n: r.n, seed: r.seed, policy: p, bound: r.bound}
}

// measureBaseline runs the same load with no failures through naive-requeue,
// which is a plain queue when nothing fails, and notes how long after its
// arrival each notification was first attempted: head-of-line waits count
// beyond that.
// It returns the p50 as well, for the report.
func measureBaseline(ctx context.Context, sp spec, w io.Writer, bullet string) (baseline, Duration, error) {
	sp.strategy, sp.scenario, sp.baseline = "naive-requeue", sp.scenario.healthy(), nil
	rec, err := play(ctx, sp, &timeline{w: io.Discard})
	if err != nil {
		return nil, none, fmt.Errorf("baseline: %w", err)
	}
	b := baseline{}
	var firsts []time.Duration
	for id, atts := range rec.attempts {
		if len(atts) > 0 {
			b[id] = atts[0].start.Sub(rec.published[id])
			firsts = append(firsts, b[id])
		}
	}
	p50 := percentile(firsts, 50)
	fmt.Fprintf(w, "%sbaseline: with no failures, a plain queue first attempts a notification %s after it arrives (p50; p99 %s)\n",
		bullet, p50, percentile(firsts, 99))
	return b, p50, nil
}

// policyString writes the policy of a run, with its jitter if any.
func policyString(p retry.Policy) string {
	if p.Jitter > 0 {
		return fmt.Sprintf("%s, jitter ±%g%%", p, p.Jitter*100)
	}
	return p.String()
}

// header describes the conditions of a run, one item a line: wrapped for a
// terminal, or as a Markdown list.
func header(w io.Writer, verb string, sp spec, markdown bool) {
	sc := sp.scenario
	items := []string{
		fmt.Sprintf("relay-lab workshop %s: scenario %s, %d notifications, seed %d", verb, sc.Name, sp.n, sp.seed),
		fmt.Sprintf("scenario: %s; all published before the clock starts, released to the strategy at %g per second; "+
			"each attempt takes the downstream %s.", sc.Summary, sc.Rate, sc.Cost),
		fmt.Sprintf("policy: %s, %d consumers per queue", policyString(sp.policy), Concurrency),
	}
	for _, item := range items {
		if markdown {
			fmt.Fprintf(w, "- %s\n", item)
		} else {
			fmt.Fprint(w, wrap(item, "", 100))
		}
	}
}

func runCmd(ctx context.Context, cfg Config, args []string, w io.Writer) error {
	fs := flag.NewFlagSet("relay-lab workshop run", flag.ContinueOnError)
	fs.SetOutput(w)
	var rf runFlags
	rf.register(fs, 20*time.Second)
	once := fs.Bool("once", false, "with naive-requeue: requeue a delivery only once (naive-requeue-once)")
	name, err := splitName(fs, args)
	if err != nil {
		return err
	}
	if *once {
		if name != "naive-requeue" {
			return fmt.Errorf("--once applies to naive-requeue only")
		}
		name = "naive-requeue-once"
	}
	sc, err := rf.resolve()
	if err != nil {
		return err
	}
	sp := rf.spec(cfg, name, sc)
	s, err := strategy.New(name, strategy.Options{Policy: sp.policy})
	if err != nil {
		return err
	}
	header(w, "run "+name, sp, false)
	fmt.Fprint(w, wrap(s.Describe(), "", 100))
	if err := preflight(ctx, sp); err != nil {
		return err
	}
	if sp.baseline, _, err = measureBaseline(ctx, sp, w, ""); err != nil {
		return err
	}
	fmt.Fprintln(w)
	f, err := runOne(ctx, sp, &timeline{w: w, attempts: true})
	if err != nil {
		return err
	}
	fmt.Fprintln(w)
	rows := []Figures{f}
	verdicts(rows)
	if err := writeText(w, rows, false, rf.wide); err != nil {
		return err
	}
	if copies := s.Layout().Copies; len(copies) > 0 {
		_, err = fmt.Fprintf(w, "  Parked copies in %s: %d.\n", strings.Join(copies, ", "), f.Copies)
	}
	return err
}

func compareCmd(ctx context.Context, cfg Config, args []string, w io.Writer) error {
	began := time.Now()
	fs := flag.NewFlagSet("relay-lab workshop compare", flag.ContinueOnError)
	fs.SetOutput(w)
	var rf runFlags
	rf.register(fs, 15*time.Second)
	format := fs.String("format", "text", "output `format`: text, markdown or json")
	only := fs.String("strategies", "", "comma-separated strategies to run (default: all, and delay-levels/direct)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected %q", strings.Join(fs.Args(), " "))
	}
	if *format != "text" && *format != "markdown" && *format != "json" {
		return fmt.Errorf("--format %q: want text, markdown or json", *format)
	}
	sc, err := rf.resolve()
	if err != nil {
		return err
	}
	names := compared()
	if *only != "" {
		names = strings.Split(*only, ",")
		for _, n := range names {
			if !strategy.Known(n) {
				return fmt.Errorf("--strategies: unknown strategy %q", n)
			}
		}
	}
	// Progress goes with the text and Markdown output, never into JSON.
	progress := w
	if *format == "json" {
		progress = io.Discard
	}
	bullet := ""
	if *format == "markdown" {
		bullet = "- "
	}
	sp := rf.spec(cfg, "", sc)
	if *format != "json" {
		header(progress, "compare", sp, *format == "markdown")
	}
	base, p50, err := measureBaseline(ctx, sp, progress, bullet)
	if err != nil {
		return err
	}
	sp.baseline = base
	report := Report{Scenario: sc.Name, Summary: sc.Summary, N: rf.n, Seed: rf.seed, Policy: policyString(sp.policy), Baseline: p50}
	fmt.Fprintln(progress)
	// Text output shows each run's progress lines too; Markdown and JSON
	// only the outcome.
	lines := io.Discard
	if *format == "text" {
		lines = w
	}
	for _, name := range names {
		sp.strategy = name
		f, err := runOne(ctx, sp, &timeline{w: lines})
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil && !errors.Is(err, errSkipped):
			// One strategy's failure does not hide the others' figures.
			f = emptyRow(Figures{Strategy: name, Failed: err.Error()})
		}
		report.Rows = append(report.Rows, f)
		if f.Skipped != "" || f.Failed != "" {
			fmt.Fprintf(progress, "%s%s: did not run (why: under the table)\n", bullet, name)
			continue
		}
		fmt.Fprintf(progress, "%s%s: %d delivered, %d parked, %d in flight, %d lost in %s\n",
			bullet, name, f.Delivered, f.Parked, f.InFlight, f.Lost, f.Wall)
	}
	verdicts(report.Rows)
	report.Took = Duration(time.Since(began))
	fmt.Fprintf(progress, "%scompare took %s: %d strategies and the baseline, each declared, run and deleted\n\n",
		bullet, report.Took, len(names))
	switch *format {
	case "json":
		return writeJSON(w, report)
	case "markdown":
		return writeMarkdown(w, report.Rows, rf.wide)
	default:
		return writeText(w, report.Rows, true, rf.wide)
	}
}
