package flaky

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestLoadConfigDefaults(t *testing.T) {
	got, err := LoadConfig(func(string) string { return "" })
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	want := Config{
		HTTPAddr:          ":9090",
		SMTPAddr:          ":2525",
		EmailScenario:     Healthy,
		WebhookScenario:   Healthy,
		Rate:              0.3,
		Seed:              1,
		Outage:            10 * time.Second,
		Latency:           15 * time.Second,
		RetryAfter:        2 * time.Second,
		RateLimitAttempts: 2,
		Limit:             50,
		PermanentMatch:    "fail",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

func TestLoadConfig(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		// wantErr lists fragments the error must contain; none means no
		// error.
		wantErr []string
	}{
		{"every scenario", map[string]string{"FLAKY_EMAIL_SCENARIO": "rate-limited", "FLAKY_WEBHOOK_SCENARIO": "permanent"}, nil},
		{"rate bounds", map[string]string{"FLAKY_RATE": "1", "FLAKY_SEED": "0"}, nil},
		{"valid secret", map[string]string{"WEBHOOK_SECRET": "whsec_c2VjcmV0LWtleS1mb3ItdGVzdHMtb2YtZmxha3ktMDE="}, nil},
		{"unknown email scenario", map[string]string{"FLAKY_EMAIL_SCENARIO": "broken"},
			[]string{"FLAKY_EMAIL_SCENARIO", `"broken"`, "healthy, flaky, outage, rate-limited, slow, permanent"}},
		{"unknown webhook scenario", map[string]string{"FLAKY_WEBHOOK_SCENARIO": "Healthy"},
			[]string{"FLAKY_WEBHOOK_SCENARIO", `"Healthy"`, "healthy, flaky"}},
		{"rate above 1", map[string]string{"FLAKY_RATE": "1.5"}, []string{"FLAKY_RATE", "between 0 and 1"}},
		{"rate below 0", map[string]string{"FLAKY_RATE": "-0.1"}, []string{"FLAKY_RATE", "between 0 and 1"}},
		{"rate not a number", map[string]string{"FLAKY_RATE": "often"}, []string{"FLAKY_RATE", `"often"`, "between 0 and 1"}},
		{"bad duration", map[string]string{"FLAKY_OUTAGE": "ten seconds"}, []string{"FLAKY_OUTAGE", "duration"}},
		{"negative latency", map[string]string{"FLAKY_LATENCY": "-1s"}, []string{"FLAKY_LATENCY", "duration"}},
		{"zero retry after", map[string]string{"FLAKY_RETRY_AFTER": "0s"}, []string{"FLAKY_RETRY_AFTER", "positive duration"}},
		{"no rate limited attempts", map[string]string{"FLAKY_RATE_LIMIT_ATTEMPTS": "0"}, []string{"FLAKY_RATE_LIMIT_ATTEMPTS", "1 or more"}},
		{"secret without prefix", map[string]string{"WEBHOOK_SECRET": "plain-text"}, []string{"WEBHOOK_SECRET", "whsec_<base64>"}},
		{"key too short", map[string]string{"WEBHOOK_SECRET": "whsec_c2VjcmV0LWtleS1mb3ItdGVzdHM="}, []string{"WEBHOOK_SECRET", "24 bytes or more"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadConfig(func(k string) string { return tt.env[k] })
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("LoadConfig: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("LoadConfig: no error, want one mentioning %q", tt.wantErr)
			}
			for _, frag := range tt.wantErr {
				if !strings.Contains(err.Error(), frag) {
					t.Errorf("error %q does not mention %q", err, frag)
				}
			}
		})
	}
}
