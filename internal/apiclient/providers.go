package apiclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Provider is a channel's mail server or gateway as GET /v1/providers
// shows it.
type Provider struct {
	Channel  string    `json:"channel"`
	Name     string    `json:"name"`
	Position int       `json:"position"`
	Circuit  Circuit   `json:"circuit"`
	Rate     *Rate     `json:"rate"`
	SeenAt   time.Time `json:"seen_at"`
}

// Circuit is a provider's circuit as a worker last recorded it.
type Circuit struct {
	State        string     `json:"state"`
	Since        *time.Time `json:"since"`
	LastError    string     `json:"last_error"`
	FailingSince *time.Time `json:"failing_since"`
	UpdatedAt    *time.Time `json:"updated_at"`
}

// Rate is a provider's limit and how it stands.
type Rate struct {
	PerSecond  float64 `json:"per_second"`
	Burst      int     `json:"burst"`
	NextSlotMS int64   `json:"next_slot_ms"`
	Waiting    int     `json:"waiting"`
}

// ProvidersJSON returns the API's answer to GET /v1/providers as it
// came.
func (c *Client) ProvidersJSON(ctx context.Context) (json.RawMessage, error) {
	return c.do(ctx, http.MethodGet, "/v1/providers", nil, nil, http.StatusOK)
}

// Providers returns the providers the workers declared, by channel and
// position.
func (c *Client) Providers(ctx context.Context) ([]Provider, error) {
	raw, err := c.ProvidersJSON(ctx)
	if err != nil {
		return nil, err
	}
	var out struct {
		Providers []Provider `json:"providers"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("decode providers: %w", err)
	}
	return out.Providers, nil
}
