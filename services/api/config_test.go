package api

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/config"
)

func TestConfigRejects(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want []string // parts of the error
	}{
		{"no tokens", map[string]string{}, []string{"API_TOKENS", "API_AUTH=off"}},
		{"empty tokens", map[string]string{"API_TOKENS": " , "}, []string{"API_TOKENS", "API_AUTH=off"}},
		{"short token", map[string]string{"API_TOKENS": tokenA + ",short"}, []string{"API_TOKENS", "token 2 of 2", "16 or more"}},
		{"bad auth", map[string]string{"API_TOKENS": tokenA, "API_AUTH": "maybe"}, []string{"API_AUTH", "on or off"}},
		{"zero body", map[string]string{"API_TOKENS": tokenA, "MAX_BODY_BYTES": "0"}, []string{"MAX_BODY_BYTES"}},
		{"word body", map[string]string{"API_TOKENS": tokenA, "MAX_BODY_BYTES": "lots"}, []string{"MAX_BODY_BYTES"}},
		{"negative timeout", map[string]string{"API_TOKENS": tokenA, "SHUTDOWN_TIMEOUT": "-1s"}, []string{"SHUTDOWN_TIMEOUT"}},
		{"bad backend", map[string]string{"API_TOKENS": tokenA, "DELAY_BACKEND": "redis"}, []string{"DELAY_BACKEND"}},
		{"bad delays", map[string]string{"API_TOKENS": tokenA, "RETRY_DELAYS": "soon"}, []string{"RETRY_DELAYS"}},
		{"bad retention", map[string]string{"API_TOKENS": tokenA, "HISTORY_RETENTION": "0s"}, []string{"HISTORY_RETENTION"}},
		{"bad key ttl", map[string]string{"API_TOKENS": tokenA, "IDEMPOTENCY_TTL": "forever"}, []string{"IDEMPOTENCY_TTL"}},
		{"zero streams", map[string]string{"API_TOKENS": tokenA, "DASHBOARD_MAX_STREAMS": "0"}, []string{"DASHBOARD_MAX_STREAMS", "1 or more"}},
		{"word streams", map[string]string{"API_TOKENS": tokenA, "DASHBOARD_MAX_STREAMS": "many"}, []string{"DASHBOARD_MAX_STREAMS"}},
		{"zero streams per client", map[string]string{"API_TOKENS": tokenA, "DASHBOARD_MAX_STREAMS_PER_CLIENT": "0"}, []string{"DASHBOARD_MAX_STREAMS_PER_CLIENT"}},
		{"more per client than in all", map[string]string{"API_TOKENS": tokenA, "DASHBOARD_MAX_STREAMS": "10", "DASHBOARD_MAX_STREAMS_PER_CLIENT": "11"},
			[]string{"DASHBOARD_MAX_STREAMS_PER_CLIENT", "from 1 to DASHBOARD_MAX_STREAMS (10)"}},
		{"public maybe", map[string]string{"API_TOKENS": tokenA, "DASHBOARD_PUBLIC": "maybe"}, []string{"DASHBOARD_PUBLIC", "true or false"}},
		{"zero batch", map[string]string{"API_TOKENS": tokenA, "MAX_BATCH": "0"}, []string{"MAX_BATCH", "from 1 to 10000"}},
		{"huge batch", map[string]string{"API_TOKENS": tokenA, "MAX_BATCH": "10001"}, []string{"MAX_BATCH", "from 1 to 10000"}},
		{"word batch", map[string]string{"API_TOKENS": tokenA, "MAX_BATCH": "big"}, []string{"MAX_BATCH"}},
		{"negative rate", map[string]string{"API_TOKENS": tokenA, "API_RATE_LIMIT": "-1"}, []string{"API_RATE_LIMIT", "0 for no limit"}},
		{"word rate", map[string]string{"API_TOKENS": tokenA, "API_RATE_LIMIT": "fast"}, []string{"API_RATE_LIMIT"}},
		{"NaN rate", map[string]string{"API_TOKENS": tokenA, "API_RATE_LIMIT": "NaN"}, []string{"API_RATE_LIMIT"}},
		{"infinite rate", map[string]string{"API_TOKENS": tokenA, "API_RATE_LIMIT": "+Inf"}, []string{"API_RATE_LIMIT"}},
		{"negative burst", map[string]string{"API_TOKENS": tokenA, "API_RATE_LIMIT": "5", "API_RATE_BURST": "-2"}, []string{"API_RATE_BURST", "1 or more"}},
		{"fractional burst", map[string]string{"API_TOKENS": tokenA, "API_RATE_LIMIT": "5", "API_RATE_BURST": "2.5"}, []string{"API_RATE_BURST"}},
		{"negative tenant rate", map[string]string{"API_TOKENS": tokenA, "API_TENANT_RATE_LIMIT": "-1"}, []string{"API_TENANT_RATE_LIMIT", "per tenant", "0 for no limit"}},
		{"NaN tenant rate", map[string]string{"API_TOKENS": tokenA, "API_TENANT_RATE_LIMIT": "NaN"}, []string{"API_TENANT_RATE_LIMIT"}},
		{"negative tenant burst", map[string]string{"API_TOKENS": tokenA, "API_TENANT_RATE_LIMIT": "5", "API_TENANT_RATE_BURST": "-2"}, []string{"API_TENANT_RATE_BURST", "1 or more"}},
		{"no failure limit", map[string]string{"API_TOKENS": tokenA, "API_AUTH_FAILURE_RATE": "0"}, []string{"API_AUTH_FAILURE_RATE", "more than 0"}},
		{"negative failure rate", map[string]string{"API_TOKENS": tokenA, "API_AUTH_FAILURE_RATE": "-1"}, []string{"API_AUTH_FAILURE_RATE"}},
		{"infinite failure rate", map[string]string{"API_TOKENS": tokenA, "API_AUTH_FAILURE_RATE": "+Inf"}, []string{"API_AUTH_FAILURE_RATE"}},
		{"zero failure burst", map[string]string{"API_TOKENS": tokenA, "API_AUTH_FAILURE_BURST": "0"}, []string{"API_AUTH_FAILURE_BURST", "1 or more"}},
		{"bad history dsn", map[string]string{"API_TOKENS": tokenA, "HISTORY_DSN": "mysql://root:s3cret@db/relay", "MANAGEMENT_URL": "off", "DELAY_BACKEND": "ttl"}, []string{"HISTORY_DSN"}},
		{"short seal key", map[string]string{"API_TOKENS": tokenA, "HISTORY_SEAL_KEY": "s3cret"}, []string{"HISTORY_SEAL_KEY", "openssl rand -base64 32"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			err := Run(context.Background(), func(k string) string { return tt.env[k] }, &logs)
			if err == nil {
				t.Fatal("Run started")
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Run = %v, want it to name %s", err, want)
				}
			}
			if strings.Contains(err.Error(), "short") || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error quotes a token: %v", err)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want Config
	}{
		{"tokens", map[string]string{"API_TOKENS": " " + tokenA + ", " + tokenB + ","}, Config{
			HTTPAddr: ":8080", Tokens: []string{tokenA, tokenB}, Auth: "on", MaxBodyBytes: 1 << 20, ShutdownTimeout: 15 * time.Second,
			Store: config.Store{DataDir: "data"}, HistoryRetention: 30 * 24 * time.Hour, IdempotencyTTL: 24 * time.Hour,
			DashboardMaxStreams: 2000, DashboardMaxStreamsPerClient: 20, MaxBatch: 500, AuthFailureRate: 1, AuthFailureBurst: 10,
		}},
		{"auth off", map[string]string{"API_AUTH": "off", "HTTP_ADDR": "127.0.0.1:0", "MAX_BODY_BYTES": "10", "SHUTDOWN_TIMEOUT": "2s"}, Config{
			HTTPAddr: "127.0.0.1:0", Auth: "off", MaxBodyBytes: 10, ShutdownTimeout: 2 * time.Second,
			Store: config.Store{DataDir: "data"}, HistoryRetention: 30 * 24 * time.Hour, IdempotencyTTL: 24 * time.Hour,
			DashboardMaxStreams: 2000, DashboardMaxStreamsPerClient: 20, MaxBatch: 500, AuthFailureRate: 1, AuthFailureBurst: 10,
		}},
		{"public dashboard", map[string]string{"API_TOKENS": tokenA, "DASHBOARD_PUBLIC": "true", "DASHBOARD_MAX_STREAMS": "50",
			"DASHBOARD_MAX_STREAMS_PER_CLIENT": "50"}, Config{
			HTTPAddr: ":8080", Tokens: []string{tokenA}, Auth: "on", MaxBodyBytes: 1 << 20, ShutdownTimeout: 15 * time.Second,
			Store: config.Store{DataDir: "data"}, HistoryRetention: 30 * 24 * time.Hour, IdempotencyTTL: 24 * time.Hour,
			DashboardPublic: true, DashboardMaxStreams: 50, DashboardMaxStreamsPerClient: 50, MaxBatch: 500, AuthFailureRate: 1, AuthFailureBurst: 10,
		}},
		{"rate limit and batch", map[string]string{"API_TOKENS": tokenA, "API_RATE_LIMIT": "10", "MAX_BATCH": "20"}, Config{
			HTTPAddr: ":8080", Tokens: []string{tokenA}, Auth: "on", MaxBodyBytes: 1 << 20, ShutdownTimeout: 15 * time.Second,
			Store: config.Store{DataDir: "data"}, HistoryRetention: 30 * 24 * time.Hour, IdempotencyTTL: 24 * time.Hour,
			DashboardMaxStreams: 2000, DashboardMaxStreamsPerClient: 20, MaxBatch: 20, RateLimit: 10, RateBurst: 20, AuthFailureRate: 1, AuthFailureBurst: 10,
		}},
		{"slow rate", map[string]string{"API_TOKENS": tokenA, "API_RATE_LIMIT": "0.2"}, Config{
			HTTPAddr: ":8080", Tokens: []string{tokenA}, Auth: "on", MaxBodyBytes: 1 << 20, ShutdownTimeout: 15 * time.Second,
			Store: config.Store{DataDir: "data"}, HistoryRetention: 30 * 24 * time.Hour, IdempotencyTTL: 24 * time.Hour,
			DashboardMaxStreams: 2000, DashboardMaxStreamsPerClient: 20, MaxBatch: 500, RateLimit: 0.2, RateBurst: 1, AuthFailureRate: 1, AuthFailureBurst: 10,
		}},
		{"rate and burst", map[string]string{"API_TOKENS": tokenA, "API_RATE_LIMIT": "2.5", "API_RATE_BURST": "3"}, Config{
			HTTPAddr: ":8080", Tokens: []string{tokenA}, Auth: "on", MaxBodyBytes: 1 << 20, ShutdownTimeout: 15 * time.Second,
			Store: config.Store{DataDir: "data"}, HistoryRetention: 30 * 24 * time.Hour, IdempotencyTTL: 24 * time.Hour,
			DashboardMaxStreams: 2000, DashboardMaxStreamsPerClient: 20, MaxBatch: 500, RateLimit: 2.5, RateBurst: 3, AuthFailureRate: 1, AuthFailureBurst: 10,
		}},
		{"tenant rate", map[string]string{"API_TOKENS": tokenA, "API_TENANT_RATE_LIMIT": "100"}, Config{
			HTTPAddr: ":8080", Tokens: []string{tokenA}, Auth: "on", MaxBodyBytes: 1 << 20, ShutdownTimeout: 15 * time.Second,
			Store: config.Store{DataDir: "data"}, HistoryRetention: 30 * 24 * time.Hour, IdempotencyTTL: 24 * time.Hour,
			DashboardMaxStreams: 2000, DashboardMaxStreamsPerClient: 20, MaxBatch: 500, TenantRateLimit: 100, TenantRateBurst: 200, AuthFailureRate: 1, AuthFailureBurst: 10,
		}},
		{"failure limit", map[string]string{"API_TOKENS": tokenA, "API_AUTH_FAILURE_RATE": "0.2", "API_AUTH_FAILURE_BURST": "3"}, Config{
			HTTPAddr: ":8080", Tokens: []string{tokenA}, Auth: "on", MaxBodyBytes: 1 << 20, ShutdownTimeout: 15 * time.Second,
			Store: config.Store{DataDir: "data"}, HistoryRetention: 30 * 24 * time.Hour, IdempotencyTTL: 24 * time.Hour,
			DashboardMaxStreams: 2000, DashboardMaxStreamsPerClient: 20, MaxBatch: 500, AuthFailureRate: 0.2, AuthFailureBurst: 3,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := LoadConfig(func(k string) string { return tt.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			tt.want.Broker = cfg.Broker
			if diff := cmp.Diff(tt.want, cfg); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			if masked := fmt.Sprint(config.Masked(cfg)); strings.Contains(masked, tokenA) {
				t.Errorf("the start-up log would show a token: %s", masked)
			}
		})
	}
}
