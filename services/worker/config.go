package worker

import (
	"fmt"
	"time"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/config"
)

// Config is what every worker reads, whatever its channel.
type Config struct {
	config.Broker
	Concurrency     int           `env:"CONCURRENCY" envDefault:"8" help:"a whole number of messages handled at once, 1 or more"`
	Prefetch        int           `env:"PREFETCH" help:"a whole number of unacknowledged messages, 0 for twice CONCURRENCY"`
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"30s" help:"a duration such as 30s"`
	// Store is the API's history store, where a worker reads whether a
	// scheduled or retried copy was cancelled, and its channel the
	// endpoints, rate limits and providers.
	config.Store
	// TenantRate limits each tenant's deliveries, across every worker
	// replica sharing the store.
	channel.TenantRate
}

// LoadConfig reads and checks a worker's configuration (its channel's is
// read by the channel). An error names the variable at fault.
func LoadConfig(getenv func(string) string) (Config, error) {
	var c Config
	if err := config.Parse(getenv, &c); err != nil {
		return c, err
	}
	switch {
	case c.Concurrency < 1:
		return c, config.Invalid("CONCURRENCY", fmt.Sprint(c.Concurrency), "1 or more")
	case c.Prefetch < 0:
		return c, config.Invalid("PREFETCH", fmt.Sprint(c.Prefetch), "0 (twice CONCURRENCY) or more")
	case c.ShutdownTimeout <= 0:
		return c, config.Invalid("SHUTDOWN_TIMEOUT", c.ShutdownTimeout.String(), "a positive duration")
	}
	if err := c.Store.Check(); err != nil {
		return c, err
	}
	if err := c.TenantRate.Check(); err != nil {
		return c, err
	}
	if c.Prefetch == 0 {
		c.Prefetch = 2 * c.Concurrency
	}
	_, err := c.Topology(channel.Routes())
	return c, err
}

// Check reads the environment as `relay worker <name>` does at start, and
// builds the sender of one of relay's own channels without dialling
// anything: the error names the variable at fault.
func Check(name string, getenv func(string) string) error {
	c, err := channel.Builtin().Lookup(name)
	if err != nil {
		return err
	}
	cfg, err := LoadConfig(getenv)
	if err != nil {
		return err
	}
	store := cfg.Store.Lazy()
	defer store.Close()
	_, closeSend, err := c.Open(getenv, store.Open)
	if err != nil {
		return err
	}
	return closeSend()
}
