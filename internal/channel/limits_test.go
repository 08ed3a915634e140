package channel

import (
	"strings"
	"testing"
)

func TestLimitNotice(t *testing.T) {
	tests := []struct {
		name, channel string
		env           map[string]string
		want          string // a part of the notice; empty for none
	}{
		{"no limit", "email", map[string]string{}, ""},
		{"a limit, SQLite by default", "email", map[string]string{"SMTP_RATE": "20"}, "SMTP_RATE counted in the SQLite store data/history.db"},
		{"a provider's limit", "email", map[string]string{"SMTP_PROVIDERS": "2", "SMTP_2_RATE": "5", "DATA_DIR": "/var/relay"}, "SMTP_2_RATE counted in the SQLite store /var/relay/history.db"},
		{"a limit on PostgreSQL", "email", map[string]string{"SMTP_RATE": "20", "HISTORY_DSN": "postgres://relay@db/relay"}, ""},
		{"an sms gateway's limit", "sms", map[string]string{"SMS_RATE": "1"}, "SMS_RATE"},
		{"the endpoints' limit", "webhook", map[string]string{"WEBHOOK_ENDPOINT_RATE": "10"}, "WEBHOOK_ENDPOINT_RATE"},
		{"a limit of 0 is none", "email", map[string]string{"SMTP_RATE": "0"}, ""},
		{"another channel", "push", map[string]string{"SMTP_RATE": "20"}, ""},
		{"the tenants' limit, any channel", "push", map[string]string{"TENANT_DELIVERY_RATE": "5"}, "TENANT_DELIVERY_RATE counted in the SQLite store"},
		{"the tenants' limit on PostgreSQL", "sms", map[string]string{"TENANT_DELIVERY_RATE": "5", "HISTORY_DSN": "postgres://relay@db/relay"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := LimitNotice(tt.channel, func(k string) string { return tt.env[k] })
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("LimitNotice = %q, want %q", got, tt.want)
			}
		})
	}
}
