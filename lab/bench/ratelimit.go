package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/mail"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-smtp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/events"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/services/retrier"
	"github.com/relay-demo/relay/services/worker"
)

// RateLimitTolerance is how far above its limit, burst aside, a mail
// server may see the emails of any one second.
const RateLimitTolerance = 0.10

// RateLimitOptions sizes a rate-limit measurement; zero fields take the
// defaults below.
type RateLimitOptions struct {
	// Rate and Burst are the mail server's limit, SMTP_RATE and
	// SMTP_BURST (50/s, 1).
	Rate  float64 `json:"rate_per_s"`
	Burst int     `json:"burst"`
	// Replicas is the number of email workers sharing the limit (3).
	Replicas int `json:"replicas"`
	// Emails is how many emails are published, all at once (500).
	Emails int `json:"emails"`
	// Backend is the delay backend an email over the limit waits in
	// (levels); QueueType the queues' type (quorum for native, which
	// runs on nothing else, classic for the rest).
	Backend   retry.Backend   `json:"backend"`
	QueueType retry.QueueType `json:"queue_type"`
	// Delays and Deferrals are the workers' RETRY_DELAYS and
	// RETRY_DEFERRALS (RateLimitDelays, RateLimitDeferrals).
	Delays    string `json:"retry_delays"`
	Deferrals int    `json:"retry_deferrals"`
}

// RateLimitDelays is the workers' RETRY_DELAYS, on every backend: a linear
// schedule, which native needs. A deferral to a slot waits for the slot,
// not for this schedule; the schedule only shapes the topology.
const RateLimitDelays = "200ms,400ms,600ms"

// RateLimitDeferrals is the figure's RETRY_DEFERRALS (the default is
// retry.DefaultDeferrals, 10): 500 emails at 50/s keep the last of them
// waiting for a slot for ten seconds, a deferral or more a second, and
// none may start spending its retries before its slot.
const RateLimitDeferrals = 50

func (o RateLimitOptions) withDefaults() RateLimitOptions {
	if o.Rate <= 0 {
		o.Rate = 50
	}
	if o.Burst <= 0 {
		o.Burst = 1
	}
	if o.Replicas <= 0 {
		o.Replicas = 3
	}
	if o.Emails <= 0 {
		o.Emails = 500
	}
	if o.Delays == "" {
		o.Delays = RateLimitDelays
	}
	if o.Deferrals <= 0 {
		o.Deferrals = RateLimitDeferrals
	}
	if o.Backend == "" {
		o.Backend = retry.Levels
	}
	if o.QueueType == "" {
		o.QueueType = retry.Classic
		if o.Backend == retry.Native {
			o.QueueType = retry.Quorum
		}
	}
	return o
}

// rateLimitBackends are the delay backends the ratelimit figure runs on,
// in retry.Backends' order: those chosen, or each the broker runs (ttl
// and levels on any; native on RabbitMQ 4.3 or later; plugin where the
// delayed-message plugin is enabled). A chosen one the broker does not
// run is an error.
func rateLimitBackends(chosen []retry.Backend, plugin, native bool) ([]retry.Backend, error) {
	runs := map[retry.Backend]bool{retry.TTL: true, retry.Levels: true, retry.Native: native, retry.Plugin: plugin}
	var out []retry.Backend
	for _, b := range retry.Backends() {
		switch {
		case len(chosen) > 0 && !slices.Contains(chosen, b):
		case runs[b]:
			out = append(out, b)
		case len(chosen) > 0:
			return nil, fmt.Errorf("%w: --backends %s: the broker does not run it (native needs RabbitMQ 4.3 or later, plugin the delayed-message plugin)", errFlags, b)
		}
	}
	return out, nil
}

// RateLimitResult is what the mail server saw.
type RateLimitResult struct {
	Options RateLimitOptions `json:"options"`
	// Load is the machine's one-minute load average when the emails were
	// published: the figures fall as it rises.
	Load float64 `json:"load_1m"`
	// Delivered counts the emails that arrived, Duplicates those that
	// arrived more than once.
	Delivered  int `json:"delivered"`
	Duplicates int `json:"duplicates"`
	// Throughput is emails a second, first arrival to last: a figure,
	// which falls on a loaded machine, as copies that come back late for
	// their slots wait again.
	Throughput float64 `json:"throughput_per_s"`
	// Ratio is Throughput over the limit: 1 is the whole limit used.
	Ratio float64 `json:"ratio"`
	// MaxInSecond is the most emails in any second of the clock, the
	// window a provider that allows so many a second counts in;
	// MaxInWindow the most in any one-second window, wherever it starts.
	MaxInSecond int `json:"max_in_second"`
	MaxInWindow int `json:"max_in_window"`
	// Deferrals counts the copies sent to wait for a slot; Missed those
	// whose next attempt started more than store.TicketGrace after
	// their slot, too late to keep it, so they took a new one at the
	// back. SlotP50 and SlotMax are when a deferred copy's next attempt
	// started against its slot (a deferral is due back rateHold before
	// it: negative is early, and waits out the rest in hand). TransitP50
	// and TransitMax are how long after the worker's decision the wait was
	// scheduled: the error stage's hop, which the wait, counted from there,
	// adds to it (none with a direct hand-off). All are read from the
	// copies' events.
	Deferrals  int           `json:"deferrals"`
	Missed     int           `json:"missed"`
	SlotP50    time.Duration `json:"slot_p50_ns"`
	SlotMax    time.Duration `json:"slot_max_ns"`
	TransitP50 time.Duration `json:"transit_p50_ns"`
	TransitMax time.Duration `json:"transit_max_ns"`
	// WithinLimit is what must hold however loaded the machine: every
	// email arrived, once, and no second of the clock saw more than
	// MostInSecond allows. Throughput is no part of it.
	WithinLimit bool `json:"within_limit"`
}

// MostInSecond is the most emails a mail server limited to o.Rate a second
// with a burst of o.Burst may see in one second: the rate, and
// RateLimitTolerance of it for the clocks, and the burst.
func (o RateLimitOptions) MostInSecond() float64 {
	return o.Rate*(1+RateLimitTolerance) + float64(o.Burst)
}

// RateLimit measures the email channel under a limit: Replicas email
// workers (`relay worker email` run in this process, with the retrier),
// sharing SMTP_RATE through a SQLite history store in a temporary
// directory, deliver Emails emails published at once to a local mail
// server, which counts them by the second. An email over the limit waits
// in opts.Backend for its slot. The topology is the one the workers build
// from their environment, so every backend takes the same path.
func (b *bench) RateLimit(ctx context.Context, opts RateLimitOptions) (res RateLimitResult, err error) {
	opts = opts.withDefaults()
	res.Options = opts
	sink, err := startMailSink()
	if err != nil {
		return res, err
	}
	defer sink.close()
	dir, err := os.MkdirTemp("", "relay-bench-ratelimit-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)

	prefix := b.prefix + "ratelimit." + string(opts.Backend) + "."
	env := map[string]string{
		"AMQP_URL": b.url, "TOPOLOGY_PREFIX": prefix, "DELAY_BACKEND": string(opts.Backend), "QUEUE_TYPE": string(opts.QueueType),
		"RETRY_DELAYS": opts.Delays, "RETRY_DEFERRALS": strconv.Itoa(opts.Deferrals), "MANAGEMENT_URL": b.mgmtURL,
		"SMTP_HOST": "127.0.0.1", "SMTP_PORT": strconv.Itoa(sink.port), "SMTP_TLS": "none", "EMAIL_FROM": "bench@relay.localhost",
		"SMTP_RATE": strconv.FormatFloat(opts.Rate, 'f', -1, 64), "SMTP_BURST": strconv.Itoa(opts.Burst), "DATA_DIR": dir,
		"LOG_LEVEL": "error",
	}
	getenv := func(k string) string { return env[k] }
	cfg, err := worker.LoadConfig(getenv)
	if err != nil {
		return res, err
	}
	topo, err := cfg.Topology(channel.Routes())
	if err != nil {
		return res, err
	}
	conn, err := amqp.Dial(b.url)
	if err != nil {
		return res, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close()
	b.janitor.topology(topo)
	b.janitor.exchange(events.ExchangeName(topo))
	if err := topo.Declare(ctx, conn); err != nil {
		return res, err
	}

	g := startGroup(ctx)
	runCtx, run, wg := g.ctx, g.run, &g.wg
	defer func() { err = errors.Join(err, g.stop()) }()
	run(func(ctx context.Context) error { return retrier.Run(ctx, getenv, io.Discard) })
	for range opts.Replicas {
		run(func(ctx context.Context) error { return worker.Run(ctx, "email", getenv, io.Discard) })
	}

	evs, err := events.Subscribe(runCtx, conn, topo)
	if err != nil {
		return res, err
	}
	var seen []notification.Event
	var seenMu sync.Mutex
	wg.Go(func() {
		for ev := range evs {
			seenMu.Lock()
			seen = append(seen, ev)
			seenMu.Unlock()
		}
	})

	res.Load = loadAverage()
	pub, err := retry.NewPublisher(conn, 0)
	if err != nil {
		return res, err
	}
	defer pub.Close()
	for i := range opts.Emails {
		id := fmt.Sprintf("ntf_bench_rate_%d", i)
		note := &notification.Notification{V: 1, ID: id, CreatedAt: time.Now().UTC(), Parts: map[string]json.RawMessage{
			"email": json.RawMessage(`{"to":["ada@example.com"],"subject":"bench","text":"hello"}`)}}
		body, _ := json.Marshal(note.For("email"))
		if err := pub.Publish(ctx, topo.Ingress(), "email", amqp.Publishing{MessageId: id, ContentType: notification.ContentType,
			DeliveryMode: amqp.Persistent, Timestamp: time.Now(), Body: body}); err != nil {
			return res, fmt.Errorf("publish: %w", err)
		}
	}
	// The emails need Emails / Rate seconds; give them twice that and 30 s.
	deadline := time.Now().Add(time.Duration(2*float64(opts.Emails)/opts.Rate*float64(time.Second)) + 30*time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for sink.distinct() < opts.Emails {
		if time.Now().After(deadline) {
			return res, fmt.Errorf("%d of %d emails arrived by the deadline", sink.distinct(), opts.Emails)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
	// The last deliveries' events follow their emails by a moment.
	for wait := time.Now().Add(5 * time.Second); time.Now().Before(wait); {
		seenMu.Lock()
		n := delivered(seen)
		seenMu.Unlock()
		if n >= opts.Emails {
			break
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
	seenMu.Lock()
	res.deferrals(seen)
	seenMu.Unlock()
	arrivals, dups := sink.result()
	res.Delivered, res.Duplicates = len(arrivals)-dups, dups
	if took := arrivals[len(arrivals)-1].Sub(arrivals[0]); took > 0 {
		res.Throughput = float64(len(arrivals)-1) / took.Seconds()
	}
	res.Ratio = res.Throughput / opts.Rate
	res.MaxInWindow = mostInOneSecond(arrivals)
	perSecond := map[int64]int{}
	for _, a := range arrivals {
		perSecond[a.Unix()]++
		res.MaxInSecond = max(res.MaxInSecond, perSecond[a.Unix()])
	}
	res.WithinLimit = res.Delivered == opts.Emails && dups == 0 && float64(res.MaxInSecond) <= opts.MostInSecond()
	return res, nil
}

// rateHold is internal/channel's: a deferred send waits this much less
// than its slot is away, and keeps the slot if back no later than
// store.TicketGrace after it.
const rateHold = 250 * time.Millisecond

// delivered counts the delivered outcomes among evs.
func delivered(evs []notification.Event) int {
	n := 0
	for _, ev := range evs {
		if ev.Outcome == retry.Delivered {
			n++
		}
	}
	return n
}

// deferrals reads, copy by copy, each wait for a slot from the events: the
// worker's failed attempt, the wait scheduled (retrying, with its delay),
// and the next attempt, which started DurationMS before its own outcome.
func (r *RateLimitResult) deferrals(evs []notification.Event) {
	byID := map[string][]notification.Event{}
	for _, ev := range evs {
		byID[ev.ID] = append(byID[ev.ID], ev)
	}
	var back, transit []time.Duration
	for _, copyEvs := range byID {
		slices.SortStableFunc(copyEvs, func(a, b notification.Event) int { return a.At.Compare(b.At) })
		var failed, due time.Time
		for _, ev := range copyEvs {
			switch {
			case ev.Outcome == retry.Failed:
				if !due.IsZero() {
					back = append(back, ev.At.Add(-time.Duration(ev.DurationMS)*time.Millisecond).Sub(due))
				}
				failed, due = ev.At, time.Time{}
			case ev.Outcome == retry.Retrying && !failed.IsZero():
				r.Deferrals++
				transit = append(transit, ev.At.Sub(failed))
				due = failed.Add(time.Duration(ev.DelayMS) * time.Millisecond)
			case ev.Outcome == retry.Delivered && !due.IsZero():
				back = append(back, ev.At.Add(-time.Duration(ev.DurationMS)*time.Millisecond).Sub(due))
				due = time.Time{}
			}
		}
	}
	for i, b := range back {
		back[i] = b - rateHold
		if back[i] > store.TicketGrace {
			r.Missed++
		}
	}
	slices.Sort(back)
	slices.Sort(transit)
	if len(back) > 0 {
		r.SlotP50, r.SlotMax = back[len(back)/2], back[len(back)-1]
	}
	if len(transit) > 0 {
		r.TransitP50, r.TransitMax = transit[len(transit)/2], transit[len(transit)-1]
	}
}

// mostInOneSecond is the most of the sorted times in any one-second
// window.
func mostInOneSecond(at []time.Time) int {
	most, j := 0, 0
	for i := range at {
		for j < len(at) && at[j].Sub(at[i]) < time.Second {
			j++
		}
		most = max(most, j-i)
	}
	return most
}

// RateLimitMarkdown is the rate-limit figure as a markdown table, a row
// per delay backend.
func RateLimitMarkdown(rs []RateLimitResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| backend | queues | limit | replicas | emails | delivered | duplicates | throughput | of the limit | most in a second (any window) | within +%.0f %% and the burst "+
		"| deferrals (late for their slot) | next attempt against its slot, p50 / max | error-stage hop, p50 / max | load (1 min) |\n"+
		"|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n", RateLimitTolerance*100)
	for _, r := range rs {
		verdict := "yes"
		if !r.WithinLimit {
			verdict = "**no**"
		}
		ms := func(d time.Duration) string { return fmt.Sprintf("%+d ms", d.Milliseconds()) }
		fmt.Fprintf(&b, "| %s | %s | %g/s, burst %d | %d | %d | %d | %d | %.1f/s | %.0f %% | %d (%d) | %s | %d (%d) | %s / %s | %d / %d ms | %.1f |\n",
			r.Options.Backend, r.Options.QueueType, r.Options.Rate, r.Options.Burst, r.Options.Replicas, r.Options.Emails, r.Delivered, r.Duplicates,
			r.Throughput, r.Ratio*100, r.MaxInSecond, r.MaxInWindow, verdict, r.Deferrals, r.Missed, ms(r.SlotP50), ms(r.SlotMax),
			r.TransitP50.Milliseconds(), r.TransitMax.Milliseconds(), r.Load)
	}
	return b.String()
}

// mailSink is a local SMTP server that notes when each email arrives.
type mailSink struct {
	srv  *smtp.Server
	port int

	mu       sync.Mutex
	seen     map[string]int
	arrivals []time.Time
}

func startMailSink() (*mailSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &mailSink{seen: map[string]int{}, port: ln.Addr().(*net.TCPAddr).Port}
	s.srv = smtp.NewServer(s)
	s.srv.Domain = "bench.localhost"
	s.srv.AllowInsecureAuth = true
	s.srv.ReadTimeout, s.srv.WriteTimeout = time.Minute, time.Minute
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *mailSink) close() { _ = s.srv.Close() }

func (s *mailSink) distinct() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

// result returns the arrivals in order and how many were of an email
// seen before.
func (s *mailSink) result() ([]time.Time, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := slices.Clone(s.arrivals)
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	dups := 0
	for _, n := range s.seen {
		dups += n - 1
	}
	return at, dups
}

// NewSession starts one connection.
func (s *mailSink) NewSession(*smtp.Conn) (smtp.Session, error) { return sinkSession{s}, nil }

type sinkSession struct{ s *mailSink }

func (sinkSession) Mail(string, *smtp.MailOptions) error { return nil }
func (sinkSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (sinkSession) Reset()                               {}
func (sinkSession) Logout() error                        { return nil }

func (ss sinkSession) Data(r io.Reader) error {
	msg, err := mail.ReadMessage(r)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, msg.Body)
	id := msg.Header.Get("X-Notification-ID")
	if id == "" {
		id = msg.Header.Get("Message-ID")
	}
	s := ss.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[id]++
	s.arrivals = append(s.arrivals, time.Now())
	return nil
}
