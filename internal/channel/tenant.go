package channel

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/relay-demo/relay/internal/notification"
)

// TenantRate is the limit on each tenant's deliveries, every channel's
// together, across every worker replica: the copies of one tenant's
// notifications (notification.HeaderTenant; none is the default tenant)
// share its slots, through the history store, as an endpoint's or a mail
// server's copies share theirs.
type TenantRate struct {
	Rate  float64 `env:"TENANT_DELIVERY_RATE" envDefault:"0" help:"deliveries a second each tenant may make, every channel's together, counted across every worker replica (shared through the history store); a copy over it is deferred, spending no retry; 0 for no limit"`
	Burst int     `env:"TENANT_DELIVERY_BURST" envDefault:"1" help:"how many deliveries of one tenant may go at once within TENANT_DELIVERY_RATE, 1 or more"`
}

// Check says what is wrong with the limit, naming the variable.
func (t TenantRate) Check() error {
	_, err := parseRate("TENANT_DELIVERY_", t.Rate, t.Burst)
	return err
}

// tenantKey is the key of tenant's limit in the store: no channel's key
// (a channel name, ':' and what it limits) starts so.
func tenantKey(tenant string) string { return "tenant/" + tenant }

// tenantTarget names tenant in a deferral.
func tenantTarget(tenant string) string {
	if tenant == "" {
		return "the default tenant"
	}
	return fmt.Sprintf("tenant %q", tenant)
}

// PaceTenants returns send held to limit's rate per tenant (n.Tenant) for
// the copies of channel c, its slots shared through the store st: a copy
// whose slot is near is sent after waiting for it, one whose slot is
// further off is deferred (a *Deferred, which spends no retry) and given
// its slot when it comes back. The operational events relay posts to the
// operator (WithOperator) are nobody's tenant's and are not held. With no
// limit it returns send.
//
// Every channel's copies pass through here before their own sender
// touches them, so a tenant's slot is taken before any other limit (an
// endpoint's cap, a provider's rate) is asked; a copy those defer has
// spent its tenant's slot, and takes another when it comes back.
func PaceTenants(c Channel, limit TenantRate, st Store, send Sender, now func() time.Time) Sender {
	rate, err := parseRate("TENANT_DELIVERY_", limit.Rate, max(limit.Burst, 1))
	if err != nil || rate == nil {
		return send // no limit; a bad one is refused at start by Check
	}
	return func(ctx context.Context, n *notification.Notification) error {
		if isOperator(ctx) {
			return send(ctx, n)
		}
		s, err := st(ctx)
		if err != nil {
			return fmt.Errorf("%s: rate limit: %w", tenantTarget(n.Tenant), err)
		}
		// The same copy comes back with the same ticket: its channel,
		// its notification and whom it goes to (email and sms send one
		// copy per recipient).
		ticket := c.Name() + "/" + n.ID + "/" + strings.Join(c.RecipientsOf(n), ",")
		if err := paceRate(ctx, s, tenantKey(n.Tenant), ticket, *rate, now(), tenantTarget(n.Tenant)); err != nil {
			return err
		}
		return send(ctx, n)
	}
}
