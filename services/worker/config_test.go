package worker_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/relay-demo/relay/services/worker"
)

func TestWorkerRejectsBadConfig(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	tests := []struct {
		name    string
		channel string
		env     map[string]string
		want    string
	}{
		{"unknown channel", "pigeon", nil, "unknown channel"},
		{"webhook without secret", "webhook", nil, "WEBHOOK_SECRET"},
		{"webhook secret not base64", "webhook", map[string]string{"WEBHOOK_SECRET": "whsec_???"}, "WEBHOOK_SECRET"},
		{"bad tls mode", "email", map[string]string{"SMTP_TLS": "maybe"}, "SMTP_TLS"},
		{"bad port", "email", map[string]string{"SMTP_PORT": "smtp"}, "SMTP_PORT"},
		{"bad concurrency", "email", map[string]string{"CONCURRENCY": "0"}, "CONCURRENCY"},
		{"bad timeout", "webhook", map[string]string{"WEBHOOK_SECRET": secret, "WEBHOOK_TIMEOUT": "soon"}, "WEBHOOK_TIMEOUT"},
		{"bad schedule", "email", map[string]string{"RETRY_DELAYS": "1s,later"}, "RETRY_DELAYS"},
		{"webhook with the retired allow-private", "webhook", map[string]string{"WEBHOOK_SECRET": secret, "WEBHOOK_ALLOW_PRIVATE": "true"}, "replaced by WEBHOOK_ALLOW_CIDRS"},
		{"sms with the retired allow-private", "sms", map[string]string{"SMS_SECRET": secret, "SMS_URL": "https://sms.example.com/", "WEBHOOK_ALLOW_PRIVATE": "false"}, "replaced by WEBHOOK_ALLOW_CIDRS"},
		{"webhook allow-list malformed", "webhook", map[string]string{"WEBHOOK_SECRET": secret, "WEBHOOK_ALLOW_CIDRS": "127.0.0.0/8,loopback"}, "WEBHOOK_ALLOW_CIDRS"},
		{"webhook allow-list with metadata", "webhook", map[string]string{"WEBHOOK_SECRET": secret, "WEBHOOK_ALLOW_CIDRS": "169.254.169.254/32"}, "WEBHOOK_ALLOW_CIDRS"},
		{"sms without its own secret", "sms", map[string]string{"WEBHOOK_SECRET": secret, "SMS_URL": "https://sms.example.com/"}, "SMS_SECRET is required"},
		{"sms signing with the webhook secret", "sms", map[string]string{"WEBHOOK_SECRET": secret, "SMS_SECRET": secret, "SMS_URL": "https://sms.example.com/"},
			"SMS_SECRET is the same key as WEBHOOK_SECRET"},
		{"sms allow-list of everything", "sms", map[string]string{"SMS_SECRET": secret, "SMS_URL": "https://sms.example.com/", "WEBHOOK_ALLOW_CIDRS": "::/0"}, "WEBHOOK_ALLOW_CIDRS"},
		{"webhook with another database", "webhook", map[string]string{"WEBHOOK_SECRET": secret, "HISTORY_DSN": "mysql://relay:s3cret@db:3306/relay"}, "HISTORY_DSN"},
		{"webhook with a blank data dir", "webhook", map[string]string{"WEBHOOK_SECRET": secret, "DATA_DIR": "  "}, "DATA_DIR"},
		{"a limit needs a store", "email", map[string]string{"SMTP_RATE": "5", "DATA_DIR": " "}, `DATA_DIR=" "`},
		{"negative tenant rate", "webhook", map[string]string{"WEBHOOK_SECRET": secret, "TENANT_DELIVERY_RATE": "-1"}, "TENANT_DELIVERY_RATE"},
		{"tenant burst of none", "sms", map[string]string{"TENANT_DELIVERY_RATE": "5", "TENANT_DELIVERY_BURST": "0"}, "TENANT_DELIVERY_BURST"},
		{"short seal key", "webhook", map[string]string{"WEBHOOK_SECRET": secret, "HISTORY_SEAL_KEY": "s3cret"}, "HISTORY_SEAL_KEY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := worker.Run(context.Background(), tt.channel, func(k string) string { return tt.env[k] }, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run = %v, want an error naming %s", err, tt.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error shows a secret: %v", err)
			}
		})
	}
}
