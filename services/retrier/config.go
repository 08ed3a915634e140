package retrier

import (
	"fmt"
	"time"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/config"
)

// Config is the retrier's environment.
type Config struct {
	config.Broker
	Prefetch    int `env:"PREFETCH" envDefault:"64" help:"a whole number of unacknowledged messages per stage, 1 or more"`
	Concurrency int `env:"CONCURRENCY" envDefault:"32" help:"a whole number of workers per stage, 1 or more"`

	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"30s" help:"a positive duration such as 30s"`
}

// LoadConfig reads and checks the retrier's configuration. An error names
// the variable at fault.
func LoadConfig(getenv func(string) string) (Config, error) {
	var c Config
	if err := config.Parse(getenv, &c); err != nil {
		return c, err
	}
	switch {
	case c.Prefetch < 1:
		return c, config.Invalid("PREFETCH", fmt.Sprint(c.Prefetch), "1 or more")
	case c.Concurrency < 1:
		return c, config.Invalid("CONCURRENCY", fmt.Sprint(c.Concurrency), "1 or more")
	case c.ShutdownTimeout <= 0:
		return c, config.Invalid("SHUTDOWN_TIMEOUT", c.ShutdownTimeout.String(), "a positive duration")
	}
	_, err := c.Topology(channel.Routes())
	return c, err
}
