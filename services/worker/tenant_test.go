package worker

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/internal/store/storetest"
	"github.com/relay-demo/relay/retry"
)

// TestTenantDeliveryRate hands the webhook and email workers' handlers,
// held to TENANT_DELIVERY_RATE through a real store, copies of several
// tenants' notifications, one after the other. The rate is so slow that
// a tenant's second copy is always far from its slot: each tenant sends
// one copy (its burst), every channel's together, and its next copies
// are deferred, spending no retry, while the other tenants' go out. The
// operator's events are nobody's tenant's.
func TestTenantDeliveryRate(t *testing.T) {
	for _, backend := range storetest.Backends() {
		t.Run(backend, func(t *testing.T) {
			st := storetest.Open(t, backend)
			open := func(context.Context) (*store.Store, error) { return st, nil }
			limit := channel.TenantRate{Rate: 0.001, Burst: 1}
			var sent []string
			record := func(_ context.Context, n *notification.Notification) error {
				sent = append(sent, n.ID+" "+string(n.Parts[n.Channel]))
				return nil
			}
			handlers := map[string]retry.HandlerFunc{
				"webhook": Handler("webhook", channel.PaceTenants(channel.Webhook, limit, open, record, time.Now)),
				"email":   Handler("email", channel.PaceTenants(channel.Email, limit, open, record, time.Now)),
			}
			hook := `{"url":"https://example.com/hook","payload":{}}`
			mail := func(to string) string { return `{"to":["` + to + `"],"subject":"s","text":"t"}` }
			steps := []struct {
				name     string
				channel  string
				id       string
				part     string
				headers  amqp.Table
				wantSent bool
				wantWho  string // the deferral names it
			}{
				{"acme's first copy", "webhook", "ntf_1", hook, amqp.Table{notification.HeaderTenant: "acme"}, true, ""},
				{"acme's second copy", "webhook", "ntf_2", hook, amqp.Table{notification.HeaderTenant: "acme"}, false, `tenant "acme"`},
				{"beta's copy goes while acme waits", "webhook", "ntf_3", hook, amqp.Table{notification.HeaderTenant: "beta"}, true, ""},
				{"the default tenant's first copy", "webhook", "ntf_4", hook, nil, true, ""},
				{"the default tenant's second copy", "webhook", "ntf_5", hook, nil, false, "the default tenant"},
				{"acme's second copy, back before its slot", "webhook", "ntf_2", hook, amqp.Table{notification.HeaderTenant: "acme"}, false, `tenant "acme"`},
				{"acme's email: every channel counts", "email", "ntf_6", mail("a@example.com"), amqp.Table{notification.HeaderTenant: "acme"}, false, `tenant "acme"`},
				{"gamma's email to one recipient", "email", "ntf_7", mail("a@example.com"), amqp.Table{notification.HeaderTenant: "gamma"}, true, ""},
				{"gamma's email to another: a copy of its own", "email", "ntf_7", mail("b@example.com"), amqp.Table{notification.HeaderTenant: "gamma"}, false, `tenant "gamma"`},
				{"an operator's event", "webhook", "ntf_8", hook, amqp.Table{notification.HeaderOperator: true}, true, ""},
			}
			for _, s := range steps {
				n := notification.Notification{V: notification.Version, ID: s.id, Channel: s.channel, CreatedAt: time.Now(),
					Parts: map[string]json.RawMessage{s.channel: json.RawMessage(s.part)}}
				body, err := n.MarshalJSON()
				if err != nil {
					t.Fatal(err)
				}
				before := len(sent)
				err = handlers[s.channel](context.Background(), &retry.Message{ID: s.id, Body: body, Headers: s.headers})
				if got := len(sent) > before; got != s.wantSent {
					t.Errorf("%s: sent %v, want %v (error %v)", s.name, got, s.wantSent, err)
				}
				if s.wantSent {
					if err != nil {
						t.Errorf("%s: %v", s.name, err)
					}
					continue
				}
				var d *channel.Deferred
				wait, ok := retry.RetryAfter(err)
				if !errors.As(err, &d) || !ok || wait <= 0 || retry.IsPermanent(err) || !strings.Contains(d.Target, s.wantWho) {
					t.Errorf("%s: %v, want a deferral of %s that spends no retry", s.name, err, s.wantWho)
				}
			}
			// Two deferred copies of one notification, to two recipients,
			// hold two slots, an interval (1,000s) apart: each comes back
			// for its own.
			var waits []time.Duration
			for _, to := range []string{"c@example.com", "d@example.com"} {
				n := notification.Notification{V: notification.Version, ID: "ntf_9", Channel: "email", CreatedAt: time.Now(),
					Parts: map[string]json.RawMessage{"email": json.RawMessage(mail(to))}}
				body, err := n.MarshalJSON()
				if err != nil {
					t.Fatal(err)
				}
				err = handlers["email"](context.Background(), &retry.Message{ID: "ntf_9", Body: body, Headers: amqp.Table{notification.HeaderTenant: "gamma"}})
				wait, _ := retry.RetryAfter(err)
				waits = append(waits, wait)
			}
			if waits[1]-waits[0] < 500*time.Second {
				t.Errorf("two recipients' copies deferred %v and %v: they share a slot, want slots an interval apart", waits[0], waits[1])
			}
		})
	}
}

// TestTenantDeliveryRateOff: without TENANT_DELIVERY_RATE the sender is
// not wrapped, and needs no store.
func TestTenantDeliveryRateOff(t *testing.T) {
	calls := 0
	send := channel.Sender(func(context.Context, *notification.Notification) error { calls++; return nil })
	noStore := func(context.Context) (*store.Store, error) { return nil, errors.New("no store") }
	paced := channel.PaceTenants(channel.Webhook, channel.TenantRate{Burst: 1}, noStore, send, time.Now)
	for range 3 {
		if err := paced(context.Background(), &notification.Notification{ID: "ntf_1", Tenant: "acme"}); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 3 {
		t.Errorf("%d sends, want 3", calls)
	}
}
