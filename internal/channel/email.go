package channel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/mail"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/relay-demo/relay/email"
	"github.com/relay-demo/relay/internal/config"
	"github.com/relay-demo/relay/internal/store"
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
	Name        string        `env:"SMTP_NAME" envDefault:"smtp" help:"the mail server's name in the history, metrics and status: letters, digits, - and _"`
	Rate        float64       `env:"SMTP_RATE" envDefault:"0" help:"messages a second the mail server takes, counted across every worker replica (they share the limit through the history store, DATA_DIR or HISTORY_DSN); 0 for no limit"`
	Burst       int           `env:"SMTP_BURST" envDefault:"1" help:"how many messages may go at once within SMTP_RATE, 1 or more"`
	MayBeWrong  bool          `env:"SMTP_PERMANENT_MAY_BE_WRONG" envDefault:"false" help:"true if the server's permanent refusals (5xx) may be its own mistake: the next server is tried before the copy is parked"`
	Providers   int           `env:"SMTP_PROVIDERS" envDefault:"0" help:"how many numbered mail servers to fail over along, in order: SMTP_1_HOST … SMTP_<n>_HOST, each with its own _PORT, _USERNAME, _PASSWORD, _TLS, _TIMEOUT, _NAME (default smtp<n>), _RATE, _BURST and _PERMANENT_MAY_BE_WRONG (_PORT, _TLS, _TIMEOUT and _BURST default to the unnumbered variables, the others to none); 0 for the one server of SMTP_HOST"`
	Failures    int           `env:"SMTP_BREAKER_FAILURES" envDefault:"5" help:"transient failures in a row that open a mail server's circuit, sending the copies to the next server; 0 for no circuit breaker (the default with one server, SMTP_PROVIDERS=0)"`
	Cooldown    time.Duration `env:"SMTP_BREAKER_COOLDOWN" envDefault:"5s" help:"how long an open circuit waits before its first probe, doubling while probes fail (up to 5m)"`
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
	      "items": {"type": "string", "format": "email", "description": "A plain address such as ada@example.com: no display name, angle brackets, quotes or comments, and a domain name, not an address in brackets (ada@[127.0.0.1] is refused)."}},
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

// plainAddress returns the mailbox to names, or why to is not a plain
// address. Only the address as the parser reads it is accepted, with
// nothing around it: "<ada@example.com>", a quoted local part or a comment
// would reach the history and the mail server as another spelling of a
// mailbox, and pass a duplicate check on the text. A domain literal
// (ada@[127.0.0.1]) is refused: it names a host by its address, which
// hands the mail server a target of the client's choosing.
func plainAddress(to string) (string, string) {
	a, err := mail.ParseAddress(to)
	switch {
	case err != nil || a.Name != "":
		return "", "is not a plain email address such as ada@example.com"
	case a.Address != to:
		return "", "is not a plain email address such as ada@example.com: no angle brackets, quotes, comments or spaces around or in it"
	case strings.HasPrefix(a.Address[strings.LastIndexByte(a.Address, '@')+1:], "["):
		return "", "names its domain by an address in brackets (a domain literal): give a domain name, such as ada@example.com"
	}
	return a.Address, ""
}

func checkEmail(e *EmailPart, bad func(field, format string, args ...any)) {
	switch {
	case len(e.To) == 0:
		bad("to", "at least one recipient is required")
	case len(e.To) > MaxRecipients:
		bad("to", "at most %d recipients, got %d", MaxRecipients, len(e.To))
	}
	seen := make(map[string]int, len(e.To))
	for i, to := range e.To {
		addr, problem := plainAddress(to)
		if problem != "" {
			bad(fmt.Sprintf("to[%d]", i), "%q %s", to, problem)
			continue
		}
		// Each recipient is a copy of its own: the same mailbox twice
		// would be sent twice, however it was spelt.
		key := strings.ToLower(addr)
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

// smtpServer is one mail server of the email channel, and the prefix of
// the variables that configured it, for errors.
type smtpServer struct {
	prefix     string
	name       string
	cfg        email.Config
	rate       *store.Rate
	mayBeWrong bool
}

// maxProviders bounds SMTP_PROVIDERS and SMS_PROVIDERS.
const maxProviders = 16

// smtpNumbered are the variables of each numbered mail server, after
// its SMTP_<n>_ prefix.
var smtpNumbered = []string{"HOST", "PORT", "USERNAME", "PASSWORD", "TLS", "TIMEOUT", "NAME", "RATE", "BURST", "PERMANENT_MAY_BE_WRONG"}

// EmailProviderVariables lists the numbered variables SMTP_PROVIDERS
// brings in, SMTP_1_HOST to SMTP_16_PERMANENT_MAY_BE_WRONG: the email
// worker reads them besides its Config's, for tools that check an
// environment against what relay reads.
func EmailProviderVariables() []string {
	var out []string
	for n := 1; n <= maxProviders; n++ {
		for _, v := range smtpNumbered {
			out = append(out, fmt.Sprintf("SMTP_%d_%s", n, v))
		}
	}
	return out
}

// smtpServers reads the mail servers: the one of SMTP_HOST and its
// variables, or SMTP_1_* … SMTP_<n>_* when SMTP_PROVIDERS is n.
func smtpServers(getenv func(string) string, cfg EmailConfig) ([]smtpServer, error) {
	policy, err := email.ParseTLSPolicy(cfg.TLS)
	if err != nil {
		return nil, config.Invalid("SMTP_TLS", cfg.TLS, "none, starttls or tls")
	}
	switch {
	case cfg.Providers < 0 || cfg.Providers > maxProviders:
		return nil, config.Invalid("SMTP_PROVIDERS", fmt.Sprint(cfg.Providers), fmt.Sprintf("a number of numbered mail servers from 1 to %d, or 0 for the one of SMTP_HOST", maxProviders))
	case getenv(fmt.Sprintf("SMTP_%d_HOST", cfg.Providers+1)) != "":
		key := fmt.Sprintf("SMTP_%d_HOST", cfg.Providers+1)
		return nil, fmt.Errorf("configuration: %s is set but SMTP_PROVIDERS=%d: set SMTP_PROVIDERS to the number of mail servers, or unset %s", key, cfg.Providers, key)
	}
	base := smtpServer{prefix: "SMTP_", name: cfg.Name, mayBeWrong: cfg.MayBeWrong,
		cfg: email.Config{Host: cfg.Host, Port: cfg.Port, Username: cfg.Username, Password: cfg.Password, TLS: policy, From: cfg.From, Timeout: cfg.Timeout}}
	if err := checkRate(&base, "SMTP_", cfg.Rate, cfg.Burst); err != nil {
		return nil, err
	}
	if err := checkProviderName("SMTP_NAME", cfg.Name); err != nil {
		return nil, err
	}
	if cfg.Providers == 0 {
		return []smtpServer{base}, nil
	}
	var out []smtpServer
	names := map[string]string{}
	for n := 1; n <= cfg.Providers; n++ {
		prefix := fmt.Sprintf("SMTP_%d_", n)
		v := func(key string) string { return getenv(prefix + key) }
		srv := smtpServer{prefix: prefix, name: v("NAME"), mayBeWrong: false,
			cfg: email.Config{Host: v("HOST"), Port: base.cfg.Port, Username: v("USERNAME"), Password: v("PASSWORD"), TLS: policy, From: cfg.From, Timeout: cfg.Timeout}}
		if srv.cfg.Host == "" {
			return nil, fmt.Errorf("configuration: %sHOST is required: SMTP_PROVIDERS=%d names mail servers 1 to %d", prefix, cfg.Providers, cfg.Providers)
		}
		if srv.name == "" {
			srv.name = fmt.Sprintf("smtp%d", n)
		}
		if err := checkProviderName(prefix+"NAME", srv.name); err != nil {
			return nil, err
		}
		if other, dup := names[srv.name]; dup {
			return nil, config.Invalid(prefix+"NAME", srv.name, "a name no other mail server has ("+other+"NAME has it)")
		}
		names[srv.name] = prefix
		if p := v("PORT"); p != "" {
			port, err := strconv.Atoi(p)
			if err != nil || port < 1 || port > 65535 {
				return nil, config.Invalid(prefix+"PORT", p, "a port number from 1 to 65535")
			}
			srv.cfg.Port = port
		}
		if t := v("TLS"); t != "" {
			if srv.cfg.TLS, err = email.ParseTLSPolicy(t); err != nil {
				return nil, config.Invalid(prefix+"TLS", t, "none, starttls or tls")
			}
		}
		common := providerSettings{timeout: srv.cfg.Timeout}
		if err := common.read(v, prefix, cfg.Burst); err != nil {
			return nil, err
		}
		srv.cfg.Timeout, srv.mayBeWrong, srv.rate = common.timeout, common.mayBeWrong, common.rate
		out = append(out, srv)
	}
	return out, nil
}

// checkRate sets s's limit from rate and burst, read from the variables
// prefix+RATE and prefix+BURST.
func checkRate(s *smtpServer, prefix string, rate float64, burst int) error {
	r, err := parseRate(prefix, rate, burst)
	s.rate = r
	return err
}

// providerSettings are what every numbered provider, mail server or
// gateway, takes beside its address: TIMEOUT, PERMANENT_MAY_BE_WRONG,
// RATE and BURST.
type providerSettings struct {
	timeout    time.Duration
	mayBeWrong bool
	rate       *store.Rate
}

// read sets p from the variables prefix+KEY (v(KEY) reads one), keeping
// p.timeout where TIMEOUT is unset; burst is the default BURST.
func (p *providerSettings) read(v func(string) string, prefix string, burst int) error {
	if t := v("TIMEOUT"); t != "" {
		d, err := time.ParseDuration(t)
		if err != nil || d <= 0 {
			return config.Invalid(prefix+"TIMEOUT", t, "a positive duration such as 10s")
		}
		p.timeout = d
	}
	var err error
	if b := v("PERMANENT_MAY_BE_WRONG"); b != "" {
		if p.mayBeWrong, err = strconv.ParseBool(b); err != nil {
			return config.Invalid(prefix+"PERMANENT_MAY_BE_WRONG", b, "true or false")
		}
	}
	rate := 0.0
	if r := v("RATE"); r != "" {
		if rate, err = strconv.ParseFloat(r, 64); err != nil {
			return config.Invalid(prefix+"RATE", r, "messages a second, such as 50 or 0.5; 0 for no limit")
		}
	}
	if b := v("BURST"); b != "" {
		if burst, err = strconv.Atoi(b); err != nil {
			return config.Invalid(prefix+"BURST", b, "how many messages may go at once, 1 or more")
		}
	}
	p.rate, err = parseRate(prefix, rate, burst)
	return err
}

// parseRate is the limit of rate messages a second with bursts of burst,
// nil for none, read from prefix+RATE and prefix+BURST.
func parseRate(prefix string, rate float64, burst int) (*store.Rate, error) {
	switch {
	case math.IsNaN(rate) || math.IsInf(rate, 0) || rate < 0 || rate > 1e6:
		return nil, config.Invalid(prefix+"RATE", fmt.Sprint(rate), "messages a second, such as 50 or 0.5, at most 1000000; 0 for no limit")
	case burst < 1:
		return nil, config.Invalid(prefix+"BURST", fmt.Sprint(burst), "how many messages may go at once, 1 or more")
	case rate == 0:
		return nil, nil
	}
	return &store.Rate{Per: rate, Burst: burst}, nil
}

// providerName is the form of a provider's name.
var providerName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

func checkProviderName(key, name string) error {
	if !providerName.MatchString(name) {
		return config.Invalid(key, name, "a name of 1 to 32 letters, digits, - and _")
	}
	return nil
}

// storeSet reports whether the environment names a history store.
func storeSet(getenv func(string) string) bool {
	return getenv("HISTORY_DSN") != "" || getenv("DATA_DIR") != ""
}

// rateStore is the store the limits, the providers and their circuits
// are shared through, or nil when it is not used: the limits need it;
// without one, the providers are shared only if HISTORY_DSN or DATA_DIR
// names it (use).
func rateStore(st Store, use bool) func(ctx context.Context) (rateTaker, error) {
	if !use {
		return nil
	}
	return func(ctx context.Context) (rateTaker, error) { return st(ctx) }
}

// openEmail keeps one SMTP connection per concurrent send and mail
// server: a go-mail sender serialises its sends on its connection, so the
// worker holds as many as it handles messages at once.
func openEmail(getenv func(string) string, st Store) (Send[EmailPart], func() error, error) {
	var cfg EmailConfig
	if err := config.Parse(getenv, &cfg); err != nil {
		return nil, nil, err
	}
	if cfg.Concurrency < 1 {
		return nil, nil, config.Invalid("CONCURRENCY", fmt.Sprint(cfg.Concurrency), "1 or more")
	}
	switch {
	case cfg.Failures < 0:
		return nil, nil, config.Invalid("SMTP_BREAKER_FAILURES", fmt.Sprint(cfg.Failures), "transient failures in a row that open a mail server's circuit, 1 or more; 0 for no circuit breaker")
	case cfg.Cooldown <= 0:
		return nil, nil, config.Invalid("SMTP_BREAKER_COOLDOWN", cfg.Cooldown.String(), "a positive duration such as 5s")
	}
	servers, err := smtpServers(getenv, cfg)
	if err != nil {
		return nil, nil, err
	}
	var (
		providers []Provider[EmailPart]
		closers   []func() error
		limited   bool
	)
	closeAll := func() error {
		var errs []error
		for _, c := range closers {
			errs = append(errs, c())
		}
		return errors.Join(errs...)
	}
	for _, srv := range servers {
		send, closeSend, err := smtpPool(srv, cfg.Concurrency)
		if err != nil {
			_ = closeAll()
			return nil, nil, err
		}
		closers = append(closers, closeSend)
		limited = limited || srv.rate != nil
		providers = append(providers, Provider[EmailPart]{Name: srv.name, Send: send, Rate: srv.rate, MayBeWrong: srv.mayBeWrong})
	}
	rates := rateStore(st, limited || storeSet(getenv))
	failures := cfg.Failures
	if cfg.Providers == 0 && getenv("SMTP_BREAKER_FAILURES") == "" {
		// One mail server, as before there were several: every failure
		// spends a retry, there being no other server to turn to.
		failures = 0
	}
	f := newFailover("email", providers, failures, cfg.Cooldown, cfg.Concurrency, rates, emailTicket, time.Now)
	stop := f.declare()
	return f.send, func() error {
		stop()
		providerSets.remove(f.stats)
		return closeAll()
	}, nil
}

// emailTicket names an email copy for the rate limits: its notification
// and recipient, the same each time it comes back.
func emailTicket(id string, e *EmailPart) string {
	return id + "/" + strings.Join(e.To, ",")
}

// smtpPool is the sender of one mail server, with n connections.
func smtpPool(srv smtpServer, n int) (Send[EmailPart], func() error, error) {
	pool := make(chan *email.Sender, n)
	closeAll := func() error {
		var errs []error
		for len(pool) > 0 {
			errs = append(errs, (<-pool).Close())
		}
		return errors.Join(errs...)
	}
	for range n {
		es, err := email.NewSender(srv.cfg)
		if err != nil {
			_ = closeAll()
			if srv.prefix == "SMTP_" {
				return nil, nil, fmt.Errorf("configuration: SMTP_* / EMAIL_FROM: %w", err)
			}
			return nil, nil, fmt.Errorf("configuration: %s* / EMAIL_FROM: %w", srv.prefix, err)
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
