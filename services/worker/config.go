package worker

import (
	"fmt"
	"strings"
	"time"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/config"
	"github.com/relay-demo/relay/internal/history"
)

// Config is what every worker reads, whatever its channel.
type Config struct {
	config.Broker
	Concurrency     int           `env:"CONCURRENCY" envDefault:"8" help:"a whole number of messages handled at once, 1 or more"`
	Prefetch        int           `env:"PREFETCH" help:"a whole number of unacknowledged messages, 0 for twice CONCURRENCY"`
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"30s" help:"a duration such as 30s"`
	// DataDir and HistoryDSN name the API's history store, where a worker
	// reads whether a scheduled or retried copy was cancelled.
	DataDir    string `env:"DATA_DIR" envDefault:"data" help:"the directory of the API's SQLite history (history.db), when HISTORY_DSN is empty"`
	HistoryDSN string `env:"HISTORY_DSN" help:"the API's history store, where endpoints and cancellations live: empty (SQLite in DATA_DIR), a postgres:// URL, or sqlite:/path/to/file.db"`
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
	case c.HistoryDSN == "" && strings.TrimSpace(c.DataDir) == "":
		return c, config.Invalid("DATA_DIR", c.DataDir, "a directory (or set HISTORY_DSN)")
	}
	if err := history.CheckDSN(c.historyDSN()); err != nil {
		if c.HistoryDSN != "" {
			return c, fmt.Errorf("configuration: HISTORY_DSN is not valid: %w", err)
		}
		return c, fmt.Errorf("configuration: DATA_DIR=%q is not valid: %w", c.DataDir, err)
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
	if _, err := LoadConfig(getenv); err != nil {
		return err
	}
	_, closeSend, err := c.Open(getenv)
	if err != nil {
		return err
	}
	return closeSend()
}
