package retrier

import (
	"time"

	"github.com/relay-demo/relay/services/config"
)

// Config is the retrier's environment.
type Config struct {
	config.Broker
	Prefetch    int `env:"PREFETCH" envDefault:"64" help:"a whole number of unacknowledged messages per stage, 1 or more"`
	Concurrency int `env:"CONCURRENCY" envDefault:"32" help:"a whole number of workers per stage, 1 or more"`

	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"30s" help:"a positive duration such as 30s"`
}

func (c Config) validate() error {
	if c.Prefetch < 1 {
		return config.Invalid("PREFETCH", itoa(c.Prefetch), "1 or more")
	}
	if c.ShutdownTimeout <= 0 {
		return config.Invalid("SHUTDOWN_TIMEOUT", c.ShutdownTimeout.String(), "a positive duration")
	}
	if c.Concurrency < 1 {
		return config.Invalid("CONCURRENCY", itoa(c.Concurrency), "1 or more")
	}
	return nil
}
