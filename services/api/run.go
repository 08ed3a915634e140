// Package api is relay's HTTP ingest API (`relay api`). It takes a
// notification on POST /v1/notifications, publishes one copy per channel
// (per recipient for email) to the ingress exchange, and answers 202 only
// once the broker has confirmed every copy: a 202 means the broker holds the notification.
package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/config"
	"github.com/relay-demo/relay/internal/dashboard"
	"github.com/relay-demo/relay/internal/events"
	"github.com/relay-demo/relay/internal/runner"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/internal/tracing"
	"github.com/relay-demo/relay/retry"
)

// errNotConnected is why the API is not ready before the broker is there.
var errNotConnected = errors.New("not connected to the broker")

// Run reads the configuration from getenv, logs JSON to stdout and serves
// the API of relay's own channels (channel.Builtin) until ctx is done,
// then shuts it down gracefully.
func Run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	return RunWith(ctx, channel.Builtin(), getenv, stdout)
}

// RunWith is Run for the channels of channels: a program that embeds
// relay with channels of its own, or a test.
func RunWith(ctx context.Context, channels channel.Set, getenv func(string) string, stdout io.Writer) error {
	cfg, err := LoadConfig(getenv)
	if err != nil {
		return err
	}
	ecfg, err := LoadEndpointsConfig(getenv)
	if err != nil {
		return err
	}
	log := config.Logger(stdout, "api")
	log.Info("starting", append(config.Masked(cfg), config.Masked(ecfg)...)...)
	srv, err := StartWith(ctx, channels, cfg, ecfg, log)
	if err != nil {
		return err
	}
	return srv.Wait()
}

// Server is a running API: its HTTP server and its broker connection.
type Server struct {
	log *slog.Logger
	// closeStore closes the history store, unless relay all shares it.
	closeStore func() error
	bg         sync.WaitGroup // the history's feed and pruner
	ln         net.Listener
	http       *http.Server
	hub        *dashboard.Hub
	done       chan struct{}
	trace      *tracing.Tracing
	err        error
}

// Start resolves the topology, listens on cfg.HTTPAddr and serves the API
// in the background until ctx is done. It connects to the broker in the
// background too, and keeps reconnecting: until it is connected, /readyz
// and POST /v1/notifications answer 503. cfg and ecfg, the endpoint
// routes' configuration, are expected to be valid (see Config.Validate and
// LoadEndpointsConfig). It serves relay's own channels (channel.Builtin).
func Start(ctx context.Context, cfg Config, ecfg EndpointsConfig, log *slog.Logger) (*Server, error) {
	return StartWith(ctx, channel.Builtin(), cfg, ecfg, log)
}

// StartWith is Start for the channels of channels: the API accepts and
// publishes their parts and its topology holds their work queues.
func StartWith(ctx context.Context, channels channel.Set, cfg Config, ecfg EndpointsConfig, log *slog.Logger) (*Server, error) {
	rules, err := NewEndpointRules(ecfg)
	if err != nil {
		return nil, err
	}
	topo, err := cfg.Topology(channels.Routes())
	if err != nil {
		return nil, err
	}
	// The dashboard's queue list and the dead letters depend on the delay
	// backend: DELAY_BACKEND=auto waits here for a broker to answer.
	if topo, err = retry.Resolve(ctx, topo, cfg.URLs(), log); err != nil {
		return nil, err
	}
	if topo.Backend == retry.Auto {
		return nil, ctx.Err()
	}
	if cfg.AuthOff() {
		log.Warn("API_AUTH=off: the API is open, anyone who reaches it can send notifications")
	}
	if cfg.RateLimit == 0 && cfg.RateBurst > 0 {
		log.Warn("API_RATE_BURST has no effect while API_RATE_LIMIT is 0: the API is not rate limited")
	}
	if cfg.TenantRateLimit == 0 && cfg.TenantRateBurst > 0 {
		log.Warn("API_TENANT_RATE_BURST has no effect while API_TENANT_RATE_LIMIT is 0: no tenant is rate limited")
	}
	if cfg.DashboardPublic {
		log.Warn("DASHBOARD_PUBLIC=true: anyone who reaches the dashboard sees notification ids, recipients and statuses; error texts, payloads and replay still need a token")
	}
	mgmt, err := cfg.Management()
	if err != nil {
		return nil, err
	}
	// The process's one history store, opened now: the API answers from
	// it. The API writes the endpoints: it alone seals again what a
	// fallback key opens.
	lazy, closeStore := runner.Store(ctx, cfg.Store, store.WithReseal())
	st, err := lazy.Open(ctx)
	if err != nil {
		if errors.Is(err, store.ErrNoTempDir) {
			return nil, fmt.Errorf("configuration: the history store (SQLite): %w", err)
		}
		if cfg.HistoryDSN != "" {
			return nil, fmt.Errorf("configuration: HISTORY_DSN: %w", err)
		}
		return nil, fmt.Errorf("configuration: DATA_DIR=%q: %w", cfg.DataDir, err)
	}
	log.Info("history store open", "backend", st.Backend(), "retention", cfg.HistoryRetention.String(), "sealed", st.Sealed())
	if n := st.Resealed(); n > 0 {
		log.Info("sealed endpoints' secrets again with HISTORY_SEAL_KEY, which a key of HISTORY_SEAL_KEY_FALLBACKS had sealed; the fallbacks can go once every API and webhook worker runs with this HISTORY_SEAL_KEY", "endpoints", n)
	}
	if !st.Sealed() {
		log.Warn("HISTORY_SEAL_KEY is not set: the endpoints' signing secrets are stored in the history in plaintext")
	}
	if files := st.Exposed(); len(files) > 0 {
		log.Warn("the history's files are open to other users: they hold payloads, recipients and secrets; chmod 600 them", "files", files)
	}
	// Spans go to OTLP when the OTEL_* variables say so.
	tr, err := tracing.Start(ctx, "relay-api", log)
	if err != nil {
		closeStore()
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		_ = tr.Shutdown(ctx)
		closeStore()
		return nil, fmt.Errorf("listen %s: %w", cfg.HTTPAddr, err)
	}
	// The API's own events: a replay from the dashboard or the API.
	emitter := events.NewEmitter(topo, "api", log)

	// The notifications' publisher, on a connection of its own that it
	// keeps. The history queue exists before the first accepted record is
	// published, so none is unroutable. A few channels, so that one large
	// batch's publishes do not hold up every other request's confirm
	// behind them.
	producer := retry.NewProducer(retry.ProducerConfig{Topology: topo, URLs: cfg.URLs(), Name: "relay api",
		Channels: publishChannels, Window: publishWindow, Logger: log,
		Declare: func(ctx context.Context, conn *amqp.Connection) error {
			ch, err := conn.Channel()
			if err != nil {
				return fmt.Errorf("open channel: %w", err)
			}
			defer ch.Close()
			return events.DeclareHistory(ch, topo, retry.BrokerVersion(conn))
		}})
	// The dashboard follows the events exchange and reads queue depths
	// over the connection of the moment.
	var live atomic.Pointer[amqp.Connection]
	hub := dashboard.NewHub()
	pipe := dashboard.NewPipeline(topo)
	links := dashboard.NewLinks(dashboard.DefaultLinkTTL, nil)
	dash := dashboard.New(dashboard.Deps{
		Links:    links,
		Hub:      hub,
		Pipeline: pipe,
		Log:      log,
		Queues: func(ctx context.Context) (map[string]int, error) {
			conn := live.Load()
			if conn == nil || conn.IsClosed() {
				return nil, errNotConnected
			}
			return dashboard.QueueDepths(conn, topo)(ctx)
		},
		Authenticate:        dashboardAccess(cfg.deps().credentials(), cfg.AuthOff()),
		Public:              cfg.DashboardPublic,
		MaxStreams:          cfg.DashboardMaxStreams,
		MaxStreamsPerClient: cfg.DashboardMaxStreamsPerClient,
	})
	// The history's feed; /readyz reports it when it is stuck. The
	// management API moves aside a message too large for the AMQP frame.
	feed := &events.Feed{Topology: topo, Sink: st, Log: log, Management: mgmt}
	// Inside relay all, the registry is shared: /metrics shows every
	// service's metrics.
	reg := runner.TelemetryFrom(ctx).Registry
	// Bulk replays and purges run as jobs in the history store; this
	// process takes over those whose process stopped.
	jobs := &DeadLetterJobs{Store: st, Topology: topo, Log: log, Owner: "api " + NewID(),
		Dial: dialedDeadLetters{urls: cfg.URLs(), topo: topo, observe: emitter.Observe}.open}
	handler := NewServer(Deps{
		Log: log,
		Publisher: func() Publisher {
			if producer.Connected() != nil {
				return nil
			}
			return producer
		},
		Topology:       topo,
		Channels:       channels,
		Tokens:         cfg.Tokens,
		TenantTokens:   cfg.TenantTokens,
		OperatorTokens: cfg.OperatorTokens,
		AuthOff:        cfg.AuthOff(),
		MaxBody:        cfg.MaxBodyBytes,
		Registry:       reg,
		Dashboard:      dash,
		DashboardLinks: links,
		// Each dead-letter operation dials a connection of its own: a
		// parked message the client cannot read (headers over frame_max)
		// closes that connection, not the one the API publishes on.
		DeadLetters: func() DeadLetterStore {
			return dialedDeadLetters{urls: cfg.URLs(), topo: topo, observe: emitter.Observe}
		},
		DeadLetterJobs:   jobs,
		History:          st,
		Endpoints:        st,
		Operate:          emitter.Operate,
		EndpointRules:    rules,
		DashboardPublic:  cfg.DashboardPublic,
		IdempotencyTTL:   cfg.IdempotencyTTL,
		MaxBatch:         cfg.MaxBatch,
		RateLimit:        cfg.RateLimit,
		RateBurst:        cfg.RateBurst,
		TenantRateLimit:  cfg.TenantRateLimit,
		TenantRateBurst:  cfg.TenantRateBurst,
		AuthFailureRate:  cfg.AuthFailureRate,
		AuthFailureBurst: cfg.AuthFailureBurst,
		TracerProvider:   tr.Provider(),
		Ready: func() error {
			if err := producer.Connected(); err != nil {
				return err
			}
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			if err := st.Ping(pctx); err != nil {
				return fmt.Errorf("the history store does not answer: %w", err)
			}
			return feed.Stuck()
		},
	})
	s := &Server{
		trace:      tr,
		closeStore: closeStore,
		hub:        hub,
		log:        log,
		ln:         ln,
		http:       httpServer(handler, log),
		done:       make(chan struct{}),
	}

	served := make(chan error, 1)
	go func() {
		err := s.http.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		} else if err != nil {
			err = fmt.Errorf("serve http %s: %w", s.Addr(), err)
		}
		served <- err
	}()
	// The broker connection outlives the HTTP server on shutdown, so the
	// requests still in flight can have their publishes confirmed.
	brokerCtx, stopBroker := context.WithCancel(context.WithoutCancel(ctx))
	brokered := make(chan error, 1)
	go func() {
		brokered <- producer.Run(brokerCtx)
	}()
	// The dashboard's event stream and queue depths have a connection of
	// their own: whatever arrives on the events exchange cannot take the
	// publishing connection down with it.
	go func() {
		_ = retry.SuperviseAny(brokerCtx, cfg.URLs(), "relay api events", log, func(ctx context.Context, conn *amqp.Connection) error {
			live.Store(conn)
			return runner.WithEvents(ctx, conn, emitter, func(ctx context.Context, conn *amqp.Connection) error {
				in, err := events.Subscribe(ctx, conn, topo)
				if err != nil {
					return err
				}
				hub.Run(ctx, pipe.Follow(ctx, in))
				if ctx.Err() != nil {
					return nil
				}
				return retry.ErrConnectionLost
			})
		})
	}()
	// The history: fed from its durable queue on a connection of its own,
	// pruned of what is older than HISTORY_RETENTION.
	s.bg.Go(func() {
		_ = retry.SuperviseAny(brokerCtx, cfg.URLs(), "relay api history", log, feed.Run)
	})
	s.bg.Go(func() { st.RunPruner(brokerCtx, time.Hour, cfg.HistoryRetention, time.Now, log) })
	s.bg.Go(func() { jobs.Run(brokerCtx) })
	go s.supervise(ctx, cfg.ShutdownTimeout, stopBroker, served, brokered)

	log.Info("listening", "addr", s.Addr(), "exchange", topo.Ingress(), "auth", cfg.Auth)
	return s, nil
}

// publishChannels is how many confirm-mode channels the API publishes on.
const publishChannels = 4

// publishWindow is how many messages the API has in flight, unconfirmed,
// at most, shared in turn among the requests publishing: a request's
// publish waits behind at most that many of another's (see
// retry.ProducerConfig.Window).
const publishWindow = 256

// supervise waits for ctx to end, or for the HTTP server or the broker
// supervisor to stop by themselves, then shuts the HTTP server down
// gracefully and, after it, the broker connection.
func (s *Server) supervise(ctx context.Context, timeout time.Duration, stopBroker context.CancelFunc, served, brokered <-chan error) {
	defer close(s.done)
	serving, brokering := true, true
	var errs []error
	select {
	case <-ctx.Done():
	case err := <-served:
		serving = false
		errs = append(errs, err)
	case err := <-brokered:
		brokering = false
		if err != nil {
			s.log.Error("giving up on the broker", "error", err.Error())
			errs = append(errs, err)
		}
	}
	s.log.Info("shutting down", "timeout", timeout.String())
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	// Event streams never end by themselves: close them so Shutdown does
	// not wait for dashboards left open.
	s.hub.Close()
	if err := s.http.Shutdown(sctx); err != nil {
		s.http.Close()
		s.log.Warn("closed requests still open after the shutdown timeout", "timeout", timeout.String(), "error", err.Error())
	}
	if serving {
		errs = append(errs, <-served)
	}
	stopBroker()
	if brokering {
		errs = append(errs, <-brokered)
	}
	s.bg.Wait() // the history's feed and pruner are done with the store
	if err := s.trace.Shutdown(ctx); err != nil {
		s.log.Warn("spans not exported", "error", err.Error())
	}
	if err := s.closeStore(); err != nil {
		errs = append(errs, fmt.Errorf("close the history store: %w", err))
	}
	s.err = errors.Join(errs...)
	s.log.Info("stopped")
}

// Addr is the address the API listens on, with the port the system chose
// for an address such as 127.0.0.1:0.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Wait blocks until the server has shut down. It returns nil when the
// shutdown was asked for through ctx, and otherwise why it stopped.
func (s *Server) Wait() error {
	<-s.done
	return s.err
}

// MaxHeaderBytes bounds a request's header section (net/http allows 4 KiB
// over it): a bearer token, a traceparent and an Idempotency-Key fit many
// times over, and a client cannot make the API hold a megabyte a request
// before it has even authenticated.
const MaxHeaderBytes = 64 << 10

// httpServer is the API's HTTP server around handler, with its limits.
func httpServer(handler http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      DefaultPublishTimeout + 20*time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}
