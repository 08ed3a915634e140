package worker

import (
	"context"
	"encoding/json"
	"time"

	"github.com/relay-demo/relay/services/config"
	"github.com/relay-demo/relay/services/notification"
	"github.com/relay-demo/relay/webhooks"
)

// SMSConfig is the sms channel's environment: an HTTP gateway that takes
// {"to", "text"} as JSON, signed like a webhook.
type SMSConfig struct {
	URL     string        `env:"SMS_URL,required" help:"the gateway's http or https URL"`
	Secret  string        `env:"WEBHOOK_SECRET,required" secret:"true" help:"a Standard Webhooks secret such as whsec_ followed by base64"`
	Timeout time.Duration `env:"SMS_TIMEOUT" envDefault:"10s" help:"a duration such as 10s"`
	AllowConfig
}

// smsSender posts to the gateway with the webhook sender, so it shares
// its signing, address guard and error classification.
type smsSender struct {
	url string
	s   *webhooks.Sender
}

func openSMS(getenv func(string) string) (Sender, func() error, error) {
	var cfg SMSConfig
	if err := config.Parse(getenv, &cfg); err != nil {
		return nil, nil, err
	}
	allow, err := allowList(getenv, cfg.AllowConfig)
	if err != nil {
		return nil, nil, err
	}
	signer, err := webhooks.NewSigner(cfg.Secret)
	if err != nil {
		return nil, nil, config.Invalid("WEBHOOK_SECRET", "***", "a Standard Webhooks secret: whsec_ followed by base64")
	}
	return smsSender{cfg.URL, webhooks.NewSender(webhooks.Config{Timeout: cfg.Timeout, Allow: allow}, signer)}, discard, nil
}

func (s smsSender) Send(ctx context.Context, n *notification.Notification) error {
	body, err := json.Marshal(n.SMS)
	if err != nil {
		return err
	}
	_, err = s.s.Send(ctx, webhooks.Request{URL: s.url, ID: n.ID, Payload: body})
	return err
}
