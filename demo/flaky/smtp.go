package flaky

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/mail"
	"strings"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// SMTP limits of the fake mail server.
const (
	maxMessageBytes = 10 << 20
	maxRecipients   = 100
)

// smtpBackend is the mail server's state shared by every session.
type smtpBackend struct {
	logger   *slog.Logger
	stats    *Stats
	scenario Scenario
	now      func() time.Time
	// ctx is done when the server shuts down; it cuts slow answers short.
	ctx context.Context
}

func newSMTPServer(b *smtpBackend) *smtp.Server {
	s := smtp.NewServer(b)
	s.Domain = "flaky.localhost"
	s.AllowInsecureAuth = true
	s.MaxMessageBytes = maxMessageBytes
	s.MaxRecipients = maxRecipients
	s.ReadTimeout = 5 * time.Minute
	s.WriteTimeout = time.Minute
	s.ErrorLog = slog.NewLogLogger(b.logger.With("channel", Email).Handler(), slog.LevelError)
	return s
}

// NewSession starts the state of one SMTP connection.
func (b *smtpBackend) NewSession(c *smtp.Conn) (smtp.Session, error) {
	return &smtpSession{b: b}, nil
}

// smtpSession is one SMTP connection. It accepts any authentication, or
// none.
type smtpSession struct {
	b    *smtpBackend
	from string
	to   []string
}

// AuthMechanisms lists the mechanisms offered; any credentials pass.
func (s *smtpSession) AuthMechanisms() []string {
	return []string{sasl.Plain, sasl.Login}
}

// Auth accepts whatever credentials the client offers.
func (s *smtpSession) Auth(mech string) (sasl.Server, error) {
	switch mech {
	case sasl.Plain:
		return sasl.NewPlainServer(func(identity, username, password string) error { return nil }), nil
	case sasl.Login:
		return &loginServer{}, nil
	}
	return nil, smtp.ErrAuthUnknownMechanism
}

// Mail notes the envelope sender.
func (s *smtpSession) Mail(from string, _ *smtp.MailOptions) error {
	s.from = from
	return nil
}

// Rcpt notes a recipient, or refuses it for good when the scenario says
// so.
func (s *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	if s.b.scenario.Refuses(to) {
		o := s.b.scenario.Decide("", 0, to, s.b.now())
		s.b.stats.Attempt(Email, "", s.b.now())
		s.b.stats.Fail(Email, o.Code)
		s.b.logger.Info("email refused",
			"channel", Email, "scenario", s.b.scenario.Name, "status", o.Code,
			"from", s.from, "to", to, "reason", o.Reason)
		return smtpError(o)
	}
	s.to = append(s.to, to)
	return nil
}

// Data reads one message and answers it as the scenario decides.
func (s *smtpSession) Data(r io.Reader) error {
	b := s.b
	at := b.now()
	msg, err := mail.ReadMessage(r)
	if err == nil {
		_, err = io.Copy(io.Discard, msg.Body)
	}
	if err != nil {
		b.stats.Attempt(Email, "", at)
		var se *smtp.SMTPError
		if !errors.As(err, &se) {
			se = &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "cannot read message: " + err.Error()}
		}
		b.stats.Fail(Email, se.Code)
		b.logger.Warn("email unreadable", "channel", Email, "status", se.Code, "error", err)
		return se
	}
	id := messageID(msg.Header)
	if id == "" {
		b.stats.Attempt(Email, "", at)
		b.stats.Fail(Email, 554)
		b.logger.Warn("email without id", "channel", Email, "status", 554, "from", s.from, "to", s.to)
		return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "message has neither X-Notification-ID nor Message-ID"}
	}
	attempt := b.stats.Attempt(Email, id, at)
	o := b.scenario.Decide(id, attempt, strings.Join(s.to, ", "), at)
	log := b.logger.With("channel", Email, "message_id", id, "attempt", attempt, "scenario", b.scenario.Name)
	if !o.Accept {
		b.stats.Fail(Email, o.Code)
		log.Info("email failed", "status", o.Code, "reason", o.Reason)
		return smtpError(o)
	}
	if err := wait(b.ctx, o.Delay); err != nil {
		b.stats.Fail(Email, 421)
		log.Info("email cut short by shutdown", "status", 421)
		return &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 3, 2}, Message: "shutting down, try again later"}
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if err != nil {
		subject = msg.Header.Get("Subject")
	}
	dup := b.stats.AcceptEmail(EmailMessage{
		ID:         id,
		From:       s.from,
		To:         append([]string(nil), s.to...),
		HeaderTo:   msg.Header.Get("To"),
		Subject:    subject,
		ReceivedAt: at.UTC(),
	})
	log.Info("email accepted", "status", o.Code, "duplicate", dup, "delay", o.Delay.String())
	return nil
}

// Reset forgets the envelope of the current message.
func (s *smtpSession) Reset() {
	s.from = ""
	s.to = nil
}

// Logout ends the session; it holds nothing to release.
func (s *smtpSession) Logout() error { return nil }

// messageID is the notification id of a message: X-Notification-ID when
// the sender set it, otherwise the Message-ID without its angle brackets.
func messageID(h mail.Header) string {
	if id := strings.TrimSpace(h.Get("X-Notification-ID")); id != "" {
		return id
	}
	id := strings.TrimSpace(h.Get("Message-ID"))
	return strings.TrimSuffix(strings.TrimPrefix(id, "<"), ">")
}

// smtpError turns a failed outcome into the SMTP reply that carries it.
func smtpError(o Outcome) *smtp.SMTPError {
	enhanced := smtp.EnhancedCode{o.Code / 100, 0, 0}
	switch o.Code {
	case smtpTransient:
		enhanced = smtp.EnhancedCode{4, 3, 0}
	case smtpRateLimited:
		enhanced = smtp.EnhancedCode{4, 7, 0}
	case smtpNoMailbox:
		enhanced = smtp.EnhancedCode{5, 1, 1}
	}
	return &smtp.SMTPError{Code: o.Code, EnhancedCode: enhanced, Message: o.Reason}
}

// loginServer is the server side of the LOGIN mechanism; it accepts any
// user name and password.
type loginServer struct{ step int }

// Next asks for the user name, then the password, then reports success.
func (l *loginServer) Next(response []byte) (challenge []byte, done bool, err error) {
	switch l.step {
	case 0:
		if response == nil {
			l.step = 1
			return []byte("Username:"), false, nil
		}
		l.step = 2
		return []byte("Password:"), false, nil
	case 1:
		l.step = 2
		return []byte("Password:"), false, nil
	}
	return nil, true, nil
}

// wait holds on for d, or until ctx is done, whichever comes first.
func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
