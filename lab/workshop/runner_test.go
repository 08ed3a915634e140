package workshop

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/lab/strategy"
)

// TestCompareReportsNativeAsNotRunnableBefore43 declares native-delayed-retry
// as compare does, on a connection that reports RabbitMQ 3.10.8 and nothing
// else: the row says so, and the compare goes on.
func TestCompareReportsNativeAsNotRunnableBefore43(t *testing.T) {
	s, err := strategy.New("native-delayed-retry", strategy.Options{Policy: Policy})
	if err != nil {
		t.Fatal(err)
	}
	old := &amqp.Connection{Properties: amqp.Table{"product": "RabbitMQ", "version": "3.10.8"}}
	err = declare(context.Background(), s, old)
	var why *skip
	if !errors.As(err, &why) || !errors.Is(err, errSkipped) {
		t.Fatalf("declare on 3.10.8 = %v, want a skip (compare carries on past it)", err)
	}
	const want = "not runnable on RabbitMQ 3.10.8: needs 4.3 with quorum queues"
	rows := []Figures{skippedRow(s.Name(), why.reason)}
	verdicts(rows)
	if rows[0].Skipped != want || rows[0].Verdict != want {
		t.Errorf("row: skipped %q, verdict %q; want both %q", rows[0].Skipped, rows[0].Verdict, want)
	}
	var out bytes.Buffer
	if err := writeText(&out, rows, true, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "native-delayed-retry  "+want+"\n") {
		t.Errorf("compare output:\n%s", out.String())
	}
}

func TestComparedRunsEveryStrategyAndTheDirectHandoff(t *testing.T) {
	got := compared()
	for _, name := range strategy.Names() {
		if !strings.Contains(strings.Join(got, " ")+" ", name+" ") {
			t.Errorf("compare does not run %s", name)
		}
	}
	i := strings.Index(strings.Join(got, " "), "delay-levels delay-levels/direct")
	if i < 0 {
		t.Errorf("compare runs %v: want delay-levels/direct right after delay-levels", got)
	}
}

func TestReleaseTimesGrowAlongTheQueue(t *testing.T) {
	r := release{every: 5 * time.Millisecond}
	for i := 1; i < 10; i++ {
		if !r.arrival(i).After(r.arrival(i - 1)) {
			t.Fatalf("arrival %d is not after arrival %d", i, i-1)
		}
	}
	if releaseLead(200) <= 0 || releaseLead(100000) <= releaseLead(200) {
		t.Errorf("lead %s for 200, %s for 100000: it must grow with the load", releaseLead(200), releaseLead(100000))
	}
}
