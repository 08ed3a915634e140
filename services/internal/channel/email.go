package channel

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"time"

	"github.com/relay-demo/relay/email"
	"github.com/relay-demo/relay/services/internal/config"
)

// Limits on an email part.
const (
	MaxRecipients = 50
	MaxSubject    = 998 // RFC 5322's line limit
	MaxBody       = 256 << 10
)

// EmailPart is the email part of a notification.
type EmailPart struct {
	To      []string `json:"to"`
	Subject string   `json:"subject"`
	Text    string   `json:"text,omitempty"`
	HTML    string   `json:"html,omitempty"`
}

// EmailConfig is the email channel's environment.
type EmailConfig struct {
	Host        string        `env:"SMTP_HOST" envDefault:"localhost" help:"the mail server's host name or address"`
	Port        int           `env:"SMTP_PORT" envDefault:"587" help:"a port number from 1 to 65535, the mail server's"`
	Username    string        `env:"SMTP_USERNAME" help:"the SMTP user name for AUTH PLAIN, which needs SMTP_TLS starttls or tls (empty: no authentication)"`
	Password    string        `env:"SMTP_PASSWORD" secret:"true" help:"the SMTP password"`
	TLS         string        `env:"SMTP_TLS" envDefault:"starttls" help:"none, starttls (mandatory: a server without it is refused) or tls (implicit, SMTPS)"`
	From        string        `env:"EMAIL_FROM" envDefault:"relay@localhost" help:"the sender, an address such as relay@example.com or, with a display name, Relay <relay@example.com>; its domain names the Message-ID"`
	Timeout     time.Duration `env:"SMTP_TIMEOUT" envDefault:"10s" help:"a duration such as 10s: one send, from dial to the server's answer"`
	Concurrency int           `env:"CONCURRENCY" envDefault:"8" help:"a whole number, 1 or more"`
}

// Email delivers over SMTP with go-mail.
var Email = Define(Spec[EmailPart]{
	Name:    "email",
	Summary: "deliver the email queue over SMTP",
	Check:   checkEmail,
	Recipients: func(p *EmailPart) []string {
		return p.To
	},
	// Each recipient gets an email of their own, sees only their own
	// address, and is retried or parked without the others.
	PerRecipient: func(p *EmailPart, to string) *EmailPart {
		one := *p
		one.To = []string{to}
		return &one
	},
	Schema: `{
	  "type": "object",
	  "required": ["to", "subject"],
	  "additionalProperties": false,
	  "description": "The email part. At least one of text and html is required; each holds at most 262144 bytes.",
	  "properties": {
	    "to": {"type": "array", "minItems": 1, "maxItems": 50,
	      "description": "Each recipient gets an email of their own, addressed to them alone, and is delivered, retried and parked without the others: the notification has one email copy per recipient. An address may appear once.",
	      "items": {"type": "string", "format": "email", "description": "A plain address such as ada@example.com, without a display name."}},
	    "subject": {"type": "string", "minLength": 1, "maxLength": 998, "description": "One line."},
	    "text": {"type": "string", "maxLength": 262144},
	    "html": {"type": "string", "maxLength": 262144}
	  }
	}`,
	Env:  []any{&EmailConfig{}},
	Open: openEmail,
	Demo: func(d Downstreams) map[string]string {
		return map[string]string{"SMTP_HOST": d.SMTPHost, "SMTP_PORT": d.SMTPPort, "SMTP_TLS": "none", "EMAIL_FROM": "relay@relay.demo"}
	},
})

func checkEmail(e *EmailPart, bad func(field, format string, args ...any)) {
	switch {
	case len(e.To) == 0:
		bad("to", "at least one recipient is required")
	case len(e.To) > MaxRecipients:
		bad("to", "at most %d recipients, got %d", MaxRecipients, len(e.To))
	}
	seen := make(map[string]int, len(e.To))
	for i, to := range e.To {
		if a, err := mail.ParseAddress(to); err != nil || a.Name != "" {
			bad(fmt.Sprintf("to[%d]", i), "%q is not a plain email address such as ada@example.com", to)
			continue
		}
		// Each recipient is a copy of its own: the same address twice
		// would be sent twice.
		key := strings.ToLower(to)
		if first, dup := seen[key]; dup {
			bad(fmt.Sprintf("to[%d]", i), "%q repeats to[%d]: each recipient once", to, first)
			continue
		}
		seen[key] = i
	}
	if strings.TrimSpace(e.Subject) == "" {
		bad("subject", "a subject is required")
	} else if len(e.Subject) > MaxSubject || strings.ContainsAny(e.Subject, "\r\n") {
		bad("subject", "must be one line of at most %d bytes", MaxSubject)
	}
	if e.Text == "" && e.HTML == "" {
		bad("text", "a text or an html body is required")
	}
	if len(e.Text) > MaxBody || len(e.HTML) > MaxBody {
		bad("text", "each body may hold at most %d bytes", MaxBody)
	}
}

// openEmail keeps one SMTP connection per concurrent send: a go-mail
// sender serialises its sends on its connection, so the worker holds as
// many as it handles messages at once.
func openEmail(getenv func(string) string) (Send[EmailPart], func() error, error) {
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
	pool := make(chan *email.Sender, cfg.Concurrency)
	closeAll := func() error {
		var errs []error
		for len(pool) > 0 {
			errs = append(errs, (<-pool).Close())
		}
		return errors.Join(errs...)
	}
	for range cfg.Concurrency {
		es, err := email.NewSender(email.Config{Host: cfg.Host, Port: cfg.Port, Username: cfg.Username, Password: cfg.Password,
			TLS: policy, From: cfg.From, Timeout: cfg.Timeout})
		if err != nil {
			_ = closeAll()
			return nil, nil, fmt.Errorf("configuration: SMTP_* / EMAIL_FROM: %w", err)
		}
		pool <- es
	}
	send := func(ctx context.Context, id string, e *EmailPart) error {
		var es *email.Sender
		select {
		case es = <-pool:
		case <-ctx.Done():
			return ctx.Err()
		}
		defer func() { pool <- es }()
		return es.Send(ctx, email.Message{ID: id, To: e.To, Subject: e.Subject, Text: e.Text, HTML: e.HTML})
	}
	// Close waits for the sends in hand to return their connections.
	closeSend := func() error {
		var errs []error
		for range cap(pool) {
			errs = append(errs, (<-pool).Close())
		}
		return errors.Join(errs...)
	}
	return send, closeSend, nil
}
