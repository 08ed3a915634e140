package email

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	netmail "net/mail"
	"strings"
	"sync"
	"time"

	mail "github.com/wneessen/go-mail"
	"github.com/wneessen/go-mail/smtp"
)

// TLSPolicy says how a Sender protects its connection to the SMTP server.
type TLSPolicy string

const (
	// TLSNone talks to the server in clear. It is meant for a relay on
	// localhost or a trusted network, and NewSender refuses it together with
	// a username so that a password never crosses the wire unencrypted.
	TLSNone TLSPolicy = "none"

	// TLSStartTLS connects in clear and upgrades with STARTTLS before
	// anything else is said. A server that does not offer STARTTLS is
	// refused rather than used in clear.
	TLSStartTLS TLSPolicy = "starttls"

	// TLSImplicit speaks TLS from the first byte (SMTPS, usually port 465).
	TLSImplicit TLSPolicy = "tls"
)

// DefaultTimeout bounds one send when Config.Timeout is zero.
const DefaultTimeout = 10 * time.Second

var (
	// ErrInvalidConfig is wrapped by every error NewSender and
	// ParseTLSPolicy return for a bad setting.
	ErrInvalidConfig = errors.New("invalid email config")

	// ErrConnect is wrapped by a failure to open a usable session with the
	// SMTP server: TCP dial, greeting, EHLO, STARTTLS or AUTH.
	ErrConnect = errors.New("connect to smtp server")

	// ErrClosed is returned by Send after Close.
	ErrClosed = errors.New("email sender closed")
)

// ParseTLSPolicy reads a TLS policy as written in configuration: "none",
// "starttls" or "tls", in any case.
func ParseTLSPolicy(s string) (TLSPolicy, error) {
	switch p := TLSPolicy(strings.ToLower(strings.TrimSpace(s))); p {
	case TLSNone, TLSStartTLS, TLSImplicit:
		return p, nil
	}
	return "", fmt.Errorf("%w: tls policy %q: want %q, %q or %q",
		ErrInvalidConfig, s, TLSNone, TLSStartTLS, TLSImplicit)
}

// Config describes the SMTP server a Sender delivers through.
type Config struct {
	// Host is the server's name or IP address, without a port.
	Host string
	// Port is the server's TCP port, 1 to 65535.
	Port int
	// Username turns on AUTH PLAIN when it is not empty; Password goes
	// with it.
	Username, Password string
	// TLS is the transport security; empty means TLSStartTLS.
	TLS TLSPolicy
	// From is the sender address, with or without a display name:
	// "relay@example.com" or "Relay <relay@example.com>" (RFC 5322; a
	// name that is not ASCII is encoded as RFC 2047 asks). The address
	// alone is the envelope sender (MAIL FROM), and its domain is the
	// right-hand side of every Message-ID.
	From string
	// Timeout bounds one Send from start to finish, connecting included;
	// zero means DefaultTimeout.
	Timeout time.Duration
	// InsecureSkipVerify accepts any server certificate. It exists for test
	// servers with self-signed certificates and has no place in production.
	InsecureSkipVerify bool
}

// Sender delivers emails through one SMTP server over a single connection
// that it keeps open between sends and opens again when it is lost.
//
// Sends through one Sender run one after the other, since an SMTP connection
// carries one transaction at a time; a worker that wants several emails in
// flight at once creates several Senders. A Sender is safe for concurrent
// use.
type Sender struct {
	client      *mail.Client
	from        *netmail.Address
	timeout     time.Duration
	implicitTLS bool
	tlsConfig   *tls.Config

	// mu serialises sends and guards the fields below.
	mu     sync.Mutex
	sess   *session // the open connection, nil when there is none
	closed bool
}

// session is one open connection to the server.
type session struct {
	smtp *smtp.Client
	// raw is the TCP connection under smtp (and under TLS, if any). Closing
	// it is the one way to stop an exchange stuck on a silent server.
	raw net.Conn
}

// NewSender checks cfg and prepares a Sender. It does not connect: the first
// Send does, so a server that is down at start-up only delays delivery.
func NewSender(cfg Config) (*Sender, error) {
	if cfg.Host == "" {
		return nil, fmt.Errorf("%w: host is required", ErrInvalidConfig)
	}
	if _, _, err := net.SplitHostPort(cfg.Host); err == nil {
		return nil, fmt.Errorf("%w: host %q must not include a port; set port instead", ErrInvalidConfig, cfg.Host)
	}
	if cfg.Port < 1 || cfg.Port > 65535 {
		return nil, fmt.Errorf("%w: port %d is outside 1-65535", ErrInvalidConfig, cfg.Port)
	}
	from, err := netmail.ParseAddress(cfg.From)
	if err != nil {
		return nil, fmt.Errorf("%w: from %q: %w", ErrInvalidConfig, cfg.From, err)
	}
	policy := TLSStartTLS
	if cfg.TLS != "" {
		if policy, err = ParseTLSPolicy(string(cfg.TLS)); err != nil {
			return nil, err
		}
	}
	if cfg.Username != "" && policy == TLSNone {
		return nil, fmt.Errorf("%w: username is set but tls is %q, which would send the password in clear",
			ErrInvalidConfig, TLSNone)
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("%w: timeout %s is negative", ErrInvalidConfig, cfg.Timeout)
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}

	s := &Sender{
		from:        from,
		timeout:     timeout,
		implicitTLS: policy == TLSImplicit,
		tlsConfig: &tls.Config{
			ServerName:         cfg.Host,
			MinVersion:         tls.VersionTLS12,
			InsecureSkipVerify: cfg.InsecureSkipVerify, //nolint:gosec // opt-in, documented on Config
		},
	}
	opts := []mail.Option{
		mail.WithPort(cfg.Port),
		// The send context is the real limit; go-mail's deadline on the
		// socket is a backstop in case a read outlives it.
		mail.WithTimeout(timeout),
		mail.WithTLSConfig(s.tlsConfig),
		mail.WithDialContextFunc(s.dial),
	}
	switch policy {
	case TLSNone:
		opts = append(opts, mail.WithTLSPolicy(mail.NoTLS))
	case TLSStartTLS:
		opts = append(opts, mail.WithTLSPolicy(mail.TLSMandatory))
	case TLSImplicit:
		// With a dial function of its own go-mail no longer wraps the
		// socket in TLS, so dial does the handshake; WithSSL keeps go-mail
		// from also trying STARTTLS on top.
		opts = append(opts, mail.WithSSL())
	}
	if cfg.Username != "" {
		opts = append(opts,
			mail.WithSMTPAuth(mail.SMTPAuthPlain),
			mail.WithUsername(cfg.Username),
			mail.WithPassword(cfg.Password),
		)
	}
	if s.client, err = mail.NewClient(cfg.Host, opts...); err != nil {
		return nil, fmt.Errorf("new smtp client: %w", err)
	}
	return s, nil
}

// Send delivers m, opening a connection first if none is open. It gives up
// after the configured timeout or when ctx ends, whichever comes first.
//
// A nil error means the server accepted the email for delivery. Any other
// error is already sorted by Classify: marked permanent (IsPermanent) when no
// retry can help, returned as it is otherwise.
func (s *Sender) Send(ctx context.Context, m Message) error {
	msg, err := newMsg(m, s.from, time.Now())
	if err != nil {
		return permanent{fmt.Errorf("send email %s: %w", m.ID, err)}
	}
	if err := s.send(ctx, msg); err != nil {
		return Classify(fmt.Errorf("send email %s: %w", m.ID, err))
	}
	return nil
}

// cutoffKey carries a send's cutoff through go-mail to dial.
type cutoffKey struct{}

func (s *Sender) send(ctx context.Context, msg *mail.Msg) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}

	// The clock starts once the connection is ours, so time spent queued
	// behind another send does not eat into this one.
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := ctx.Err(); err != nil {
		return err
	}

	cut := &cutoff{}
	stop := context.AfterFunc(ctx, cut.fire)
	err := s.deliver(context.WithValue(ctx, cutoffKey{}, cut), cut, msg)
	if !stop() {
		// The context ended while the send ran, so cut may have closed the
		// socket under a session that still looks open.
		s.drop()
	}
	if err != nil {
		if cerr := expired(ctx); cerr != nil {
			// Name the deadline or cancellation, not the closed or timed-out
			// socket it caused.
			err = fmt.Errorf("%w: %w", cerr, err)
		}
	}
	return err
}

// expired is ctx.Err, except that it already reports DeadlineExceeded once
// the deadline has passed but the context's timer has not yet run. The socket
// deadline go-mail sets, never earlier than the context's, can fire in that
// gap.
func expired(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if deadline, ok := ctx.Deadline(); ok && !time.Now().Before(deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

func (s *Sender) deliver(ctx context.Context, cut *cutoff, msg *mail.Msg) error {
	reused := s.sess != nil
	if reused {
		cut.watch(s.sess.raw)
		// go-mail probes the connection with NOOP before it extends the
		// socket deadline, so after an idle spell the probe would run into
		// the deadline the previous send left behind.
		if err := s.sess.smtp.UpdateDeadline(s.timeout); err != nil {
			s.drop()
			reused = false
		}
	}
	if s.sess == nil {
		if err := s.connect(ctx, cut); err != nil {
			return err
		}
	}

	err := s.client.SendWithSMTPClient(s.sess.smtp, msg)
	if err != nil && reused && connLost(err) && expired(ctx) == nil {
		// Servers close idle connections. go-mail found this one dead
		// before MAIL FROM, so the email never left and a single attempt
		// on a fresh connection cannot deliver it twice.
		s.drop()
		if err := s.connect(ctx, cut); err != nil {
			return err
		}
		err = s.client.SendWithSMTPClient(s.sess.smtp, msg)
	}
	if err != nil {
		s.settle(err)
	}
	return err
}

// connect opens a session and makes it the current one.
func (s *Sender) connect(ctx context.Context, cut *cutoff) error {
	c, err := s.client.DialToSMTPClientWithContext(ctx)
	raw := cut.current()
	if err != nil {
		// go-mail leaves the socket open when a step after the TCP dial
		// (greeting, EHLO, STARTTLS, AUTH) fails.
		if raw != nil {
			_ = raw.Close()
		}
		return fmt.Errorf("%w: %w", ErrConnect, err)
	}
	s.sess = &session{smtp: c, raw: raw}
	return nil
}

// dial is go-mail's dial function. It hands the TCP connection to the send's
// cutoff before anything is said on it, so a server that accepts but never
// greets is cut off too.
func (s *Sender) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	raw, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if cut, ok := ctx.Value(cutoffKey{}).(*cutoff); ok {
		cut.watch(raw)
	}
	if !s.implicitTLS {
		return raw, nil
	}
	conn := tls.Client(raw, s.tlsConfig)
	if err := conn.HandshakeContext(ctx); err != nil {
		_ = raw.Close()
		return nil, err
	}
	return conn, nil
}

// settle decides whether the connection outlives a failed send. A server that
// answered with a reply code is still talking, so an RSET clears whatever
// half-finished transaction is left and the connection stays. Anything else,
// and 421 (the server announcing that it is closing), ends it.
func (s *Sender) settle(err error) {
	if s.sess == nil {
		return
	}
	if code := replyCode(err); code < 400 || code == 421 {
		s.drop()
		return
	}
	if err := s.sess.smtp.Reset(); err != nil {
		s.drop()
	}
}

// drop abandons the current session without a QUIT: it is called when the
// connection is broken or in an unknown state.
func (s *Sender) drop() {
	if s.sess == nil {
		return
	}
	_ = s.sess.raw.Close()
	s.sess = nil
}

// connLost reports whether go-mail found the connection dead before it began
// the transaction.
func connLost(err error) bool {
	var se *mail.SendError
	return errors.As(err, &se) && se.Reason == mail.ErrConnCheck
}

// Close says QUIT on the open connection, if any, and closes it. It waits for
// a send in progress to finish. Later sends fail with ErrClosed. The
// connection is released even when Close returns an error.
func (s *Sender) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	sess := s.sess
	s.sess = nil
	if sess == nil {
		return nil
	}
	defer sess.raw.Close()
	// The deadline keeps a silent server from holding up shutdown.
	if err := sess.smtp.UpdateDeadline(s.timeout); err != nil {
		return fmt.Errorf("close smtp connection: %w", err)
	}
	if err := sess.smtp.Quit(); err != nil {
		return fmt.Errorf("close smtp connection: %w", err)
	}
	return nil
}

// cutoff closes the connection a send is using once the send's context ends.
// After the dial go-mail takes no context, and it holds its own lock while it
// waits for a reply, so closing the socket is the only way to stop it.
type cutoff struct {
	mu    sync.Mutex
	conn  net.Conn
	fired bool
}

// watch puts conn under the cutoff, closing it at once if the cutoff has
// already fired.
func (c *cutoff) watch(conn net.Conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.conn = conn
	if c.fired {
		_ = conn.Close()
	}
}

func (c *cutoff) fire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fired = true
	if c.conn != nil {
		_ = c.conn.Close()
	}
}

func (c *cutoff) current() net.Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn
}
