package api

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/config"
)

// MinTokenLength is the shortest bearer token API_TOKENS accepts.
const MinTokenLength = 16

// Config is the environment of `relay api`.
type Config struct {
	config.Broker
	// HTTPAddr is where the API listens.
	HTTPAddr string `env:"HTTP_ADDR" envDefault:":8080" help:"a listen address such as :8080"`
	// Tokens are the bearer tokens a client may present.
	Tokens []string `env:"API_TOKENS" secret:"true" help:"a comma-separated list of bearer tokens of 16 characters or more: the default tenant's"`
	// TenantTokenPairs are API_TENANT_TOKENS as given; LoadConfig reads
	// them into TenantTokens.
	TenantTokenPairs []string `env:"API_TENANT_TOKENS" secret:"true" help:"a comma-separated list of TENANT:TOKEN pairs: each token sees only its tenant's notifications, endpoints and dead letters"`
	// TenantTokens are the tokens of named tenants.
	TenantTokens []TenantToken
	// OperatorTokens see and act on every tenant.
	OperatorTokens []string `env:"API_OPERATOR_TOKENS" secret:"true" help:"a comma-separated list of bearer tokens that see every tenant"`
	// Auth is "on" (the default) or "off"; off leaves the API open.
	Auth string `env:"API_AUTH" envDefault:"on" help:"on or off"`
	// MaxBodyBytes bounds the size of a request body.
	MaxBodyBytes int64 `env:"MAX_BODY_BYTES" envDefault:"1048576" help:"a whole number of bytes, 1 or more"`
	// ShutdownTimeout bounds how long a graceful shutdown waits for the
	// requests in flight.
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"15s" help:"a positive duration such as 15s"`
	// Store names the history store: SQLite under DATA_DIR, or a
	// PostgreSQL URL, which several API replicas can share.
	config.Store
	// HistoryRetention is how long the history keeps a notification.
	HistoryRetention time.Duration `env:"HISTORY_RETENTION" envDefault:"720h" help:"a positive duration such as 720h (30 days)"`
	// IdempotencyTTL is how long an Idempotency-Key is remembered.
	IdempotencyTTL time.Duration `env:"IDEMPOTENCY_TTL" envDefault:"24h" help:"a positive duration such as 24h"`
	// DashboardPublic shows the dashboard without a token: its list, the
	// details and the live events, but no error text, payload, header or
	// webhook URL past its host; replay still needs a token.
	DashboardPublic bool `env:"DASHBOARD_PUBLIC" envDefault:"false" help:"true or false"`
	// DashboardMaxStreams caps the dashboard's event streams open at once.
	DashboardMaxStreams int `env:"DASHBOARD_MAX_STREAMS" envDefault:"2000" help:"a whole number of streams, 1 or more"`
	// DashboardMaxStreamsPerClient caps the dashboard's event streams open
	// at once from one client address.
	DashboardMaxStreamsPerClient int `env:"DASHBOARD_MAX_STREAMS_PER_CLIENT" envDefault:"20" help:"a whole number of streams, from 1 to DASHBOARD_MAX_STREAMS"`
	// MaxBatch is the most notifications one POST /v1/notifications/batch
	// may hold.
	MaxBatch int `env:"MAX_BATCH" envDefault:"500" help:"a whole number of notifications, from 1 to 10000"`
	// RateLimit is how many copies a second each token may make through
	// /v1/ (each client address with API_AUTH=off): a request that sends
	// notifications costs one per copy they make, any other request one.
	// 0 turns limiting off.
	RateLimit float64 `env:"API_RATE_LIMIT" envDefault:"0" help:"copies a second per token (a notification costs one per copy, any other request one), such as 50 or 0.5; 0 for no limit"`
	// RateBurst is how many copies a token may make at once above the
	// rate, and so the most one request may make; LoadConfig makes 0
	// twice API_RATE_LIMIT.
	RateBurst int `env:"API_RATE_BURST" envDefault:"0" help:"a whole number of copies, 1 or more, also the most one request may make; 0 for twice API_RATE_LIMIT"`
	// TenantRateLimit is how many copies a second each tenant may make
	// through /v1/, all its tokens together; an operator's copies are the
	// default tenant's. It counts copies as RateLimit does, and only
	// copies: a request that makes none costs the tenant nothing. 0 turns
	// it off.
	TenantRateLimit float64 `env:"API_TENANT_RATE_LIMIT" envDefault:"0" help:"copies a second per tenant, all its tokens together (the default tenant's include the operators'), such as 500 or 0.5; 0 for no limit"`
	// TenantRateBurst is how many copies a tenant may make at once above
	// its rate, and so the most one request may make; LoadConfig makes 0
	// twice API_TENANT_RATE_LIMIT.
	TenantRateBurst int `env:"API_TENANT_RATE_BURST" envDefault:"0" help:"a whole number of copies, 1 or more, also the most one request may make; 0 for twice API_TENANT_RATE_LIMIT"`
	// AuthFailureRate is how many missing or wrong bearer tokens each
	// client address may send a second, to /v1/ and the dashboard
	// together. It cannot be turned off: guessing tokens is always
	// limited.
	AuthFailureRate float64 `env:"API_AUTH_FAILURE_RATE" envDefault:"1" help:"missing or wrong bearer tokens a second per client address, such as 1 or 0.2; more than 0"`
	// AuthFailureBurst is how many missing or wrong tokens a client
	// address may send at once above AuthFailureRate.
	AuthFailureBurst int `env:"API_AUTH_FAILURE_BURST" envDefault:"10" help:"a whole number of missing or wrong bearer tokens, 1 or more"`
}

// maxBatchCeiling is the highest MAX_BATCH accepted: a batch fans out
// into a goroutine per message it publishes.
const maxBatchCeiling = 10_000

// LoadConfig reads and checks the configuration from getenv. An error
// names the variable at fault and the form it accepts.
func LoadConfig(getenv func(string) string) (Config, error) {
	var cfg Config
	if err := config.Parse(getenv, &cfg); err != nil {
		return Config{}, err
	}
	cfg.Tokens = cleanTokens(cfg.Tokens)
	cfg.OperatorTokens = cleanTokens(cfg.OperatorTokens)
	tenants, err := parseTenantTokens(cfg.TenantTokenPairs)
	if err != nil {
		return Config{}, err
	}
	cfg.TenantTokens = tenants
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	if cfg.RateLimit > 0 && cfg.RateBurst == 0 {
		cfg.RateBurst = DefaultBurst(cfg.RateLimit)
	}
	if cfg.TenantRateLimit > 0 && cfg.TenantRateBurst == 0 {
		cfg.TenantRateBurst = DefaultBurst(cfg.TenantRateLimit)
	}
	return cfg, nil
}

// cleanTokens trims the tokens and drops empty ones, so "a, b," is two.
func cleanTokens(tokens []string) []string {
	var out []string
	for _, t := range tokens {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// AuthOff reports whether API_AUTH turns authentication off.
func (c Config) AuthOff() bool { return c.Auth == "off" }

// Validate checks values the variables' types alone do not rule out. No
// message quotes a token.
func (c Config) Validate() error {
	if _, err := c.Broker.Topology(channel.Routes()); err != nil {
		return err
	}
	switch {
	case c.Auth != "on" && c.Auth != "off":
		return config.Invalid("API_AUTH", c.Auth, "on or off")
	case c.MaxBodyBytes < 1:
		return config.Invalid("MAX_BODY_BYTES", fmt.Sprint(c.MaxBodyBytes), "a whole number of bytes, 1 or more")
	case c.ShutdownTimeout <= 0:
		return config.Invalid("SHUTDOWN_TIMEOUT", c.ShutdownTimeout.String(), "a positive duration such as 15s")
	case c.HistoryRetention <= 0:
		return config.Invalid("HISTORY_RETENTION", c.HistoryRetention.String(), "a positive duration such as 720h (30 days)")
	case c.IdempotencyTTL <= 0:
		return config.Invalid("IDEMPOTENCY_TTL", c.IdempotencyTTL.String(), "a positive duration such as 24h")
	case c.DashboardMaxStreams < 1:
		return config.Invalid("DASHBOARD_MAX_STREAMS", fmt.Sprint(c.DashboardMaxStreams), "a whole number of streams, 1 or more")
	case c.DashboardMaxStreamsPerClient < 1 || c.DashboardMaxStreamsPerClient > c.DashboardMaxStreams:
		return config.Invalid("DASHBOARD_MAX_STREAMS_PER_CLIENT", fmt.Sprint(c.DashboardMaxStreamsPerClient),
			fmt.Sprintf("a whole number of streams, from 1 to DASHBOARD_MAX_STREAMS (%d)", c.DashboardMaxStreams))
	case c.MaxBatch < 1 || c.MaxBatch > maxBatchCeiling:
		return config.Invalid("MAX_BATCH", fmt.Sprint(c.MaxBatch), fmt.Sprintf("a whole number of notifications, from 1 to %d", maxBatchCeiling))
	case c.RateLimit < 0 || math.IsNaN(c.RateLimit) || math.IsInf(c.RateLimit, 0):
		return config.Invalid("API_RATE_LIMIT", fmt.Sprint(c.RateLimit), "copies a second per token, such as 50 or 0.5; 0 for no limit")
	case c.RateBurst < 0:
		return config.Invalid("API_RATE_BURST", fmt.Sprint(c.RateBurst), "a whole number of copies, 1 or more; 0 for twice API_RATE_LIMIT")
	case c.TenantRateLimit < 0 || math.IsNaN(c.TenantRateLimit) || math.IsInf(c.TenantRateLimit, 0):
		return config.Invalid("API_TENANT_RATE_LIMIT", fmt.Sprint(c.TenantRateLimit), "copies a second per tenant, such as 500 or 0.5; 0 for no limit")
	case c.TenantRateBurst < 0:
		return config.Invalid("API_TENANT_RATE_BURST", fmt.Sprint(c.TenantRateBurst), "a whole number of copies, 1 or more; 0 for twice API_TENANT_RATE_LIMIT")
	case c.AuthFailureRate <= 0 || math.IsNaN(c.AuthFailureRate) || math.IsInf(c.AuthFailureRate, 0):
		return config.Invalid("API_AUTH_FAILURE_RATE", fmt.Sprint(c.AuthFailureRate), "missing or wrong bearer tokens a second per client address, such as 1 or 0.2; more than 0")
	case c.AuthFailureBurst < 1:
		return config.Invalid("API_AUTH_FAILURE_BURST", fmt.Sprint(c.AuthFailureBurst), "a whole number of missing or wrong bearer tokens, 1 or more")
	}
	if err := c.Store.Check(); err != nil {
		return err
	}
	lists := []struct {
		name   string
		tokens []string
	}{{"API_TOKENS", c.Tokens}, {"API_TENANT_TOKENS", nil}, {"API_OPERATOR_TOKENS", c.OperatorTokens}}
	for _, t := range c.TenantTokens {
		lists[1].tokens = append(lists[1].tokens, t.Token)
	}
	seen := map[string]string{}
	total := 0
	for _, l := range lists {
		for i, t := range l.tokens {
			if len(t) < MinTokenLength {
				return fmt.Errorf("configuration: %s is not valid: token %d of %d has %d characters, want %d or more",
					l.name, i+1, len(l.tokens), len(t), MinTokenLength)
			}
			where := fmt.Sprintf("token %d of %s", i+1, l.name)
			if first, ok := seen[t]; ok {
				return fmt.Errorf("configuration: %s is %s again: a token stands for one tenant", where, first)
			}
			seen[t] = where
		}
		total += len(l.tokens)
	}
	switch {
	case total == 0 && !c.AuthOff():
		return errors.New("configuration: API_TOKENS is empty while API_AUTH is on: set API_TOKENS to one or more bearer tokens, or API_AUTH=off to run the API without authentication")
	case total > len(c.Tokens) && c.AuthOff():
		return errors.New("configuration: API_TENANT_TOKENS or API_OPERATOR_TOKENS is set while API_AUTH is off: without authentication no request has a tenant; set API_AUTH=on")
	}
	return nil
}

// deps are the Deps fields c sets on its own: the tokens.
func (c Config) deps() Deps {
	return Deps{Tokens: c.Tokens, TenantTokens: c.TenantTokens, OperatorTokens: c.OperatorTokens, AuthOff: c.AuthOff()}
}
