package config

import (
	"io"
	"log/slog"
)

// Logger is the JSON logger every service writes to its stdout, tagged with
// the service's name.
func Logger(stdout io.Writer, service string) *slog.Logger {
	return slog.New(slog.NewJSONHandler(stdout, nil)).With("service", service)
}
