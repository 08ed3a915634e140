// Package worker is `relay worker <channel>`: it consumes one channel's
// queue through the retry pipeline and hands each notification to that
// channel's sender (internal/channel).
package worker

import (
	"context"
	"fmt"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

// Info names a channel a worker can deliver through.
type Info struct {
	Name    string
	Summary string
}

// Channels lists relay's own channels (channel.Builtin), in the order
// relay's help shows them.
func Channels() []Info {
	var out []Info
	for _, c := range channel.Builtin().All() {
		out = append(out, Info{Name: c.Name(), Summary: c.Summary()})
	}
	return out
}

// Env lists the configuration structs `relay worker <name>` reads from the
// environment: the worker's own, then its channel's (one of relay's own).
func Env(name string) ([]any, error) {
	c, err := channel.Builtin().Lookup(name)
	if err != nil {
		return nil, err
	}
	return append([]any{&Config{}}, c.Env()...), nil
}

// NumberedEnv lists the numbered variables `relay worker <name>` reads
// besides its Config structs': SMTP_1_HOST … for the email channel's
// mail servers, SMS_1_URL … for the sms channel's gateways.
func NumberedEnv(name string) []string {
	switch name {
	case channel.Email.Name():
		return channel.EmailProviderVariables()
	case channel.SMS.Name():
		return channel.SMSProviderVariables()
	}
	return nil
}

// Handler decodes a message and sends it. A message that does not decode,
// or belongs to another channel, is a permanent failure: parked once with
// the reason, never looped.
func Handler(name string, send channel.Sender) retry.HandlerFunc {
	return func(ctx context.Context, m *retry.Message) error {
		n, err := notification.Decode(m.Body)
		if err != nil {
			return retry.Permanent(err)
		}
		if n.Channel != name {
			return retry.Permanent(fmt.Errorf("a %q copy reached the %s worker", n.Channel, name))
		}
		if m.ID != "" && m.ID != n.ID {
			return retry.Permanent(fmt.Errorf("message-id %q does not match notification id %q", m.ID, n.ID))
		}
		// The tenant the copy's notification belongs to, whose deliveries
		// share a rate (channel.PaceTenants); none is the default tenant.
		n.Tenant = notification.TenantOf(m.Headers)
		// The retries so far pick the provider the attempt starts with;
		// the provider it went through goes into its event.
		ctx = channel.WithRetries(ctx, m.Retries)
		if on, _ := m.Headers[notification.HeaderOperator].(bool); on {
			ctx = channel.WithOperator(ctx)
		}
		var via channel.Via
		err = send(channel.WithVia(ctx, &via), n)
		m.Via = via.Name()
		// The endpoint a webhook copy went to, for the backlog by endpoint.
		m.Target = channel.WebhookEndpoint(n)
		return err
	}
}

// reporting hands the operational events h's sender sees happen (an
// endpoint disabled, a provider's circuit opened) to r.
func reporting(r channel.Reporter, h retry.Handler) retry.HandlerFunc {
	return func(ctx context.Context, m *retry.Message) error {
		return h.Handle(channel.WithReporter(ctx, r), m)
	}
}
