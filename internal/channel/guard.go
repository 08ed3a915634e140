package channel

import (
	"fmt"
	"net/netip"

	"github.com/relay-demo/relay/internal/config"
	"github.com/relay-demo/relay/webhooks"
)

// retiredAllowPrivate is the variable WEBHOOK_ALLOW_CIDRS replaced. It
// turned the address guard off entirely; a deployment that still sets it
// is stopped rather than silently guarded, which would break its
// deliveries, or silently open.
const retiredAllowPrivate = "WEBHOOK_ALLOW_PRIVATE"

// AllowConfig is the address guard's environment, shared by the channels
// that deliver over HTTP (webhook and sms).
type AllowConfig struct {
	AllowCIDRs string `env:"WEBHOOK_ALLOW_CIDRS" help:"a comma-separated list of CIDRs such as 10.1.0.0/16,fd00:1::/64: the networks webhooks and SMS may reach although they are not public (empty: none, so loopback, private, link-local and every other special-purpose address is refused)"`
}

// allowList returns the networks the address guard lets through, from
// WEBHOOK_ALLOW_CIDRS as parsed into cfg (see webhooks.ParseAllowList). It
// refuses to run while the retired WEBHOOK_ALLOW_PRIVATE is set, whatever
// its value.
func allowList(getenv func(string) string, cfg AllowConfig) ([]netip.Prefix, error) {
	if v := getenv(retiredAllowPrivate); v != "" {
		return nil, fmt.Errorf("configuration: %s=%q is no longer read: it was replaced by WEBHOOK_ALLOW_CIDRS, "+
			"the networks webhooks may reach besides the public internet; for loopback, unset %s and set "+
			"WEBHOOK_ALLOW_CIDRS=127.0.0.0/8,::1/128", retiredAllowPrivate, v, retiredAllowPrivate)
	}
	allow, err := webhooks.ParseAllowList(cfg.AllowCIDRs)
	if err != nil {
		return nil, config.Invalid("WEBHOOK_ALLOW_CIDRS", cfg.AllowCIDRs, "a comma-separated list of CIDRs such as 10.1.0.0/16,fd00:1::/64 ("+err.Error()+")")
	}
	return allow, nil
}

// signer reads the secret WEBHOOK_SECRET holds, which must be fit to sign
// with (webhooks.CheckSecret): whsec_ followed by the base64 of a key of at
// least webhooks.MinKeyBytes bytes. Its error names the variable and never
// quotes the secret.
func signer(secret string) (*webhooks.Signer, error) {
	err := webhooks.CheckSecret(secret)
	var s *webhooks.Signer
	if err == nil {
		s, err = webhooks.NewSigner(secret)
	}
	if err != nil {
		return nil, config.Invalid("WEBHOOK_SECRET", "***", fmt.Sprintf("a Standard Webhooks secret: whsec_ followed by the base64 of a random key of %d bytes or more (%v)", webhooks.MinKeyBytes, err))
	}
	return s, nil
}
