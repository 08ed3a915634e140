package retry_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/retry"
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
