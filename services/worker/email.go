package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/relay-demo/relay/email"
	"github.com/relay-demo/relay/services/config"
	"github.com/relay-demo/relay/services/notification"
)

// EmailConfig is the email channel's environment.
type EmailConfig struct {
	Host        string        `env:"SMTP_HOST" envDefault:"localhost" help:"a host name or address"`
	Port        int           `env:"SMTP_PORT" envDefault:"587" help:"a port number from 1 to 65535"`
	Username    string        `env:"SMTP_USERNAME" help:"the SMTP user name (empty: no authentication)"`
	Password    string        `env:"SMTP_PASSWORD" secret:"true" help:"the SMTP password"`
	TLS         string        `env:"SMTP_TLS" envDefault:"starttls" help:"none, starttls or tls"`
	From        string        `env:"EMAIL_FROM" envDefault:"relay@localhost" help:"a plain address such as relay@example.com"`
	Timeout     time.Duration `env:"SMTP_TIMEOUT" envDefault:"10s" help:"a duration such as 10s"`
	Concurrency int           `env:"CONCURRENCY" envDefault:"8" help:"a whole number, 1 or more"`
}

// emailSender keeps one SMTP connection per concurrent send: a go-mail
// sender serialises its sends on its connection, so the worker holds as
// many as it handles messages at once.
type emailSender struct {
	pool chan *email.Sender
}

func openEmail(getenv func(string) string) (Sender, func() error, error) {
	var cfg EmailConfig
	if err := config.Parse(getenv, &cfg); err != nil {
		return nil, nil, err
	}
	policy, err := email.ParseTLSPolicy(cfg.TLS)
	if err != nil {
		return nil, nil, config.Invalid("SMTP_TLS", cfg.TLS, "none, starttls or tls")
	}
	if cfg.Concurrency < 1 {
		return nil, nil, config.Invalid("CONCURRENCY", fmt.Sprint(cfg.Concurrency), "1 or more")
	}
	s := &emailSender{pool: make(chan *email.Sender, cfg.Concurrency)}
	for range cfg.Concurrency {
		es, err := email.NewSender(email.Config{Host: cfg.Host, Port: cfg.Port, Username: cfg.Username, Password: cfg.Password,
			TLS: policy, From: cfg.From, Timeout: cfg.Timeout})
		if err != nil {
			return nil, nil, fmt.Errorf("configuration: SMTP_* / EMAIL_FROM: %w", err)
		}
		s.pool <- es
	}
	return s, s.close, nil
}

func (s *emailSender) Send(ctx context.Context, n *notification.Notification) error {
	var es *email.Sender
	select {
	case es = <-s.pool:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { s.pool <- es }()
	e := n.Email
	return es.Send(ctx, email.Message{ID: n.ID, To: e.To, Subject: e.Subject, Text: e.Text, HTML: e.HTML})
}

func (s *emailSender) close() error {
	var errs []error
	for range cap(s.pool) {
		errs = append(errs, (<-s.pool).Close())
	}
	return errors.Join(errs...)
}
