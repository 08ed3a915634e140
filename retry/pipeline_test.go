package retry_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// TestPipelineTopology: the pipeline declares its Config's topology, with
// the routes Config lists, Handle and Route add, and a queue listed twice
// once, as last bound.
func TestPipelineTopology(t *testing.T) {
	p := retry.New(retry.Config{Topology: retry.Topology{
		Prefix: "p.", Exchange: "billing", QueueType: retry.Quorum, Backend: retry.TTL, Handoff: retry.Direct,
		Routes: []retry.Route{{Queue: "invoices", Key: "invoice"}, {Queue: "refunds", Key: "refund"}},
	}})
	p.Handle("invoices", "invoice.created", retry.HandlerFunc(func(context.Context, *retry.Message) error { return nil }))
	p.Route("receipts", "receipt")
	want := retry.Topology{
		Prefix: "p.", Exchange: "billing", QueueType: retry.Quorum, Backend: retry.TTL, Handoff: retry.Direct,
		Routes: []retry.Route{{Queue: "invoices", Key: "invoice.created"}, {Queue: "refunds", Key: "refund"}, {Queue: "receipts", Key: "receipt"}},
	}
	if diff := cmp.Diff(want, p.Topology()); diff != "" {
		t.Errorf("Topology() (-want +got):\n%s", diff)
	}
}

// TestPipelineStagesForgotten: a pipeline whose failures go through the
// stages, and that neither runs them nor says another process does, says
// so when Run starts: in its log, or, without a logger, as Run's error.
// The TTL backend needs no broker to resolve, and a context already done
// stops Run before it connects.
func TestPipelineStagesForgotten(t *testing.T) {
	const warning = "does not run the retry stages"
	tests := []struct {
		name    string
		handoff retry.Handoff
		backend retry.Backend
		logged  bool
		setup   func(*retry.Pipeline)
		wantErr error
		wantLog bool
	}{
		{name: "forgotten, logged", backend: retry.TTL, logged: true, wantLog: true},
		{name: "forgotten, no logger", backend: retry.TTL, wantErr: retry.ErrNoStages},
		{name: "served", backend: retry.TTL, logged: true, setup: (*retry.Pipeline).ServeStages},
		{name: "elsewhere", backend: retry.TTL, logged: true, setup: (*retry.Pipeline).StagesElsewhere},
		{name: "elsewhere, no logger", backend: retry.TTL, setup: (*retry.Pipeline).StagesElsewhere},
		{name: "direct hand-off", handoff: retry.Direct, backend: retry.TTL},
		{name: "levels backend", backend: retry.Levels, logged: true, wantLog: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log bytes.Buffer
			cfg := retry.Config{Topology: retry.Topology{Prefix: "stages-forgotten.", Backend: tt.backend, Handoff: tt.handoff}}
			if tt.logged {
				cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
			}
			p := retry.New(cfg)
			p.Handle("jobs", "job", retry.HandlerFunc(func(context.Context, *retry.Message) error { return nil }))
			if tt.setup != nil {
				tt.setup(p)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			err := p.Run(ctx, "amqp://guest:guest@127.0.0.1:1/")
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("Run = %v, want %v", err, tt.wantErr)
			}
			if got := strings.Contains(log.String(), warning); got != tt.wantLog {
				t.Errorf("warned %t, want %t; log:\n%s", got, tt.wantLog, log.String())
			}
		})
	}
}

// TestPipelineManagementNotDerived: a pipeline given no management API
// derives none from a broker URL off the default port, and says so in its
// log, unless told it has none (NoManagement). Nothing listens at the
// URL: the log line of the first failed dial comes after the decision.
func TestPipelineManagementNotDerived(t *testing.T) {
	const warning = "the pipeline does without the management API"
	tests := []struct {
		name         string
		url          string
		noManagement bool
		wantLog      bool
	}{
		{"another port", "amqp://guest:guest@127.0.0.1:1/", false, true},
		{"another port, none wanted", "amqp://guest:guest@127.0.0.1:1/", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := &retrytest.Buffer{}
			p := retry.New(retry.Config{
				Topology:     retry.Topology{Prefix: "mgmt-not-derived.", Backend: retry.TTL},
				Options:      retry.Options{Logger: slog.New(slog.NewTextHandler(log, nil))},
				NoManagement: tt.noManagement,
			})
			p.StagesElsewhere()
			p.Handle("jobs", "job", retry.HandlerFunc(func(context.Context, *retry.Message) error { return nil }))
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- p.Run(ctx, tt.url) }()
			retrytest.Eventually(t, 10*time.Second, func() bool {
				return strings.Contains(log.String(), "broker connection lost")
			}, "the pipeline never tried the broker; log:\n%s", log)
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run = %v", err)
			}
			if got := strings.Contains(log.String(), warning); got != tt.wantLog {
				t.Errorf("warned %t, want %t; log:\n%s", got, tt.wantLog, log)
			}
		})
	}
}
