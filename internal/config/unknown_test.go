package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNearest(t *testing.T) {
	names := []string{"RETRY_DELAYS", "RETRY_MAX", "AMQP_URL", "SMTP_HOST", "SMTP_1_HOST", "status", "send", "api", "all"}
	tests := []struct {
		name   string
		want   string
		wantOK bool
	}{
		{"RETRY_DELAY", "RETRY_DELAYS", true},
		{"AMPQ_URL", "AMQP_URL", true},
		{"amqp_url", "AMQP_URL", true},
		{"SMTP_HOTS", "SMTP_HOST", true},
		{"SMTP_2_HOST", "SMTP_1_HOST", true},
		{"RETRY_MAXIMUM", "", false},
		{"stauts", "status", true},
		{"sned", "send", true},
		{"apo", "api", true},
		{"al", "", false},
		{"AMQP_URL", "", false},
		{"HOME", "", false},
		{"PATH", "", false},
		{"topolgy", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Nearest(tt.name, names)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("Nearest(%q) = %q, %v; want %q, %v", tt.name, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestUnknown(t *testing.T) {
	known := []string{"AMQP_URL", "RETRY_DELAYS", "RETRY_MAX", "HTTP_ADDR", "RELAY_API", "SMTP_HOST"}
	tests := []struct {
		name    string
		environ []string
		want    []string
	}{
		{"nothing amiss", []string{"AMQP_URL=amqp://x", "RETRY_DELAYS=1s", "RELAY_API=http://x", "PATH=/bin", "HOME=/root", "HOSTNAME=h", "LANG=C.UTF-8", "TERM=xterm", "SHLVL=1", "PWD=/", "HTTP_PROXY=http://p", "HTTPS_PROXY=http://p", "NO_PROXY=x"}, nil},
		{"a setting misspelled", []string{"RETRY_DELAY=5s", "AMQP_URL=amqp://x"},
			[]string{"RETRY_DELAY is set, but relay reads no such variable: did you mean RETRY_DELAYS?"}},
		{"a RELAY_ name relay does not read", []string{"RELAY_TOKEN=x"},
			[]string{"RELAY_TOKEN is set, but relay reads no such variable (`relay help env` lists them)"}},
		{"OpenTelemetry's own", []string{"OTEL_SERVICE_NAME=x", "OTEL_EXPORTER_OTLP_HEADERS=x"}, nil},
		{"several, in order", []string{"SMTP_HOTS=x", "HTTP_ADR=:1", "RETRY_DELAY=5s"}, []string{
			"HTTP_ADR is set, but relay reads no such variable: did you mean HTTP_ADDR?",
			"RETRY_DELAY is set, but relay reads no such variable: did you mean RETRY_DELAYS?",
			"SMTP_HOTS is set, but relay reads no such variable: did you mean SMTP_HOST?",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Unknown(tt.environ, known)); diff != "" {
				t.Errorf("Unknown (-want +got):\n%s", diff)
			}
		})
	}
}
