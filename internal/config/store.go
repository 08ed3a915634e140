package config

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/relay-demo/relay/internal/store"
)

// Store names the history store and the keys that seal the endpoints'
// signing secrets in it: the variables of every process that opens it
// (the API and every worker), which each service's Config embeds.
type Store struct {
	DataDir          string `env:"DATA_DIR" envDefault:"data" help:"a writable directory, where the history store lives (SQLite, history.db) when HISTORY_DSN is empty"`
	HistoryDSN       string `env:"HISTORY_DSN" help:"the history store the API and the workers share (notifications, endpoints, cancellations, rate limits): empty (SQLite in DATA_DIR), a postgres:// URL, or sqlite:/path/to/file.db"`
	SealKey          string `env:"HISTORY_SEAL_KEY" secret:"true" help:"a 32-byte key in base64 (openssl rand -base64 32) that seals the endpoints' signing secrets in the history, the same for the API and the webhook workers; empty stores them in plaintext"`
	SealKeyFallbacks string `env:"HISTORY_SEAL_KEY_FALLBACKS" secret:"true" help:"keys, comma-separated, that also open sealed secrets and never seal, for a rotation (docs/api.md says how): the API seals again with HISTORY_SEAL_KEY, as it starts, every secret they open; empty: none"`
}

// DSN is the store's DSN: HISTORY_DSN, or the SQLite file in DATA_DIR.
func (s Store) DSN() string {
	if s.HistoryDSN != "" {
		return s.HistoryDSN
	}
	return filepath.Join(s.DataDir, "history.db")
}

// Check validates the settings, without opening the store. Its errors
// name the variable at fault and never quote a DSN or a key.
func (s Store) Check() error {
	if s.HistoryDSN == "" && strings.TrimSpace(s.DataDir) == "" {
		return Invalid("DATA_DIR", s.DataDir, "a writable directory (or set HISTORY_DSN)")
	}
	if err := store.CheckDSN(s.DSN()); err != nil {
		if s.HistoryDSN != "" {
			return fmt.Errorf("configuration: HISTORY_DSN is not valid: %w", err)
		}
		return fmt.Errorf("configuration: DATA_DIR=%q is not valid: %w", s.DataDir, err)
	}
	if _, err := store.SealOptions(s.SealKey, s.SealKeyFallbacks); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	return nil
}

// Lazy is the store s names, sealed with its keys and opened with opts
// besides, on first use: the one store of a process.
func (s Store) Lazy(opts ...store.Option) *store.Lazy {
	return store.NewLazy(func(ctx context.Context) (*store.Store, error) {
		seal, err := store.SealOptions(s.SealKey, s.SealKeyFallbacks)
		if err != nil {
			return nil, err
		}
		return store.Open(ctx, s.DSN(), append(seal, opts...)...)
	})
}
