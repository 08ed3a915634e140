package peers

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/riverqueue/river"
)

func noEnv(string) string { return "" }

func TestParseOptionsDefaults(t *testing.T) {
	o, err := parseOptions(nil, noEnv, io.Discard)
	if err != nil {
		t.Fatalf("parseOptions: %v", err)
	}
	if diff := cmp.Diff(DefaultWorkload, o.Workload); diff != "" {
		t.Errorf("workload (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(systemNames(), o.Systems); diff != "" {
		t.Errorf("systems (-want +got):\n%s", diff)
	}
	if o.AMQPURL != "amqp://guest:guest@localhost:5672/" || o.RedisAddr != "127.0.0.1:6379" || !strings.Contains(o.PostgresDSN, "127.0.0.1:5432/test") {
		t.Errorf("servers = %q, %q, %q; want the local ones", o.AMQPURL, o.RedisAddr, o.PostgresDSN)
	}
}

func TestParseOptionsEnvironment(t *testing.T) {
	env := map[string]string{"AMQP_URL": "amqp://u:p@broker/", "REDIS_ADDR": "redis:6379", "PEERS_PG_DSN": "postgres://pg/db"}
	o, err := parseOptions(nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatalf("parseOptions: %v", err)
	}
	if o.AMQPURL != env["AMQP_URL"] || o.RedisAddr != env["REDIS_ADDR"] || o.PostgresDSN != env["PEERS_PG_DSN"] {
		t.Errorf("servers = %q, %q, %q; want the environment's", o.AMQPURL, o.RedisAddr, o.PostgresDSN)
	}
}

func TestParseOptionsErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown system", []string{"--systems", "relay-stages,sidekiq"}, `unknown system "sidekiq"`},
		{"unknown child system", []string{"--system", "sidekiq"}, `unknown system "sidekiq"`},
		{"no jobs", []string{"--jobs", "0"}, "jobs 0"},
		{"stray argument", []string{"extra"}, "unexpected arguments"},
		{"River's poll under its cooldown", []string{"--river-fetch-poll", "5ms", "--river-fetch-cooldown", "10ms"}, "River refuses"},
		{"no timeout", []string{"--timeout", "0s"}, "--timeout"},
		{"a section that is no label", []string{"--section", "4.3 -->"}, `--section "4.3 -->"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseOptions(tt.args, noEnv, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("parseOptions(%q) = %v, want an error containing %q", tt.args, err, tt.want)
			}
		})
	}
}

// TestChildArgsRoundTrip checks that a child parses the parent's options
// back as they were, so every system runs the same workload.
func TestChildArgsRoundTrip(t *testing.T) {
	parent, err := parseOptions([]string{"--fail-rate", "0.25", "--delay", "150ms", "--max-retries", "4", "--concurrency", "3",
		"--timeout", "2m", "--settle", "1s", "--asynq-delayed-check", "20ms", "--river-fetch-poll", "30ms"}, noEnv, io.Discard)
	if err != nil {
		t.Fatalf("parseOptions: %v", err)
	}
	child, err := parseOptions(parent.childArgs("river", 123), noEnv, io.Discard)
	if err != nil {
		t.Fatalf("parseOptions(childArgs): %v", err)
	}
	want := parent
	want.System, want.Jobs = "river", 123
	if diff := cmp.Diff(want, child); diff != "" {
		t.Errorf("child options (-want +got):\n%s", diff)
	}
	if child.Delay != 150*time.Millisecond {
		t.Errorf("delay = %v", child.Delay)
	}
}

// TestParseOptionsPollDefaults holds the peers' polling settings to what
// their docs name for a low-latency workload: River's FetchCooldown at its
// least allowed value, asynq's checks at 10ms.
func TestParseOptionsPollDefaults(t *testing.T) {
	o, err := parseOptions(nil, noEnv, io.Discard)
	if err != nil {
		t.Fatalf("parseOptions: %v", err)
	}
	if o.RiverCooldown != river.FetchCooldownMin || o.RiverPoll != 10*time.Millisecond {
		t.Errorf("River's FetchCooldown, FetchPollInterval = %v, %v; want %v, 10ms", o.RiverCooldown, o.RiverPoll, river.FetchCooldownMin)
	}
	if o.AsynqDelayedCheck != 10*time.Millisecond || o.AsynqTaskCheck != 10*time.Millisecond {
		t.Errorf("asynq's checks = %v, %v; want 10ms", o.AsynqDelayedCheck, o.AsynqTaskCheck)
	}
	for _, tt := range []struct {
		cooldown time.Duration
		want     string
	}{
		{river.FetchCooldownMin, ", which is why it runs at its least allowed value here"},
		{10 * time.Millisecond, ""},
	} {
		if got := riverCooldownWhy(tt.cooldown); got != tt.want {
			t.Errorf("riverCooldownWhy(%v) = %q, want %q", tt.cooldown, got, tt.want)
		}
	}
}
