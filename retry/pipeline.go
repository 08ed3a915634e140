package retry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"golang.org/x/sync/errgroup"
)

// Config configures a Pipeline. Its zero value is a working pipeline:
// relay's default names, classic queues, DefaultDelays, the delay backend
// the broker supports (Auto), and the consumers' and stages' defaults.
type Config struct {
	// Topology is what the pipeline declares and how failures wait: the
	// prefix, the ingress exchange, the queue type, the delay backend
	// (empty means Auto), the hand-off and the Policy, the only place the
	// schedule lives. Its Routes are work queues the pipeline declares and
	// does not consume; Handle consumes one, Route adds one.
	Topology
	// Options shape the consumer of each handled queue (Concurrency and
	// Prefetch) and, with the stages, are shared by every consumer:
	// ShutdownTimeout, Logger, Observe and Management (nil means the one
	// ManagementFor derives from the first broker URL).
	Options
	// StageConcurrency and StagePrefetch are the stages' Concurrency and
	// Prefetch; zero means 32 and 64.
	StageConcurrency, StagePrefetch int
	// NoManagement, with Management nil, means no management API at all
	// rather than the one ManagementFor derives.
	NoManagement bool
	// Name names the pipeline's connections in the management UI; empty
	// means "relay".
	Name string
}

// Middleware wraps a Handler: retries, rate limits, tracing and the like
// go around the one Handler type, the way net/http middleware does.
type Middleware func(Handler) Handler

// Pipeline runs a retrying service: it declares the topology, consumes the
// queues it handles, runs the error and requeue stages if asked to, keeps
// reconnecting while the broker goes and comes back, and stops gracefully.
//
//	p := retry.New(retry.Config{Topology: retry.Topology{Policy: retry.Policy{Delays: ...}}})
//	p.Handle("invoices", "invoice.created", handler)
//	p.ServeStages()
//	err := p.Run(ctx, "amqp://guest:guest@localhost:5672/")
//
// Each handled queue, and each stage, runs on a connection of its own, so
// a message that closes its connection (one too large for the frame) stalls
// nothing else. Several processes may run one pipeline: every queue is a
// set of competing consumers. Producer gives a publisher to the pipeline's
// ingress, so a service sends with the value it consumes with.
type Pipeline struct {
	cfg      Config
	mu       sync.Mutex
	routes   []Route
	handlers map[string]Handler
	mw       []Middleware
	stages   bool
	// elsewhere: another process serves the stages (StagesElsewhere).
	elsewhere bool
	// unlogged: Config gave no Logger, so a warning would go nowhere.
	unlogged bool
	running  bool
}

// New returns a Pipeline for cfg. Nothing touches the broker before Run.
func New(cfg Config) *Pipeline {
	unlogged := cfg.Logger == nil
	if unlogged {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Backend == "" {
		cfg.Backend = Auto
	}
	if cfg.Name == "" {
		cfg.Name = "relay"
	}
	routes := cfg.Routes
	cfg.Routes = nil
	return &Pipeline{cfg: cfg, routes: append([]Route(nil), routes...), handlers: map[string]Handler{}, unlogged: unlogged}
}

// addRoute adds a work queue, or rebinds one listed already (in
// Config.Routes, say) with key. The caller holds p.mu.
func (p *Pipeline) addRoute(queue, key string) {
	for i, r := range p.routes {
		if r.Queue == queue {
			p.routes[i].Key = key
			return
		}
	}
	p.routes = append(p.routes, Route{Queue: queue, Key: key})
}

// Handle adds a work queue, bound to the ingress exchange with key, and
// consumes it with h. The queue is named without the prefix; one that
// Config.Routes lists already is bound with key and consumed.
func (p *Pipeline) Handle(queue, key string, h Handler) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.addRoute(queue, key)
	p.handlers[queue] = h
}

// Route adds a work queue that this process does not consume: a retrier, or
// an API that only publishes, declares every queue the pipeline has.
func (p *Pipeline) Route(queue, key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.addRoute(queue, key)
}

// Use wraps every handler in mw, the first outermost.
func (p *Pipeline) Use(mw ...Middleware) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mw = append(p.mw, mw...)
}

// ServeStages makes Run run the error and requeue stages too. Run them in
// at least one process of a deployment (relay's retrier, or every worker):
// with the ViaStages hand-off, a failure waits in error-queue until a stage
// takes it. A process that handles queues and leaves the stages to another
// says so with StagesElsewhere; see Run for what happens if it says
// neither.
func (p *Pipeline) ServeStages() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stages = true
}

// StagesElsewhere says that another process of the deployment runs the
// stages (relay's workers leave them to the retrier), so Run neither warns
// nor fails for want of them here.
func (p *Pipeline) StagesElsewhere() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.elsewhere = true
}

// Topology is the topology the pipeline declares, with the backend as
// configured (Run resolves Auto against the broker).
func (p *Pipeline) Topology() Topology {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.cfg.Topology
	t.Routes = append([]Route(nil), p.routes...)
	return t
}

// ErrNothingToRun is Run's error for a pipeline with no handler and no
// stages.
var ErrNothingToRun = errors.New("the pipeline handles no queue and runs no stages")

// ErrNoStages is Run's error for a pipeline without a Logger whose
// failures go through the stages and that neither serves them
// (ServeStages) nor says another process does (StagesElsewhere).
var ErrNoStages = errors.New("failures wait in error-queue for the error and requeue stages, and this pipeline neither runs them (ServeStages) nor says another process does (StagesElsewhere)")

// Run runs the pipeline against the broker at urls (one per node of a
// cluster) until ctx is done, then lets the work in hand finish and
// returns nil. It returns early only on an error another attempt cannot
// fix: a topology that conflicts with what the broker has, refused
// credentials, a configuration that cannot work.
//
// With the ViaStages hand-off (and a backend other than Native), every
// failure waits in error-queue for the stages. Forgetting ServeStages in a
// deployment where no other process runs them would leave every failure
// there, unretried and unparked, without a word; so a pipeline that handles
// queues and has called neither ServeStages nor StagesElsewhere is warned
// about through its Logger when Run starts, and, having no Logger to warn
// through, Run returns ErrNoStages. The stages are not run by default:
// where they run is a deployment's choice (one retrier, or every worker),
// and a second set of consumers in every process is not a silent default.
func (p *Pipeline) Run(ctx context.Context, urls ...string) error {
	p.mu.Lock()
	if p.running {
		p.mu.Unlock()
		return errors.New("the pipeline is already running")
	}
	p.running = true
	handlers := make(map[string]Handler, len(p.handlers))
	for q, h := range p.handlers {
		for i := len(p.mw) - 1; i >= 0; i-- {
			h = p.mw[i](h)
		}
		handlers[q] = h
	}
	stages, elsewhere := p.stages, p.elsewhere
	p.mu.Unlock()
	if len(handlers) == 0 && !stages {
		return ErrNothingToRun
	}
	if len(urls) == 0 {
		return ErrNoBroker
	}
	topo, err := Resolve(ctx, p.Topology(), urls, p.cfg.Logger)
	if err != nil {
		return err
	}
	// Said before anything connects, and whatever ctx says: Auto resolved
	// to Native needs no stages, so only an unresolved Auto is left out.
	if len(handlers) > 0 && !stages && !elsewhere && topo.Backend != Auto && topo.requeues() {
		if p.unlogged {
			return ErrNoStages
		}
		p.cfg.Logger.Warn("this process does not run the retry stages and was not told another does: failures wait in error-queue until one does",
			"error", ErrNoStages.Error(), "queue", topo.Name(ErrorQueue), "fix", "call ServeStages in this process, or StagesElsewhere where another runs them")
	}
	if ctx.Err() != nil {
		return nil
	}
	if err := topo.Validate(); err != nil {
		return err
	}
	mgmt := p.cfg.Management
	if mgmt == nil && !p.cfg.NoManagement {
		var err error
		if mgmt, err = ManagementFor(urls[0]); errors.Is(err, ErrManagementUnknown) {
			p.cfg.Logger.Warn("the pipeline does without the management API: no watch for dead letters a quorum queue holds, no moving aside of messages too large for an AMQP frame",
				"error", err.Error(), "fix", "set Options.Management to the broker's management API, or NoManagement")
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	// The management API relay derives from the AMQP URL may be another
	// broker's (port 15672 of a host with several): checked once a
	// connection says which cluster relay is in, and said once.
	var check sync.Once
	var otherCluster func()
	if mgmt != nil {
		otherCluster = sync.OnceFunc(func() {
			err := mgmt.Check(gctx, nil)
			p.cfg.Logger.Error("relay does without the management API: no watch for dead letters a quorum queue holds, no moving aside of messages too large for an AMQP frame",
				"error", err.Error(), "fix", "set MANAGEMENT_URL to the management API of the cluster relay connects to, or to off")
		})
	}
	checkManagement := func(conn *amqp.Connection) {
		if mgmt == nil {
			return
		}
		check.Do(func() {
			g.Go(func() error {
				if err := mgmt.Check(gctx, conn); errors.Is(err, ErrOtherCluster) {
					otherCluster()
				}
				return nil
			})
		})
	}
	var lanes sync.Once
	supervise := func(name, queue string, run func(context.Context, *amqp.Connection) error) {
		g.Go(func() error {
			return SuperviseAny(gctx, urls, p.cfg.Name+" "+name, p.cfg.Logger, func(ctx context.Context, conn *amqp.Connection) error {
				if err := topo.Declare(ctx, conn); err != nil {
					return err
				}
				checkManagement(conn)
				lanes.Do(func() { topo.warnStrayLanes(conn, p.cfg.Logger) })
				p.cfg.Logger.Info("consuming", "queue", queue, "delay_backend", string(topo.Backend))
				return run(ctx, conn)
			})
		})
	}
	for _, r := range topo.WorkRoutes() {
		// Every lane of a route is consumed on its own, with the route's
		// handler and options: a lane's backlog holds up no other lane.
		route, _ := topo.RouteOf(r.Queue)
		h, ok := handlers[route.Queue]
		if !ok {
			continue
		}
		opts := p.cfg.Options
		opts.Management = mgmt
		c := &Consumer{Topology: topo, Queue: r.Queue, Handler: h, Options: opts}
		supervise(r.Queue, r.Queue, c.Run)
	}
	if stages {
		opts := p.cfg.Options
		opts.Concurrency, opts.Prefetch, opts.Management = p.cfg.StageConcurrency, p.cfg.StagePrefetch, mgmt
		s := &Stages{Topology: topo, Options: opts}
		supervise("error stage", topo.Name(ErrorQueue), s.RunErrorStage)
		if topo.requeues() {
			supervise("requeue stage", topo.Name(RequeueQueue), s.RunRequeueStage)
		}
		// The stages watch for dead letters a quorum queue holds and
		// does not forward (see heldWatch): a broker fault only an
		// operator can mend.
		if qs := topo.deadLettering(); len(qs) > 0 && mgmt != nil {
			w := &heldWatch{queues: qs, counts: mgmt.Counts, after: HeldAfter, log: p.cfg.Logger, otherCluster: otherCluster}
			g.Go(func() error { w.run(gctx); return nil })
		}
	}
	return g.Wait()
}

// Resolve returns t with Auto replaced by the backend Choose picks on the
// first of urls that answers, logging the choice and why. While no node
// answers it waits (with Backoff) and tries again, until ctx is done, when
// it returns t unresolved and no error. Errors another attempt cannot fix,
// such as refused credentials, end it. Native is checked against the
// broker's version (ErrBrokerTooOld before 4.3), Plugin against the
// broker's exchange types (ErrNoPlugin without the plugin); any other
// backend is returned as it is.
func Resolve(ctx context.Context, t Topology, urls []string, log *slog.Logger) (Topology, error) {
	if t.Backend != Auto && t.Backend != Native && t.Backend != Plugin {
		return t, nil
	}
	if len(urls) == 0 {
		return t, ErrNoBroker
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for attempt := 1; ; attempt++ {
		var errs []error
		for _, u := range urls {
			b, why, err := Choose(u, t)
			if err == nil {
				t.Backend = b
				log.Info("delay backend chosen", "delay_backend", string(b), "why", why)
				return t, nil
			}
			if isFatal(err) {
				return t, fmt.Errorf("choose the delay backend: %w", err)
			}
			errs = append(errs, err)
		}
		wait := Backoff(attempt)
		log.Warn("no broker answers; the delay backend is chosen once one does", "error", errors.Join(errs...), "wait_ms", wait.Milliseconds())
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return t, nil
		case <-timer.C:
		}
	}
}
