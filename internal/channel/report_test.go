package channel

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/webhooks"
)

// reports collects the operational events a sender reports.
type reports struct {
	mu  sync.Mutex
	ops []notification.Operational
}

func (r *reports) report(op notification.Operational) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, op)
}

func (r *reports) of(typ string) []notification.Operational {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []notification.Operational
	for _, op := range r.ops {
		if op.Type == typ {
			out = append(out, op)
		}
	}
	return out
}

func TestProviderCircuitOpenedReportedOnce(t *testing.T) {
	clk := newClock()
	down := errors.New("421 try later")
	a := &fakeProvider{errs: []error{down, down}}
	f := newFailover("email", []Provider[EmailPart]{{Name: "a", Send: a.send}}, 1, time.Minute, 4, nil, emailTicket, clk.now)
	f.iso.jitter = func() float64 { return 0 }
	defer providerSets.remove(f.stats)
	var r reports
	ctx := WithReporter(context.Background(), r.report)
	part := &EmailPart{To: []string{"ada@example.com"}}

	_ = f.send(ctx, "ntf_1", part) // fails: the circuit opens
	opened := r.of(notification.OpProviderCircuitOpened)
	if len(opened) != 1 {
		t.Fatalf("%d provider.circuit_opened after the circuit opened, want 1", len(opened))
	}
	if d := opened[0].Data; d.Channel != "email" || d.Provider != "a" || d.LastError == "" {
		t.Errorf("data %+v, want channel email, provider a and the last error", d)
	}
	_ = f.send(ctx, "ntf_2", part) // deferred while open
	clk.advance(2 * time.Minute)
	_ = f.send(ctx, "ntf_3", part) // the probe fails: open again
	if n := len(r.of(notification.OpProviderCircuitOpened)); n != 1 {
		t.Errorf("%d provider.circuit_opened after a failed probe, want still 1", n)
	}
	clk.advance(10 * time.Minute)
	if err := f.send(ctx, "ntf_4", part); err != nil { // the probe succeeds: closed
		t.Fatalf("probe: %v", err)
	}
	a.errs = []error{down}
	_ = f.send(ctx, "ntf_5", part) // fails: opens anew
	if n := len(r.of(notification.OpProviderCircuitOpened)); n != 2 {
		t.Errorf("%d provider.circuit_opened after it closed and opened again, want 2", n)
	}
}

func TestEndpointDisabledReportedOnce(t *testing.T) {
	cfg := testEndpointConfig
	cfg.DisableAfter = time.Hour
	f := newFixture(t, cfg)
	ep := "ep_" + strings.Repeat("t", 26)
	err := f.store.CreateEndpoint(context.Background(), store.Endpoint{ID: ep, Tenant: "acme", URL: f.recv.srv.URL + "/down",
		Secret: store.Secret(webhooks.NewSecret()), CreatedAt: f.clock.now()})
	if err != nil {
		t.Fatal(err)
	}
	var r reports
	ctx := WithReporter(context.Background(), r.report)
	deliver := func(id string) error {
		return f.w.deliver(ctx, id, &WebhookPart{Endpoint: ep, Payload: []byte(`{"n":1}`)})
	}
	for range cfg.Failures {
		_ = deliver("ntf_1")
	}
	if n := len(r.ops); n != 0 {
		t.Fatalf("%d events while failing within WEBHOOK_DISABLE_AFTER, want none", n)
	}
	for range 20 {
		f.clock.advance(5 * time.Minute)
		_ = deliver("ntf_2")
	}
	disabled := r.of(notification.OpEndpointDisabled)
	if len(disabled) != 1 {
		t.Fatalf("%d endpoint.disabled, want 1: %+v", len(disabled), r.ops)
	}
	if d := disabled[0].Data; d.EndpointID != ep || d.Tenant != "acme" || d.URL != f.recv.srv.URL+"/down" || d.Reason == "" || d.LastError == "" {
		t.Errorf("data %+v, want the endpoint, its tenant, its URL, the reason and the last error", d)
	}
}
