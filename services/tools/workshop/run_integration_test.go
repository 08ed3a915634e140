//go:build integration

package workshop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/relay-demo/relay/retry/retrytest"
	"github.com/relay-demo/relay/services/tools/workshop"
)

func env(t *testing.T) func(string) string {
	url := retrytest.URL(t)
	return func(k string) string {
		if k == "AMQP_URL" {
			return url
		}
		return ""
	}
}

func TestRunPrintsATimelineAndItsFigures(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := workshop.Run(ctx, []string{"run", "ttl-tiers", "--n", "10"}, env(t), &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	text := out.String()
	// One sick notification of ten: its retries wait 250ms, then 500ms.
	for _, want := range []string{"baseline:", "failed", "250ms", "delivered", "ttl-tiers: 10 accepted, 10 delivered, 0 parked, 0 pending"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
}

func TestCompareAccountsForEveryNotification(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	args := []string{"compare", "--n", "20", "--format", "json", "--strategies", "naive-requeue-once,ttl-wait-queue,delayed-exchange"}
	if err := workshop.Run(ctx, args, env(t), &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	var r workshop.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("compare --format json is not JSON: %v\n%s", err, out.String())
	}
	if len(r.Rows) != 3 {
		t.Fatalf("%d rows, want 3", len(r.Rows))
	}
	want := map[string]struct{ delivered, parked int }{
		// Two of the twenty are sick for 900ms: requeued once, they are
		// parked; waiting 250ms between retries, they get through.
		"naive-requeue-once": {18, 2},
		"ttl-wait-queue":     {20, 0},
		"delayed-exchange":   {20, 0},
	}
	for _, f := range r.Rows {
		if f.Failed != "" {
			t.Errorf("%s failed: %s", f.Strategy, f.Failed)
			continue
		}
		if f.Skipped != "" {
			if f.Strategy != "delayed-exchange" || !strings.Contains(f.Skipped, "x-delayed-message") {
				t.Errorf("%s skipped: %s", f.Strategy, f.Skipped)
			}
			continue
		}
		if f.Accepted != 20 || f.Lost != 0 || f.InFlight != 0 || f.TimedOut {
			t.Errorf("%s: %+v, want 20 accepted, none lost, none in flight", f.Strategy, f)
		}
		if w := want[f.Strategy]; f.Delivered != w.delivered || f.Parked != w.parked {
			t.Errorf("%s: %d delivered, %d parked; want %d, %d", f.Strategy, f.Delivered, f.Parked, w.delivered, w.parked)
		}
		if f.Delivered+f.Parked+f.InFlight+f.Lost != f.Accepted {
			t.Errorf("%s: the figures do not add up: %+v", f.Strategy, f)
		}
	}
}

func TestRunRefusesWhatItCannotDo(t *testing.T) {
	tests := [][]string{
		{"run"},
		{"run", "retry-harder"},
		{"run", "ttl-tiers", "--scenario", "gentle"},
		{"run", "ttl-tiers", "--once"},
		{"compare", "--format", "yaml"},
		{"topology", "ttl-tiers", "--format", "png"},
		{"sing"},
	}
	for _, args := range tests {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var out bytes.Buffer
			if err := workshop.Run(context.Background(), args, func(string) string { return "" }, &out); err == nil {
				t.Errorf("accepted; printed:\n%s", out.String())
			}
		})
	}
}
