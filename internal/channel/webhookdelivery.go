package channel

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/relay-demo/relay/internal/config"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/webhooks"
)

// ReasonEndpointDisabled starts the error of a delivery to a disabled
// endpoint, which is parked at once (a permanent failure).
const ReasonEndpointDisabled = "endpoint-disabled"

// webhookSender delivers webhook parts: to a bare URL, signed with
// WEBHOOK_SECRET, or to an endpoint, resolved from the store and signed
// with its own secrets. Every target is isolated (see isolation): an
// endpoint by its breaker and cap, a bare URL's host by the same cap.
type webhookSender struct {
	send *webhooks.Sender
	// rate limits each endpoint's deliveries; nil for no limit.
	rate *store.Rate
	iso  *isolation
	// hosts caps the deliveries in flight to each host of a bare URL
	// (WEBHOOK_HOST_CONCURRENCY).
	hosts        *isolation
	endpoints    *endpoints
	disableAfter time.Duration
	now          func() time.Time
	// operatorURL and operator are the operator webhook's URL and
	// signer (OPERATOR_WEBHOOK_URL, OPERATOR_WEBHOOK_SECRET); nil
	// operator: none.
	operatorURL string
	operator    *webhooks.Signer
}

func newWebhookSender(s *webhooks.Sender, cfg EndpointConfig, open func(context.Context) (endpointStore, error),
	ttl time.Duration, now func() time.Time) *webhookSender {
	rate, _ := parseRate("WEBHOOK_ENDPOINT_", cfg.Rate, max(cfg.Burst, 1)) // checked by check
	return &webhookSender{
		send:         s,
		rate:         rate,
		iso:          newIsolation(cfg.Failures, cfg.Cooldown, cfg.Concurrency, now),
		hosts:        newHostCaps(cmp.Or(cfg.HostConcurrency, cfg.Concurrency), now),
		endpoints:    newEndpoints(open, ttl, now),
		disableAfter: cfg.DisableAfter,
		now:          now,
	}
}

// check validates the settings the variables' types alone do not.
func (c EndpointConfig) check() error {
	switch {
	case c.Concurrency < 1:
		return config.Invalid("WEBHOOK_ENDPOINT_CONCURRENCY", fmt.Sprint(c.Concurrency), "deliveries in flight to one endpoint, 1 or more")
	case c.HostConcurrency < 0:
		return config.Invalid("WEBHOOK_HOST_CONCURRENCY", fmt.Sprint(c.HostConcurrency), "deliveries in flight to one host of bare webhook URLs, 1 or more; 0 for WEBHOOK_ENDPOINT_CONCURRENCY")
	case c.Failures < 0:
		return config.Invalid("WEBHOOK_BREAKER_FAILURES", fmt.Sprint(c.Failures), "transient failures in a row that open the circuit of an endpoint, 1 or more; 0 for no circuit breaker")
	case c.Cooldown <= 0:
		return config.Invalid("WEBHOOK_BREAKER_COOLDOWN", c.Cooldown.String(), "a positive duration such as 5s")
	case c.DisableAfter < 0:
		return config.Invalid("WEBHOOK_DISABLE_AFTER", c.DisableAfter.String(), "a duration such as 120h (5 days), or 0 for never")
	}
	_, err := parseRate("WEBHOOK_ENDPOINT_", c.Rate, c.Burst)
	return err
}

// deliver sends one webhook part of notification id.
func (w *webhookSender) deliver(ctx context.Context, id string, p *WebhookPart) error {
	var signers []*webhooks.Signer
	switch {
	case isOperator(ctx):
		// An operational event: signed with the operator's own secret,
		// and only ever to the operator's URL.
		switch {
		case w.operator == nil:
			return retry.Permanent(errors.New("an operator webhook reached a worker without OPERATOR_WEBHOOK_URL and OPERATOR_WEBHOOK_SECRET"))
		case p.Endpoint != "" || p.URL != w.operatorURL:
			return retry.Permanent(errors.New("an operator webhook names another URL than OPERATOR_WEBHOOK_URL"))
		}
		signers = []*webhooks.Signer{w.operator}
	case p.Endpoint != "":
		return w.deliverToEndpoint(ctx, id, p)
	}
	// A bare URL, the demo's form, has no breaker: its failures are
	// retried on the schedule. Its host has the cap an endpoint has, so
	// a slow host's copies beyond it go round the delay backend instead
	// of holding every worker.
	host, ok := bareHost(p.URL)
	if !ok {
		// Send refuses it for good, and says why.
		_, err := w.send.Send(ctx, webhooks.Request{URL: p.URL, ID: id, Payload: p.Payload, Signers: signers})
		return err
	}
	done, _, err := w.hosts.admit(ctx, "host "+host, id, nil)
	if err != nil {
		return err
	}
	_, err = w.send.Send(ctx, webhooks.Request{URL: p.URL, ID: id, Payload: p.Payload, Signers: signers})
	done(ctx, err)
	return err
}

// newHostCaps is the isolation of bare URLs' hosts: a cap of limit
// deliveries in flight to each, no breaker, and nothing kept of a host
// while no delivery to it is in flight.
func newHostCaps(limit int, now func() time.Time) *isolation {
	iso := newIsolation(0, time.Second, limit, now)
	iso.forgetIdle = true
	return iso
}

// bareHost is the host a bare URL's cap is kept for: its name in lower
// case, without a trailing dot or the port, so that spellings of one host
// share one cap.
func bareHost(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return "", false
	}
	return strings.TrimSuffix(strings.ToLower(u.Hostname()), "."), true
}

func (w *webhookSender) deliverToEndpoint(ctx context.Context, id string, p *WebhookPart) error {
	ep, signers, err := w.endpoints.get(ctx, p.Endpoint)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return retry.Permanent(fmt.Errorf("endpoint %s does not exist: it was deleted, or this worker reads another history store than the API (HISTORY_DSN, DATA_DIR)", p.Endpoint))
	case err != nil:
		return err
	case !ep.Enabled:
		return disabled(ep.ID, ep.DisabledReason)
	}
	// Checked again at each delivery, as at its creation: the address
	// guard judges where the host leads when the sender dials it.
	if problem := CheckEndpointURL(ep.URL); problem != "" {
		return retry.Permanent(fmt.Errorf("endpoint %s: %s", ep.ID, problem))
	}
	if len(signers) == 0 {
		// Never the sender's own secret: that is WEBHOOK_SECRET's.
		return retry.Permanent(fmt.Errorf("endpoint %s has no secret to sign with", ep.ID))
	}
	target := "endpoint " + ep.ID
	done, rec, err := w.iso.admit(ctx, target, id, ep.ResetAt)
	if rec != nil {
		_, _ = w.endpoints.record(ctx, ep.ID, *rec)
	}
	if err != nil {
		// Deferred: while the circuit is open, the endpoint is failing
		// still, as far as this worker knows.
		var d *Deferred
		if errors.As(err, &d) && !d.failingSince.IsZero() {
			if derr := w.disableIfTooLong(ctx, ep, earliest(d.failingSince, ep.Circuit.FailingSince), d.lastErr); derr != nil {
				return derr
			}
		}
		return err
	}
	if w.rate != nil {
		st, err := w.endpoints.open(ctx)
		if err == nil {
			err = paceRate(ctx, st, "webhook:"+ep.ID, id, *w.rate, w.now(), target)
		}
		if err != nil {
			done(ctx, context.Canceled) // not sent: nothing learnt of the endpoint
			return err
		}
	}
	_, err = w.send.Send(ctx, webhooks.Request{URL: ep.URL, ID: id, Payload: p.Payload, Signers: signers})
	out := done(ctx, err)
	rec = out.change
	if err == nil && rec == nil && ep.Circuit.FailingSince != nil {
		// Another worker saw this endpoint fail and said so; this
		// delivery says it is back.
		now := w.now()
		rec = &store.CircuitChange{State: store.CircuitClosed, Since: now, At: now}
	}
	stored := ep.Circuit.FailingSince
	if rec != nil {
		if c, rerr := w.endpoints.record(ctx, ep.ID, *rec); rerr == nil {
			stored = c.FailingSince
		}
	}
	if out.transient {
		if derr := w.disableIfTooLong(ctx, ep, earliest(out.failingSince, stored), err.Error()); derr != nil {
			return derr
		}
	}
	return err
}

// earliest is the earlier of a run's start as a worker saw it and as the
// store has it (nil: none).
func earliest(local time.Time, stored *time.Time) time.Time {
	if stored != nil && (local.IsZero() || stored.Before(local)) {
		return *stored
	}
	return local
}

// disableIfTooLong disables ep when it has been failing since
// failingSince for longer than WEBHOOK_DISABLE_AFTER, and returns the
// error that parks the delivery; nil when it is not disabled.
func (w *webhookSender) disableIfTooLong(ctx context.Context, ep *store.Endpoint, failingSince time.Time, lastErr string) error {
	now := w.now()
	if w.disableAfter <= 0 || failingSince.IsZero() || now.Sub(failingSince) <= w.disableAfter {
		return nil
	}
	reason := fmt.Sprintf("failing since %s, longer than WEBHOOK_DISABLE_AFTER (%s); last error: %s",
		failingSince.UTC().Format(time.RFC3339), w.disableAfter, lastErr)
	did, err := w.endpoints.disable(ctx, ep.ID, reason, now)
	if err != nil {
		// Not disabled this time: the next failure tries again.
		return nil
	}
	if did {
		// Only the worker that disabled it says so: the others find
		// it disabled already.
		report(ctx, notification.Operational{Type: notification.OpEndpointDisabled, Timestamp: now.UTC(),
			Data: notification.OpData{EndpointID: ep.ID, URL: ep.URL, Tenant: ep.Tenant, Reason: reason, LastError: lastErr}})
	}
	return disabled(ep.ID, reason)
}

// disabled is the permanent failure of a delivery to a disabled
// endpoint: parked at once, its text starting with ReasonEndpointDisabled.
func disabled(id, reason string) error {
	return retry.Permanent(fmt.Errorf("%s: endpoint %s is disabled (%s): PATCH /v1/endpoints/%s {\"enabled\": true} re-enables it; then replay what was parked",
		ReasonEndpointDisabled, id, reason, id))
}
