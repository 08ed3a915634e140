package worker

import (
	"fmt"
	"time"

	"github.com/relay-demo/relay/services/config"
)

// Config is what every worker reads, whatever its channel.
type Config struct {
	config.Broker
	Concurrency     int           `env:"CONCURRENCY" envDefault:"8" help:"a whole number of messages handled at once, 1 or more"`
	Prefetch        int           `env:"PREFETCH" help:"a whole number of unacknowledged messages, 0 for twice CONCURRENCY"`
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"30s" help:"a duration such as 30s"`
}

func (c Config) validate() error {
	switch {
	case c.Concurrency < 1:
		return config.Invalid("CONCURRENCY", fmt.Sprint(c.Concurrency), "1 or more")
	case c.Prefetch < 0:
		return config.Invalid("PREFETCH", fmt.Sprint(c.Prefetch), "0 (twice CONCURRENCY) or more")
	case c.ShutdownTimeout <= 0:
		return config.Invalid("SHUTDOWN_TIMEOUT", c.ShutdownTimeout.String(), "a positive duration")
	}
	return nil
}
