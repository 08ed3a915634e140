//go:build integration

package workshop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/relay-demo/relay/internal/testenv"
	"github.com/relay-demo/relay/lab/strategy"
	"github.com/relay-demo/relay/lab/workshop"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
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
			// Only the plugin's strategy may be left out, and only on a
			// broker that need not run the plugin (testenv.Expects).
			if f.Strategy != "delayed-exchange" || !strings.Contains(f.Skipped, "x-delayed-message") || testenv.Expects(string(retry.Plugin)) {
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

// TestCompareReportsNativeAsNotRunnable runs compare with the native
// strategy beside one that runs: on a broker before 4.3, its row says which
// version the broker reported, and the other row has its figures.
func TestCompareReportsNativeAsNotRunnable(t *testing.T) {
	conn := retrytest.Conn(t)
	version, _ := conn.Properties["version"].(string)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	args := []string{"compare", "--n", "20", "--format", "json", "--strategies", "native-delayed-retry,delay-levels/direct"}
	if err := workshop.Run(ctx, args, env(t), &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	var r workshop.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("compare --format json is not JSON: %v\n%s", err, out.String())
	}
	if len(r.Rows) != 2 || r.Took <= 0 {
		t.Fatalf("%d rows, took %s: %+v", len(r.Rows), r.Took, r)
	}
	native, levels := r.Rows[0], r.Rows[1]
	if strategy.NativeSupport(version) != nil {
		want := "not runnable on RabbitMQ " + version + ": needs 4.3 with quorum queues"
		if native.Skipped != want || native.Verdict != want {
			t.Errorf("native row: skipped %q, verdict %q; want %q", native.Skipped, native.Verdict, want)
		}
		if testenv.Expects(string(retry.Native)) {
			t.Errorf("RabbitMQ %s cannot run native-delayed-retry, but %s=%q says this broker must", version, testenv.ExpectBackends, os.Getenv(testenv.ExpectBackends))
		}
	} else if native.Skipped != "" || native.Delivered != 20 {
		t.Errorf("RabbitMQ %s runs native-delayed-retry, but its row is %+v", version, native)
	}
	if levels.Skipped != "" || levels.Failed != "" || levels.Delivered != 20 || levels.Lost != 0 || levels.InFlight != 0 {
		t.Errorf("delay-levels/direct row: %+v", levels)
	}
}

// TestDelayLevelsRunKeepsJitteredDelays runs delay-levels with jitter and
// reads the figures: the delays are spread, and none is cut short. How
// much longer than scheduled they took is logged, never held to a bound.
func TestDelayLevelsRunKeepsJitteredDelays(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	args := []string{"compare", "--n", "40", "--jitter", "0.3", "--format", "json", "--strategies", "delay-levels"}
	if err := workshop.Run(ctx, args, env(t), &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	var r workshop.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	f := r.Rows[0]
	if f.Delivered != 40 || f.Lost != 0 || f.ScheduledP50 <= 0 {
		t.Fatalf("delay-levels: %+v", f)
	}
	// Jitter spreads the delays: 250ms × 0.7 to the 1.25s cap × 1.3.
	if s := time.Duration(f.ScheduledP99); s < 175*time.Millisecond || s > 1625*time.Millisecond {
		t.Errorf("scheduled p99 %s, outside the jittered schedule", s)
	}
	// Each delay taken is at least the one scheduled, truncated to the
	// millisecond the levels wait in, so their medians are in that order
	// too.
	late := time.Duration(f.ActualP50 - f.ScheduledP50)
	if late < -time.Millisecond {
		t.Errorf("delays: p50 scheduled %s, taken %s: cut short", f.ScheduledP50, f.ActualP50)
	}
	t.Logf("delays: p50 scheduled %s, taken %s (%s more)", f.ScheduledP50, f.ActualP50, late)
}

func TestRunRefusesWhatItCannotDo(t *testing.T) {
	tests := [][]string{
		{"run"},
		{"run", "retry-harder"},
		{"run", "naive-requeue/direct"},
		{"run", "ttl-tiers", "--jitter", "2"},
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
