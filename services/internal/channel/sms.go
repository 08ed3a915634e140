package channel

import (
	"context"
	"encoding/json"
	"regexp"
	"time"

	"github.com/relay-demo/relay/services/internal/config"
	"github.com/relay-demo/relay/webhooks"
)

// MaxSMSText bounds a text message: ten concatenated segments.
const MaxSMSText = 1600

// SMSPart is the text-message part: To in E.164 form, such as
// +15551234567.
type SMSPart struct {
	To   string `json:"to"`
	Text string `json:"text"`
}

// SMSConfig is the sms channel's environment: an HTTP gateway that takes
// {"to", "text"} as JSON, signed like a webhook.
type SMSConfig struct {
	URL     string        `env:"SMS_URL,required" help:"the gateway's http or https URL"`
	Secret  string        `env:"WEBHOOK_SECRET,required" secret:"true" help:"a Standard Webhooks secret such as whsec_ followed by base64"`
	Timeout time.Duration `env:"SMS_TIMEOUT" envDefault:"10s" help:"a duration such as 10s"`
	AllowConfig
}

// e164 is an international phone number: a plus, then up to 15 digits.
var e164 = regexp.MustCompile(`^\+[1-9][0-9]{1,14}$`)

// SMS posts to an HTTP SMS gateway with the webhook sender, so it shares
// its signing, address guard and error classification.
var SMS = Define(Spec[SMSPart]{
	Name:    "sms",
	Summary: "deliver the sms queue to an HTTP SMS gateway",
	Check: func(s *SMSPart, bad func(field, format string, args ...any)) {
		if !e164.MatchString(s.To) {
			bad("to", "%q is not an E.164 number such as +15551234567", s.To)
		}
		if s.Text == "" || len(s.Text) > MaxSMSText {
			bad("text", "a text of 1 to %d bytes is required", MaxSMSText)
		}
	},
	Recipients: func(p *SMSPart) []string { return []string{p.To} },
	Schema: `{
	  "type": "object",
	  "required": ["to", "text"],
	  "additionalProperties": false,
	  "properties": {
	    "to": {"type": "string", "pattern": "^\\+[1-9][0-9]{1,14}$", "description": "E.164 number, e.g. +15551234567.", "examples": ["+15551234567"]},
	    "text": {"type": "string", "minLength": 1, "maxLength": 1600}
	  }
	}`,
	Env: []any{&SMSConfig{}},
	Open: func(getenv func(string) string) (Send[SMSPart], func() error, error) {
		var cfg SMSConfig
		if err := config.Parse(getenv, &cfg); err != nil {
			return nil, nil, err
		}
		allow, err := allowList(getenv, cfg.AllowConfig)
		if err != nil {
			return nil, nil, err
		}
		sig, err := signer(cfg.Secret)
		if err != nil {
			return nil, nil, err
		}
		s := webhooks.NewSender(webhooks.Config{Timeout: cfg.Timeout, Allow: allow}, sig)
		return func(ctx context.Context, id string, p *SMSPart) error {
			body, err := json.Marshal(p)
			if err != nil {
				return err
			}
			_, err = s.Send(ctx, webhooks.Request{URL: cfg.URL, ID: id, Payload: body})
			return err
		}, nothing, nil
	},
	Demo: func(d Downstreams) map[string]string {
		return map[string]string{"SMS_URL": d.HTTP + "/webhooks/sms"}
	},
})
