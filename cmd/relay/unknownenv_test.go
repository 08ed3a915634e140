package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestWarnUnknownEnv(t *testing.T) {
	tests := []struct {
		args    string
		environ []string
		want    string
	}{
		{"all", []string{"RETRY_DELAY=5s", "PATH=/bin"}, "relay: warning: RETRY_DELAY is set, but relay reads no such variable: did you mean RETRY_DELAYS?\n"},
		{"worker email", []string{"SMTP_1_HOTS=mail", "SMTP_PROVIDERS=1"}, "did you mean SMTP_1_HOST?"},
		{"api", []string{"RELAY_TOKEN=x"}, "RELAY_TOKEN is set, but relay reads no such variable"},
		{"retrier", []string{"NOTIFICATION_TYPES=otp,receipt", "RETRY_OTP_DELAY=2s", "RETRY_RECEIPT_MAX=3"}, "did you mean RETRY_OTP_DELAYS?"},
		{"retrier", []string{"NOTIFICATION_TYPES=otp", "RETRY_OTP_DELAYS=2s", "RETRY_OTP_MAX=3", "RETRY_OTP_EXPIRY=1m"}, ""},
		// What another service reads is no slip.
		{"api", []string{"SMTP_HOST=mail", "SMS_2_URL=http://x", "FLAKY_SEED=3", "RELAY_API=http://x", "API_TOKEN=x", "DEMO_WEBHOOK_URL=http://x"}, ""},
		// Only services are warned: a tool or a help reads no setting.
		{"api --help", []string{"RETRY_DELAY=5s"}, ""},
		{"status", []string{"RETRY_DELAY=5s"}, ""},
		{"nope", []string{"RETRY_DELAY=5s"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.args+" "+strings.Join(tt.environ, " "), func(t *testing.T) {
			var stderr bytes.Buffer
			warnUnknownEnv(strings.Fields(tt.args), tt.environ, &stderr)
			got := stderr.String()
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Errorf("warnings:\n%s\nwant %q", got, tt.want)
			}
		})
	}
}

// TestEveryVariableIsKnown holds the list of variables relay reads to the
// tables docs/configuration.md shows: none of them draws a warning.
func TestEveryVariableIsKnown(t *testing.T) {
	known, err := knownVariables()
	if err != nil {
		t.Fatal(err)
	}
	var environ []string
	for _, k := range known {
		environ = append(environ, k+"=x")
	}
	var stderr bytes.Buffer
	warnUnknownEnv([]string{"all"}, environ, &stderr)
	if stderr.Len() > 0 {
		t.Errorf("relay's own variables drew warnings:\n%s", &stderr)
	}
	for _, k := range []string{"AMQP_URL", "RETRY_DELAYS", "SMTP_PROVIDERS", "SMTP_16_HOST", "SMS_1_URL", "API_TOKENS", "FLAKY_SEED", "WEBHOOK_SECRET"} {
		if !strings.Contains(" "+strings.Join(known, " ")+" ", " "+k+" ") {
			t.Errorf("%s is missing from the variables relay reads", k)
		}
	}
}
