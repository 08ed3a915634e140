package peers

import (
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/riverqueue/river"
)

// Options are the command's flags. The parent passes them on to each
// child, with --system naming the one system the child runs.
type Options struct {
	Workload
	// System, set only in a child, is the one system to run.
	System string
	// Systems are the systems the parent runs, in order.
	Systems []string
	// SystemsGiven is set when --systems was: the list is run as given,
	// not trimmed to what the broker can run.
	SystemsGiven bool
	// WatermillJobs, if set, replaces Jobs for watermill-amqp, whose
	// retries sleep in its handlers.
	WatermillJobs int
	// Out is the markdown file whose bench-peers section is written;
	// empty writes none.
	Out string
	// Section labels a run on another broker, such as 4.3: its section of
	// Out is marked <!-- bench-peers:4.3:start -->, beside the page's own.
	Section string
	// Timeout bounds each system's run; Settle is how long the workers
	// go on once every job finished, to catch duplicates; Progress is
	// the interval of the child's progress lines.
	Timeout, Settle, Progress time.Duration

	AMQPURL, RedisAddr, PostgresDSN string

	// CPUProfile, if set, is a directory where each child writes a CPU
	// profile of its run, <system>.pprof.
	CPUProfile string

	AsynqDelayedCheck, AsynqTaskCheck time.Duration
	RiverCooldown, RiverPoll          time.Duration
}

// systemNames lists every system's flag name.
func systemNames() []string {
	names := make([]string, len(systems))
	for i, s := range systems {
		names[i] = s.Name
	}
	return names
}

// parseOptions reads the flags, with the servers' addresses defaulting to
// AMQP_URL, REDIS_ADDR and PEERS_PG_DSN from getenv, then to the local
// servers.
func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (Options, error) {
	o := Options{Workload: DefaultWorkload}
	fs := flag.NewFlagSet("relay-peers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: relay-peers [flags]\n\nRuns the same retry workload on relay, a raw amqp091-go DLX loop, asynq, River and watermill-amqp,\none child process per system, and writes a comparison table.\n\nflags:\n")
		fs.PrintDefaults()
	}
	systemList := strings.Join(systemNames(), ",")
	fs.StringVar(&systemList, "systems", systemList, "systems to run, in order, comma-separated, from: "+strings.Join(systemNames(), ", "))
	fs.StringVar(&o.System, "system", "", "run this one system in this process and print its result as JSON (what the parent runs each child with)")
	fs.IntVar(&o.Jobs, "jobs", o.Jobs, "jobs per system")
	fs.IntVar(&o.WatermillJobs, "watermill-jobs", 0, "jobs for watermill-amqp, whose retries sleep in its handlers (0: --jobs)")
	fs.IntVar(&o.Concurrency, "concurrency", o.Concurrency, "concurrent handlers per system")
	fs.Float64Var(&o.FailRate, "fail-rate", o.FailRate, "probability that an attempt fails (decided by a hash of job id and attempt)")
	fs.DurationVar(&o.Delay, "delay", o.Delay, "fixed delay before each retry")
	fs.IntVar(&o.MaxRetries, "max-retries", o.MaxRetries, "retries before a job is parked")
	fs.StringVar(&o.Out, "out", "", "markdown file whose bench-peers section to write or append (empty: print only)")
	fs.StringVar(&o.Section, "section", "", "write the section of this `label` (such as 4.3, for a run on another broker) between <!-- bench-peers:label:start --> and <!-- bench-peers:label:end -->, keeping the page's own (empty: the page's own)")
	fs.DurationVar(&o.Timeout, "timeout", 5*time.Minute, "bound on each system's run; a run past it is reported as failed")
	fs.DurationVar(&o.Settle, "settle", 500*time.Millisecond, "how long the workers go on after the last job finished, to catch duplicate deliveries")
	fs.DurationVar(&o.Progress, "progress", 5*time.Second, "interval of the progress lines")
	fs.StringVar(&o.AMQPURL, "amqp-url", or(getenv("AMQP_URL"), "amqp://guest:guest@localhost:5672/"), "RabbitMQ (default $AMQP_URL, else the local broker)")
	fs.StringVar(&o.RedisAddr, "redis-addr", or(getenv("REDIS_ADDR"), "127.0.0.1:6379"), "Redis for asynq (default $REDIS_ADDR, else the local server)")
	fs.StringVar(&o.PostgresDSN, "pg-dsn", or(getenv("PEERS_PG_DSN"), "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "PostgreSQL for River; it creates and drops a schema of its own (default $PEERS_PG_DSN)")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "", "directory where each child writes a CPU profile of its run, <system>.pprof")
	fs.DurationVar(&o.AsynqDelayedCheck, "asynq-delayed-check", 10*time.Millisecond, "asynq's DelayedTaskCheckInterval (its default: 5s)")
	fs.DurationVar(&o.AsynqTaskCheck, "asynq-task-check", 10*time.Millisecond, "asynq's TaskCheckInterval (its default: 1s)")
	// River's FetchCooldown is the least time between two fetches, and its
	// doc says "Throughput is limited by this value"; a fetch takes at most
	// MaxWorkers jobs, so with a backlog the rate is at most MaxWorkers per
	// cooldown and a fetch. Its least allowed value (FetchCooldownMin) is
	// the setting for a low-latency workload.
	fs.DurationVar(&o.RiverCooldown, "river-fetch-cooldown", river.FetchCooldownMin, "River's FetchCooldown (its default: 100ms; its least allowed value, here: 1ms)")
	fs.DurationVar(&o.RiverPoll, "river-fetch-poll", 10*time.Millisecond, "River's FetchPollInterval (its default: 1s)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	fs.Visit(func(f *flag.Flag) { o.SystemsGiven = o.SystemsGiven || f.Name == "systems" })
	for _, s := range strings.Split(systemList, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if _, ok := systemNamed(s); !ok {
			return o, fmt.Errorf("unknown system %q; want one of %s", s, strings.Join(systemNames(), ", "))
		}
		o.Systems = append(o.Systems, s)
	}
	if !sectionLabel.MatchString(o.Section) {
		return o, fmt.Errorf("--section %q: want 1 to 32 letters, digits, dots, dashes or underscores, such as 4.3", o.Section)
	}
	if o.System != "" {
		if _, ok := systemNamed(o.System); !ok {
			return o, fmt.Errorf("unknown system %q; want one of %s", o.System, strings.Join(systemNames(), ", "))
		}
	}
	if err := o.Workload.Validate(); err != nil {
		return o, err
	}
	if o.Timeout <= 0 || o.Progress <= 0 || o.Settle < 0 {
		return o, fmt.Errorf("--timeout and --progress must be positive, --settle not negative")
	}
	if o.RiverPoll < o.RiverCooldown {
		return o, fmt.Errorf("--river-fetch-poll %s is shorter than --river-fetch-cooldown %s, which River refuses", o.RiverPoll, o.RiverCooldown)
	}
	return o, nil
}

// childArgs are the flags a child runs sys with. The servers' addresses,
// which may hold passwords, go by the environment instead (childEnv), out
// of the process list.
func (o Options) childArgs(sys string, jobs int) []string {
	return []string{
		"--system", sys,
		"--jobs", fmt.Sprint(jobs),
		"--concurrency", fmt.Sprint(o.Concurrency),
		"--fail-rate", fmt.Sprint(o.FailRate),
		"--delay", o.Delay.String(),
		"--max-retries", fmt.Sprint(o.MaxRetries),
		"--timeout", o.Timeout.String(),
		"--settle", o.Settle.String(),
		"--progress", o.Progress.String(),
		"--asynq-delayed-check", o.AsynqDelayedCheck.String(),
		"--asynq-task-check", o.AsynqTaskCheck.String(),
		"--river-fetch-cooldown", o.RiverCooldown.String(),
		"--river-fetch-poll", o.RiverPoll.String(),
		"--cpuprofile", o.CPUProfile,
	}
}

// childEnv is the environment of a child: this process's, with the
// servers' addresses.
func (o Options) childEnv(environ []string) []string {
	return append(environ, "AMQP_URL="+o.AMQPURL, "REDIS_ADDR="+o.RedisAddr, "PEERS_PG_DSN="+o.PostgresDSN)
}

// sectionLabel is what --section accepts; empty is the page's own section.
var sectionLabel = regexp.MustCompile(`^[0-9A-Za-z._-]{0,32}$`)

func or(s, def string) string {
	if s != "" {
		return s
	}
	return def
}
