package worker

import (
	"context"
	"time"

	"github.com/relay-demo/relay/services/config"
	"github.com/relay-demo/relay/services/notification"
	"github.com/relay-demo/relay/webhooks"
)

// WebhookConfig is the webhook channel's environment.
type WebhookConfig struct {
	Secret  string        `env:"WEBHOOK_SECRET,required" secret:"true" help:"a Standard Webhooks secret such as whsec_ followed by base64"`
	Timeout time.Duration `env:"WEBHOOK_TIMEOUT" envDefault:"10s" help:"a duration such as 10s"`
	AllowConfig
}

type webhookSender struct{ s *webhooks.Sender }

func openWebhook(getenv func(string) string) (Sender, func() error, error) {
	var cfg WebhookConfig
	if err := config.Parse(getenv, &cfg); err != nil {
		return nil, nil, err
	}
	allow, err := allowList(getenv, cfg.AllowConfig)
	if err != nil {
		return nil, nil, err
	}
	signer, err := webhooks.NewSigner(cfg.Secret)
	if err != nil {
		return nil, nil, config.Invalid("WEBHOOK_SECRET", "***", "a Standard Webhooks secret: whsec_ followed by base64 ("+err.Error()+")")
	}
	return webhookSender{webhooks.NewSender(webhooks.Config{Timeout: cfg.Timeout, Allow: allow}, signer)}, discard, nil
}

func (w webhookSender) Send(ctx context.Context, n *notification.Notification) error {
	_, err := w.s.Send(ctx, webhooks.Request{URL: n.Webhook.URL, ID: n.ID, Payload: n.Webhook.Payload})
	return err
}
