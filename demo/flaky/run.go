// Package flaky is relay's pair of deliberately unreliable downstreams: a
// real SMTP server and a real webhook receiver in one process. Each plays a
// scenario (healthy, flaky, outage, rate-limited, slow, permanent, throttled) so the
// retries and backoff of a sender can be watched, and both report what they
// saw on GET /stats and GET /messages.
package flaky

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/relay-demo/relay/internal/config"
	"github.com/relay-demo/relay/webhooks"
)

// shutdownTimeout bounds how long a graceful shutdown waits for open
// requests and connections before closing them.
const shutdownTimeout = 5 * time.Second

// Run reads the configuration from getenv, logs JSON to stdout, and serves
// both downstreams until ctx is done, then shuts them down gracefully.
func Run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	srv, err := Listen(ctx, getenv, stdout)
	if err != nil {
		return err
	}
	return srv.Wait()
}

// Listen is Run up to the wait: it reads the configuration from getenv,
// logs JSON to stdout, listens and serves both downstreams in the
// background until ctx is done. Its Server says which ports it got, which
// the system chooses for an address at port 0, such as 127.0.0.1:0.
func Listen(ctx context.Context, getenv func(string) string, stdout io.Writer) (*Server, error) {
	cfg, err := LoadConfig(getenv)
	if err != nil {
		return nil, err
	}
	logger := config.Logger(stdout, "flaky")
	logger.Info("starting", config.Masked(cfg)...)
	return Start(ctx, cfg, logger)
}

// Server is a running flaky process: the SMTP server and the HTTP receiver.
type Server struct {
	logger  *slog.Logger
	stats   *Stats
	httpLn  net.Listener
	smtpLn  *connTracker
	httpSrv *http.Server
	smtpSrv *smtp.Server
	done    chan struct{}
	err     error
}

// Start listens on cfg's addresses and serves both downstreams in the
// background until ctx is done. cfg is expected to be valid (see
// Config.Validate). The outage window opens when Start is called.
func Start(ctx context.Context, cfg Config, logger *slog.Logger) (*Server, error) {
	start := time.Now()
	var v verifier
	if cfg.WebhookSecret != "" {
		signer, err := webhooks.NewSigner(cfg.WebhookSecret)
		if err != nil {
			return nil, fmt.Errorf("webhook secret: %w", err)
		}
		v = signer
	} else {
		logger.Warn("WEBHOOK_SECRET is empty, webhook signatures are not checked")
	}
	var smsV verifier
	if cfg.SMSSecret != "" {
		signer, err := webhooks.NewSigner(cfg.SMSSecret)
		if err != nil {
			return nil, fmt.Errorf("sms secret: %w", err)
		}
		smsV = signer
	} else {
		logger.Warn("SMS_SECRET is empty, the SMS gateway's signatures are not checked")
	}

	httpLn, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("listen http %s: %w", cfg.HTTPAddr, err)
	}
	ln, err := net.Listen("tcp", cfg.SMTPAddr)
	if err != nil {
		httpLn.Close()
		return nil, fmt.Errorf("listen smtp %s: %w", cfg.SMTPAddr, err)
	}
	smtpLn := &connTracker{Listener: ln, conns: map[*trackedConn]struct{}{}}

	// serveCtx ends slow answers once shutdown begins, whatever started it.
	serveCtx, stopServing := context.WithCancel(ctx)
	stats := NewStats(cfg.EmailScenario, cfg.WebhookScenario)
	mux := http.NewServeMux()
	routes(mux, deps{
		logger:      logger,
		stats:       stats,
		scenario:    cfg.scenario(Webhook, start),
		verifier:    v,
		smsVerifier: smsV,
		now:         time.Now,
		ctx:         serveCtx,
	})
	s := &Server{
		logger: logger,
		stats:  stats,
		httpLn: httpLn,
		smtpLn: smtpLn,
		httpSrv: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       time.Minute,
			BaseContext:       func(net.Listener) context.Context { return serveCtx },
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelError),
		},
		smtpSrv: newSMTPServer(&smtpBackend{
			logger:   logger,
			stats:    stats,
			scenario: cfg.scenario(Email, start),
			now:      time.Now,
			ctx:      serveCtx,
		}),
		done: make(chan struct{}),
	}

	errc := make(chan error, 2)
	go func() {
		err := s.httpSrv.Serve(httpLn)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		} else if err != nil {
			err = fmt.Errorf("serve http %s: %w", s.HTTPAddr(), err)
		}
		errc <- err
	}()
	go func() {
		err := s.smtpSrv.Serve(smtpLn)
		if err != nil {
			err = fmt.Errorf("serve smtp %s: %w", s.SMTPAddr(), err)
		}
		errc <- err
	}()
	go s.supervise(ctx, stopServing, errc)

	logger.Info("listening",
		"http_addr", s.HTTPAddr(), "smtp_addr", s.SMTPAddr(),
		"email_scenario", cfg.EmailScenario, "webhook_scenario", cfg.WebhookScenario)
	return s, nil
}

// supervise waits for ctx to end, or for a server to stop by itself, then
// shuts both down and records why any server stopped unexpectedly.
func (s *Server) supervise(ctx context.Context, stopServing context.CancelFunc, errc <-chan error) {
	defer close(s.done)
	running := 2
	var errs []error
	select {
	case <-ctx.Done():
	case err := <-errc:
		running--
		errs = append(errs, err)
	}
	s.logger.Info("shutting down")
	stopServing()

	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	var wg sync.WaitGroup
	shutdown := func(name string, graceful func(context.Context) error, close func() error) {
		if err := graceful(sctx); err != nil && !errors.Is(err, smtp.ErrServerClosed) {
			close()
			s.logger.Warn("closed connections still open after the shutdown timeout",
				"server", name, "timeout", shutdownTimeout.String(), "error", err)
		}
	}
	wg.Go(func() { shutdown("http", s.httpSrv.Shutdown, s.httpSrv.Close) })
	// The SMTP server waits for idle connections too and cannot be closed
	// once shutdown has begun, so stragglers are cut at the socket.
	wg.Go(func() {
		shutdown("smtp", s.smtpSrv.Shutdown, s.smtpLn.closeConns)
		// The SMTP server closes only the listeners it has begun to serve:
		// one shut down before its Serve ran would accept for ever, and Wait
		// with it. Closed here, its Serve returns at once, the server being
		// done. (http.Server remembers its shutdown and needs no help.)
		s.smtpLn.Close()
	})
	wg.Wait()
	// The SMTP server closes only the listeners its Serve has registered:
	// stopped the moment it started, it may not have yet, and would
	// accept for ever. Its listener is closed here whatever happened.
	s.smtpLn.Close()
	for ; running > 0; running-- {
		errs = append(errs, <-errc)
	}
	s.err = errors.Join(errs...)
	s.logger.Info("stopped")
}

// HTTPAddr is the address the webhook receiver listens on.
func (s *Server) HTTPAddr() string { return s.httpLn.Addr().String() }

// SMTPAddr is the address the SMTP server listens on.
func (s *Server) SMTPAddr() string { return s.smtpLn.Addr().String() }

// Stats is what both downstreams have recorded so far.
func (s *Server) Stats() *Stats { return s.stats }

// Wait blocks until the server has shut down. It returns nil when the
// shutdown was asked for through ctx, and the serving error otherwise.
// Connections still open shutdownTimeout after shutdown began are closed,
// which is logged but not an error.
func (s *Server) Wait() error {
	<-s.done
	return s.err
}

// connTracker is a listener that remembers the connections it accepted, so
// the ones still open when a graceful shutdown runs out of time can be
// closed.
type connTracker struct {
	net.Listener
	mu    sync.Mutex
	conns map[*trackedConn]struct{}
}

// Accept waits for the next connection and remembers it until it closes.
func (l *connTracker) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, l: l}
	l.mu.Lock()
	l.conns[tc] = struct{}{}
	l.mu.Unlock()
	return tc, nil
}

// closeConns closes every connection still open.
func (l *connTracker) closeConns() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.conns {
		c.Conn.Close()
	}
	return nil
}

// trackedConn is a connection accepted by a connTracker.
type trackedConn struct {
	net.Conn
	l *connTracker
}

// Close closes the connection and forgets it.
func (c *trackedConn) Close() error {
	c.l.mu.Lock()
	delete(c.l.conns, c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}
