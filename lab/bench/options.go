package bench

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/relay-demo/relay/retry"
)

// Formats are the report formats --format accepts.
var Formats = []string{"text", "markdown", "json"}

// Options are the bench command's flags, after defaults and --quick.
type Options struct {
	// Format is text, markdown or json.
	Format string `json:"format"`
	// Out is the file the report is written to; empty means stdout.
	Out string `json:"out"`
	// Section, when set, labels a run on another broker (such as 4.3): a
	// markdown report is then that broker's section of the page, between
	// markers of its label, and replaces only that section of --out.
	Section string `json:"section,omitempty"`
	// Quick shrinks every count so the whole command takes seconds.
	Quick bool `json:"quick"`
	// Quiet drops the progress lines.
	Quiet bool `json:"quiet"`
	// QueueTypes are the queue types every figure is measured on.
	QueueTypes []retry.QueueType `json:"queue_types"`
	// Figures are the figures to measure, from AllFigures.
	Figures []string `json:"figures"`
	// Backends are the delay backends the ratelimit figure runs on; empty:
	// each the broker runs (see rateLimitBackends).
	Backends []retry.Backend `json:"backends,omitempty"`
	// Rounds is how many times each side of a figure is measured, in the
	// order raw, relay, relay, raw, …; the best rate of each side counts.
	Rounds int `json:"rounds"`
	// Ingest is the number of requests (and raw publishes) per side.
	Ingest int `json:"ingest"`
	// Clients is the number of concurrent HTTP clients, and the raw
	// publisher's confirms outstanding.
	Clients int `json:"clients"`
	// Consume is the number of messages each consumer drains.
	Consume int `json:"consume"`
	// Prefetch and Concurrency shape the work-queue consumers.
	Prefetch    int `json:"prefetch"`
	Concurrency int `json:"concurrency"`
	// RoundTrips is the burst of retry round trips per side.
	RoundTrips int `json:"round_trips"`
	// Latency is the number of round trips timed for their extra latency, with Window
	// of them in flight at once.
	Latency int `json:"latency"`
	Window  int `json:"window"`
	// Delay is the scheduled wait of every retry.
	Delay time.Duration `json:"delay_ns"`
	// BatchSize is the number of notifications in each POST
	// /v1/notifications/batch of the ingest-batch figure, and BatchClients
	// the number of clients posting batches at once.
	BatchSize    int `json:"batch_size"`
	BatchClients int `json:"batch_clients"`
	// Waiting is the number of messages the memory figure leaves waiting
	// in the delay stage of each backend (--waiting; --delayed is its
	// deprecated name).
	Waiting int `json:"waiting"`
	// Scheduled is the number of notifications the schedule figure leaves
	// waiting in the levels while it times its probes.
	Scheduled int `json:"scheduled"`
	// Streams is the number of idle dashboard event streams the streams
	// figure opens.
	Streams int `json:"streams"`
	// HistoryNotifications is the number of notifications the history
	// holds while the history-get figure times reads.
	HistoryNotifications int `json:"history_notifications"`
	// DeadLetters is the number of copies the deadletters figure parks;
	// its replay job selects half of them.
	DeadLetters int `json:"dead_letters"`
	// NoisyLanes are the WORK_LANES the noisy figure compares; empty
	// means its defaults (1 and 8; 8 with --quick).
	NoisyLanes []int `json:"noisy_lanes,omitempty"`
	// NoisyReceivers are the ways of naming the receivers the noisy
	// figure compares, from NoisyReceivers; empty means its defaults
	// (endpoints and hosts; endpoints with --quick).
	NoisyReceivers []string `json:"noisy_receivers,omitempty"`
	// Timeout bounds each measured run.
	Timeout time.Duration `json:"timeout_ns"`
	// CPUProfile and MemProfile name pprof output files; empty means none.
	CPUProfile string `json:"cpu_profile"`
	MemProfile string `json:"mem_profile"`
}

// AllFigures are the groups of figures --figures chooses from. ingest and
// ingest-batch share their raw publisher, retry and retry-direct their raw
// loop: chosen together, each raw side is measured once for both.
var AllFigures = []string{"ingest", "ingest-batch", "worker", "retry", "retry-direct", "memory", "schedule", "streams", "history", "history-get", "isolation", "noisy", "ratelimit", "deadletters"}

// figureHelp says what each group of --figures measures, for the flag's
// help.
var figureHelp = map[string]string{
	"ingest":       "POST /v1/notifications against a raw confirmed publisher",
	"ingest-batch": "POST /v1/notifications/batch, in notifications/s, against the same raw publisher",
	"worker":       "relay's consumer against a raw consume-and-ack loop",
	"retry":        "retry round trips through the error and requeue stages against a raw DLX loop, TTL and plugin",
	"retry-direct": "retry round trips with the direct hand-off (the consumer publishes to wait) against the same raw loop",
	"memory":       "relay's RSS and the broker's memory with --waiting messages in the delay stage, per backend",
	"schedule":     "how late 200 notifications scheduled through the API on the levels backend reach their webhook, against their due time, while --scheduled others wait",
	"streams":      "the API's RSS with idle dashboard event streams open",
	"history":      "events stored/s on SQLite and PostgreSQL against the worker",
	"history-get":  "GET /v1/notifications/{id} on a full history",
	"isolation":    "a healthy webhook endpoint beside one that never answers",
	"noisy":        "a receiver's webhooks while another's backlog of 20,000 waits, with WORK_LANES 1 and 8 (--noisy-lanes), as endpoints and as hosts, or as two tenants' endpoints (--noisy-receivers)",
	"ratelimit":    "email throughput under SMTP_RATE, three worker replicas sharing it, against the limit itself",
	"deadletters":  "a bulk replay job of half of 100,000 parked copies (--dead-letters; 1,000 with --quick): time, RSS, duplicates and losses",
}

// maxWaiting bounds --waiting: ten million messages of the API's size
// need several GiB of the broker's memory.
const maxWaiting = 10_000_000

// maxScheduled bounds --scheduled: they are all due within a few minutes.
const maxScheduled = 100_000

// maxBatch is the most notifications the API takes in one batch by
// default (MAX_BATCH).
const maxBatch = 500

// figuresUsage lists the groups of --figures with what each measures.
func figuresUsage() string {
	var b strings.Builder
	b.WriteString("comma-separated `figures` to measure:")
	for _, f := range AllFigures {
		fmt.Fprintf(&b, "\n  %s: %s", f, figureHelp[f])
	}
	return b.String()
}

// errFlags marks an invalid combination of flags.
var errFlags = errors.New("invalid flags")

// ParseOptions parses the bench command's arguments. Counts left unset take
// the full or the --quick size; an error names the flag at fault.
func ParseOptions(args []string, output io.Writer) (Options, error) {
	fs := flag.NewFlagSet("relay-lab bench", flag.ContinueOnError)
	fs.SetOutput(output)
	var o Options
	var queues, figures, backends, noisyLanes, noisyReceivers string
	var delayed int
	fs.StringVar(&o.Format, "format", "text", "report `format`: text, markdown or json")
	fs.StringVar(&o.Out, "out", "", "write the report to this `file` instead of stdout")
	fs.StringVar(&o.Section, "section", "", "write a markdown report as the `label`led section of --out (such as 4.3, for a run on another broker), between <!-- bench:label:start --> and <!-- bench:label:end -->, keeping the rest of the file")
	fs.BoolVar(&o.Quick, "quick", false, "small counts: the whole run takes under a minute")
	fs.BoolVar(&o.Quiet, "quiet", false, "no progress lines (they start with \"# \")")
	fs.StringVar(&queues, "queues", "classic,quorum", "queue `types` to measure: classic, quorum or both")
	fs.StringVar(&figures, "figures", strings.Join(AllFigures, ","), figuresUsage())
	fs.StringVar(&backends, "backends", "", "comma-separated delay `backends` the ratelimit figure runs on: plugin, ttl, levels, native (default: each the broker runs: ttl and levels on any, native on RabbitMQ 4.3 or later, plugin where the delayed-message plugin is enabled)")
	fs.IntVar(&o.Rounds, "rounds", 0, "measure each side this many times, alternating which goes first; the best rate counts (default 2, --quick 1)")
	fs.IntVar(&o.Ingest, "ingest", 0, "HTTP requests, and raw publishes, per side (default 20000, --quick 1000)")
	fs.IntVar(&o.Clients, "clients", 64, "concurrent keep-alive HTTP clients, and raw confirms outstanding")
	fs.IntVar(&o.BatchSize, "batch-size", 100, fmt.Sprintf("notifications per POST /v1/notifications/batch in the ingest-batch figure, 1 to %d (the API's MAX_BATCH); it posts --ingest notifications per side", maxBatch))
	fs.IntVar(&o.BatchClients, "batch-clients", 8, "concurrent keep-alive HTTP clients posting batches")
	fs.IntVar(&o.Consume, "consume", 0, "messages each consumer drains (default 50000, --quick 3000)")
	fs.IntVar(&o.Prefetch, "prefetch", 16, "prefetch of the work-queue consumers (relay worker: twice CONCURRENCY)")
	fs.IntVar(&o.Concurrency, "concurrency", 8, "messages relay's consumer handles at once (relay worker's default)")
	fs.IntVar(&o.RoundTrips, "roundtrips", 0, "retry round trips in the throughput burst (default 5000, --quick 300)")
	fs.IntVar(&o.Latency, "latency", 0, "retry round trips timed for their extra latency (default 1000, --quick 100)")
	fs.IntVar(&o.Window, "window", 16, "retry round trips in flight while latency is timed")
	fs.DurationVar(&o.Delay, "delay", 50*time.Millisecond, "scheduled delay of every retry")
	fs.IntVar(&o.Waiting, "waiting", 0, "messages left waiting in the delay stage of each backend for the memory figure (default 1000000, --quick 5000); refused if the broker's memory limit could not hold them")
	fs.IntVar(&delayed, "delayed", 0, "deprecated: the old name of --waiting")
	fs.IntVar(&o.Scheduled, "scheduled", 0, "notifications the schedule figure leaves waiting, an hour ahead, while it times 200 more due 2 to 20 s ahead (default 10000, --quick 500)")
	fs.IntVar(&o.Streams, "streams", 0, "idle dashboard event streams the streams figure opens (default 1500, --quick 300)")
	fs.IntVar(&o.HistoryNotifications, "history-notifications", 0, "notifications in the history while history-get times reads (default 1000000, --quick 20000)")
	fs.IntVar(&o.DeadLetters, "dead-letters", 0, fmt.Sprintf("copies the deadletters figure parks, half of which its replay job selects (default 100000, --quick 1000; at most %d)", maxDeadLetterCopies))
	fs.StringVar(&noisyLanes, "noisy-lanes", "", fmt.Sprintf("comma-separated `WORK_LANES` settings the noisy figure compares, each 1 to %d (default 1,8; --quick 8)", retry.MaxLanes))
	fs.StringVar(&noisyReceivers, "noisy-receivers", "", "comma-separated `ways` the noisy figure names its two receivers: endpoints (two registered endpoints of one tenant), hosts (bare URLs of two hosts), tenants (an endpoint of each of two tenants, acme and beta, each posting with its own token) (default endpoints,hosts; --quick endpoints)")
	fs.DurationVar(&o.Timeout, "timeout", 2*time.Minute, "bound on each measured run; the memory figure gets 500µs more per waiting message")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the whole run to `file` (samples labelled bench=<figure>/<side>/<queue>)")
	fs.StringVar(&o.MemProfile, "memprofile", "", "write an allocation profile to `file` at the end")
	if err := fs.Parse(args); err != nil {
		return Options{}, err
	}
	if fs.NArg() > 0 {
		return Options{}, fmt.Errorf("%w: unexpected argument %q", errFlags, fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["delayed"] {
		switch {
		case set["waiting"]:
			return Options{}, fmt.Errorf("%w: --delayed is the deprecated name of --waiting: give one of them", errFlags)
		case delayed < 1 || delayed > maxWaiting:
			return Options{}, fmt.Errorf("%w: --delayed %d: want 1 to %d", errFlags, delayed, maxWaiting)
		}
		o.Waiting = delayed
		set["waiting"] = true
	}
	// Counts left unset take the full size, or the --quick one.
	for _, c := range []struct {
		name        string
		p           *int
		full, quick int
	}{
		{"ingest", &o.Ingest, 20000, 1000},
		{"consume", &o.Consume, 50000, 3000},
		{"roundtrips", &o.RoundTrips, 5000, 300},
		{"latency", &o.Latency, 1000, 100},
		{"waiting", &o.Waiting, 1_000_000, 5000},
		{"scheduled", &o.Scheduled, 10000, 500},
		{"streams", &o.Streams, 1500, 300},
		{"history-notifications", &o.HistoryNotifications, 1_000_000, 20000},
		{"dead-letters", &o.DeadLetters, 100_000, 1000},
		{"rounds", &o.Rounds, 2, 1},
	} {
		switch {
		case set[c.name]:
		case o.Quick:
			*c.p = c.quick
		default:
			*c.p = c.full
		}
	}
	qts, err := parseQueueTypes(queues)
	if err != nil {
		return Options{}, err
	}
	o.QueueTypes = qts
	if o.Figures, err = parseFigures(figures); err != nil {
		return Options{}, err
	}
	if backends != "" {
		if o.Backends, err = parseBackends(backends); err != nil {
			return Options{}, err
		}
	}
	if noisyLanes != "" {
		if o.NoisyLanes, err = parseLanes(noisyLanes); err != nil {
			return Options{}, err
		}
	}
	if noisyReceivers != "" {
		if o.NoisyReceivers, err = parseNoisyReceivers(noisyReceivers); err != nil {
			return Options{}, err
		}
	}
	return o, o.Validate()
}

// parseNoisyReceivers reads --noisy-receivers: values of NoisyReceivers,
// each once.
func parseNoisyReceivers(s string) ([]string, error) {
	return parseNames("noisy-receivers", s, NoisyReceivers)
}

// parseNames reads --flag's comma-separated list of values of allowed,
// each once, in the order given.
func parseNames(flag, s string, allowed []string) ([]string, error) {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		v := strings.TrimSpace(part)
		if !slices.Contains(allowed, v) {
			return nil, fmt.Errorf("%w: --%s %q: want a comma-separated list of %s", errFlags, flag, s, strings.Join(allowed, ", "))
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out, nil
}

// parseLanes reads --noisy-lanes: WORK_LANES settings, each once.
func parseLanes(s string) ([]int, error) {
	var out []int
	for part := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 1 || n > retry.MaxLanes {
			return nil, fmt.Errorf("%w: --noisy-lanes %q: want a comma-separated list of WORK_LANES settings, each 1 to %d", errFlags, s, retry.MaxLanes)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

func parseFigures(s string) ([]string, error) { return parseNames("figures", s, AllFigures) }

func parseBackends(s string) ([]retry.Backend, error) {
	var out []retry.Backend
	for part := range strings.SplitSeq(s, ",") {
		b := retry.Backend(strings.TrimSpace(part))
		if !slices.Contains(retry.Backends(), b) {
			return nil, fmt.Errorf("%w: --backends %q: want a comma-separated list of plugin, ttl, levels, native", errFlags, s)
		}
		if !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return out, nil
}

func parseQueueTypes(s string) ([]retry.QueueType, error) {
	var out []retry.QueueType
	for part := range strings.SplitSeq(s, ",") {
		q := retry.QueueType(strings.TrimSpace(part))
		switch q {
		case retry.Classic, retry.Quorum:
		default:
			return nil, fmt.Errorf("%w: --queues %q: want classic, quorum or classic,quorum", errFlags, s)
		}
		if !slices.Contains(out, q) {
			out = append(out, q)
		}
	}
	return out, nil
}

// Validate reports the first option out of range, naming its flag.
func (o Options) Validate() error {
	bad := func(flag string, v any, want string) error {
		return fmt.Errorf("%w: --%s %v: want %s", errFlags, flag, v, want)
	}
	switch {
	case !slices.Contains(Formats, o.Format):
		return bad("format", o.Format, "text, markdown or json")
	case o.Section != "" && !labelPattern.MatchString(o.Section):
		return bad("section", o.Section, "1 to 32 letters, digits, dots, dashes or underscores, such as 4.3")
	case o.Section != "" && o.Format != "markdown":
		return bad("section", o.Section, "--format markdown: a section is part of the markdown page")
	case len(o.QueueTypes) == 0:
		return bad("queues", "", "classic, quorum or classic,quorum")
	case len(o.Figures) == 0:
		return bad("figures", "", strings.Join(AllFigures, ", "))
	case o.Rounds < 1 || o.Rounds > 10:
		return bad("rounds", o.Rounds, "1 to 10")
	case o.Ingest < 1 || o.Ingest > 1_000_000:
		return bad("ingest", o.Ingest, "1 to 1000000")
	case o.Clients < 1 || o.Clients > 1024:
		return bad("clients", o.Clients, "1 to 1024")
	case o.Consume < 1 || o.Consume > 1_000_000:
		return bad("consume", o.Consume, "1 to 1000000")
	case o.Prefetch < 1 || o.Prefetch > 65535:
		return bad("prefetch", o.Prefetch, "1 to 65535")
	case o.Concurrency < 1 || o.Concurrency > 1024:
		return bad("concurrency", o.Concurrency, "1 to 1024")
	case o.RoundTrips < 1 || o.RoundTrips > 1_000_000:
		return bad("roundtrips", o.RoundTrips, "1 to 1000000")
	case o.Latency < 1 || o.Latency > 1_000_000:
		return bad("latency", o.Latency, "1 to 1000000")
	case o.Window < 1 || o.Window > 1024:
		return bad("window", o.Window, "1 to 1024")
	case o.Delay < time.Millisecond || o.Delay > time.Minute:
		return bad("delay", o.Delay, "1ms to 1m")
	case o.Waiting < 1 || o.Waiting > maxWaiting:
		return bad("waiting", o.Waiting, fmt.Sprintf("1 to %d", maxWaiting))
	case o.BatchSize < 1 || o.BatchSize > maxBatch:
		return bad("batch-size", o.BatchSize, fmt.Sprintf("1 to %d (the API's MAX_BATCH)", maxBatch))
	case o.BatchClients < 1 || o.BatchClients > 1024:
		return bad("batch-clients", o.BatchClients, "1 to 1024")
	case o.Scheduled < 1 || o.Scheduled > maxScheduled:
		return bad("scheduled", o.Scheduled, fmt.Sprintf("1 to %d", maxScheduled))
	case o.Streams < 1 || o.Streams > MaxStreams:
		return bad("streams", o.Streams, fmt.Sprintf("1 to %d (the API's default DASHBOARD_MAX_STREAMS)", MaxStreams))
	case o.HistoryNotifications < 1 || o.HistoryNotifications > 10_000_000:
		return bad("history-notifications", o.HistoryNotifications, "1 to 10000000")
	case o.DeadLetters < 2 || o.DeadLetters > maxDeadLetterCopies:
		return bad("dead-letters", o.DeadLetters, fmt.Sprintf("2 to %d", maxDeadLetterCopies))
	case o.Timeout < time.Second || o.Timeout > time.Hour:
		return bad("timeout", o.Timeout, "1s to 1h")
	}
	return nil
}

// has reports whether the figure group was chosen.
func (o Options) has(group string) bool { return slices.Contains(o.Figures, group) }

// waitingTimeout bounds the memory figure of one backend: Timeout, plus
// 500µs per waiting message (a pile-up at 2,000 messages/s at least).
func (o Options) waitingTimeout() time.Duration {
	return o.Timeout + time.Duration(o.Waiting)*500*time.Microsecond
}

// batchNotifications is the number of notifications the ingest-batch
// figure posts per side: Ingest, rounded up to whole batches.
func (o Options) batchNotifications() int {
	if o.BatchSize < 1 {
		return 0
	}
	return (o.Ingest + o.BatchSize - 1) / o.BatchSize * o.BatchSize
}
