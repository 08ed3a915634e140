package channel

import (
	"context"
	"fmt"
	"strconv"

	"github.com/relay-demo/relay/internal/config"
	"github.com/relay-demo/relay/webhooks"
)

// OperatorConfig is where operational events go besides the events
// exchange: the operator webhook, a URL of the operator's that receives
// each event signed with a secret of its own. Both empty: no operator
// webhook.
type OperatorConfig struct {
	URL    string `env:"OPERATOR_WEBHOOK_URL" help:"an http or https URL that receives each operational event (copy.parked, endpoint.disabled, endpoint.enabled, provider.circuit_opened) as a signed webhook, through the webhook queue; empty for none"`
	Secret string `env:"OPERATOR_WEBHOOK_SECRET" secret:"true" help:"the operator webhook's own Standard Webhooks secret, whsec_ followed by base64, never the same as WEBHOOK_SECRET or an SMS gateway's; required with OPERATOR_WEBHOOK_URL"`
}

// On reports whether an operator webhook is configured.
func (c OperatorConfig) On() bool { return c.URL != "" }

// Check validates c against the other secrets in getenv: the operator
// secret must be fit to sign and a key of its own, since every holder of
// another relay secret could otherwise forge operator webhooks.
func (c OperatorConfig) Check(getenv func(string) string) error {
	switch {
	case c.URL == "" && c.Secret == "":
		return nil
	case c.URL == "":
		return fmt.Errorf("configuration: OPERATOR_WEBHOOK_URL is required with OPERATOR_WEBHOOK_SECRET: the URL the operational events are posted to")
	case c.Secret == "":
		return fmt.Errorf("configuration: OPERATOR_WEBHOOK_SECRET is required with OPERATOR_WEBHOOK_URL: the operator webhook's own Standard Webhooks secret, whsec_ followed by the base64 of a random key of %d bytes or more", webhooks.MinKeyBytes)
	}
	if err := checkGatewayURL("OPERATOR_WEBHOOK_URL", c.URL); err != nil {
		return err
	}
	if err := webhooks.CheckSecret(c.Secret); err != nil {
		return config.Invalid("OPERATOR_WEBHOOK_SECRET", "***", fmt.Sprintf("a Standard Webhooks secret: whsec_ followed by the base64 of a random key of %d bytes or more (%v)", webhooks.MinKeyBytes, err))
	}
	others := []string{"WEBHOOK_SECRET", "SMS_SECRET"}
	n, _ := strconv.Atoi(getenv("SMS_PROVIDERS"))
	for i := 1; i <= min(n, 100); i++ {
		others = append(others, fmt.Sprintf("SMS_%d_SECRET", i))
	}
	for _, key := range others {
		if other := getenv(key); other != "" && webhooks.SameKey(c.Secret, other) {
			return fmt.Errorf("configuration: OPERATOR_WEBHOOK_SECRET is the same key as %s: whoever holds %s could sign operator webhooks; give the operator webhook a key of its own (echo \"whsec_$(head -c 32 /dev/urandom | base64)\")", key, key)
		}
	}
	return nil
}

// signer is the operator webhook's signer; c must have passed Check.
func (c OperatorConfig) signer() (*webhooks.Signer, error) {
	if c.Secret == "" {
		return nil, nil
	}
	s, err := webhooks.NewSigner(c.Secret)
	if err != nil {
		return nil, config.Invalid("OPERATOR_WEBHOOK_SECRET", "***", "a Standard Webhooks secret")
	}
	return s, nil
}

type operatorKey struct{}

// WithOperator returns ctx marking the copy being sent as one that
// carries an operational event to the operator webhook (its message had
// notification.HeaderOperator): it is signed with OPERATOR_WEBHOOK_SECRET.
func WithOperator(ctx context.Context) context.Context {
	return context.WithValue(ctx, operatorKey{}, true)
}

// isOperator reports whether ctx carries WithOperator's mark.
func isOperator(ctx context.Context) bool {
	on, _ := ctx.Value(operatorKey{}).(bool)
	return on
}
