package channel

import (
	"strings"
	"testing"

	"github.com/relay-demo/relay/webhooks"
)

func TestOperatorConfigCheck(t *testing.T) {
	op, hook, sms, sms2 := webhooks.NewSecret(), webhooks.NewSecret(), webhooks.NewSecret(), webhooks.NewSecret()
	env := map[string]string{"WEBHOOK_SECRET": hook, "SMS_SECRET": sms, "SMS_PROVIDERS": "2", "SMS_2_SECRET": sms2}
	tests := []struct {
		name    string
		cfg     OperatorConfig
		wantErr string // a part of the error; "" for none
	}{
		{"none", OperatorConfig{}, ""},
		{"both", OperatorConfig{URL: "https://ops.example.com/hook", Secret: op}, ""},
		{"no secret", OperatorConfig{URL: "https://ops.example.com/hook"}, "OPERATOR_WEBHOOK_SECRET is required"},
		{"no url", OperatorConfig{Secret: op}, "OPERATOR_WEBHOOK_URL is required"},
		{"not a url", OperatorConfig{URL: "ops.example.com", Secret: op}, "OPERATOR_WEBHOOK_URL"},
		{"not a secret", OperatorConfig{URL: "https://ops.example.com/hook", Secret: "hunter2"}, "OPERATOR_WEBHOOK_SECRET"},
		{"the webhook secret", OperatorConfig{URL: "https://ops.example.com/hook", Secret: hook}, "same key as WEBHOOK_SECRET"},
		{"the sms secret", OperatorConfig{URL: "https://ops.example.com/hook", Secret: sms}, "same key as SMS_SECRET"},
		{"a numbered sms secret", OperatorConfig{URL: "https://ops.example.com/hook", Secret: sms2}, "same key as SMS_2_SECRET"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Check(func(k string) string { return env[k] })
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Check: %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Check: %v, want an error with %q", err, tt.wantErr)
			case err != nil && strings.Contains(err.Error(), tt.cfg.Secret) && tt.cfg.Secret != "":
				t.Errorf("Check's error quotes the secret: %v", err)
			}
		})
	}
}
