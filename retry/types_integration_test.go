//go:build integration

package retry_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// The types promise's schedules: slow waits longer than the default and
// has fewer retries; otp's first retry comes back before its expiry
// however late the backend may be (its Tolerance), and its second would
// come back long after.
var (
	slowDelays = []time.Duration{time.Second, 1500 * time.Millisecond}
	otpDelays  = []time.Duration{500 * time.Millisecond, 20 * time.Second}
)

// runTypes asserts the types promise on one cell (Features.Types): a
// message follows its type's delays and retry count, a message of an
// unknown type the default schedule; a message past its type's expiry is
// parked as expired without an attempt, and one whose next retry would
// come back past its expiry is parked as expired at once. A backend that
// cannot follow a schedule per message refuses the topology instead.
func runTypes(t *testing.T, url string, topo retry.Topology, f retry.Features) {
	topo.Prefix = retrytest.Prefix(t)
	topo.Routes = []retry.Route{{Queue: "work", Key: "work"}}
	topo.Policy = retry.Policy{Delays: conformanceDelays}
	topo.TypeHeader = "x-type"
	topo.Types = map[string]retry.Policy{
		"slow": {Delays: slowDelays},
		"otp":  {Delays: otpDelays, Expiry: otpDelays[0] + f.Tolerance + time.Second},
	}
	if !f.Types {
		if err := topo.Validate(); !errors.Is(err, retry.ErrUnsupported) {
			t.Fatalf("the %s backend declares no schedule per type, yet Validate = %v; want ErrUnsupported", topo.Backend, err)
		}
		return
	}
	if err := topo.Validate(); err != nil {
		t.Fatalf("a cell the backend declares supports types is refused: %v", err)
	}

	var mu sync.Mutex
	calls := map[string][]call{}
	p := retry.New(retry.Config{Topology: topo, Options: retry.Options{Concurrency: 8}})
	p.Handle("work", "work", retry.HandlerFunc(func(ctx context.Context, m *retry.Message) error {
		c := call{attempt: m.Attempt, retries: m.Retries, start: time.Now()}
		var err error
		switch kind, _, _ := strings.Cut(m.ID, "."); kind {
		case "slow", "untyped":
			if m.Attempt <= len(slowDelays) && kind == "slow" || m.Attempt == 1 && kind == "untyped" {
				err = fmt.Errorf("attempt %d of %s failed", m.Attempt, m.ID)
			}
		default:
			err = fmt.Errorf("attempt %d of %s failed", m.Attempt, m.ID)
		}
		c.end = time.Now()
		mu.Lock()
		calls[m.ID] = append(calls[m.ID], c)
		mu.Unlock()
		return err
	}))
	p.ServeStages()
	conn, pub := serveCell(t, p, topo, url)
	msg := func(id, typ string, published time.Time) amqp.Publishing {
		return amqp.Publishing{MessageId: id, DeliveryMode: amqp.Persistent, Timestamp: published, Body: []byte(id),
			Headers: amqp.Table{"x-type": typ}}
	}
	now := time.Now()
	for _, m := range []amqp.Publishing{
		msg("slow.1", "slow", now), msg("slowpark.1", "slow", now), msg("untyped.1", "nope", now),
		msg("expiring.1", "otp", now), msg("stale.1", "otp", now.Add(-time.Minute)),
	} {
		if err := pub.Publish(context.Background(), topo.Ingress(), "work", m); err != nil {
			t.Fatalf("publish %s: %v", m.MessageId, err)
		}
	}

	want := map[string]int{"slow.1": len(slowDelays) + 1, "slowpark.1": len(slowDelays) + 1, "untyped.1": 2, "expiring.1": 2, "stale.1": 0}
	parked := map[string]amqp.Delivery{}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	var missing string
	retrytest.Eventually(t, 60*time.Second, func() bool {
		retrytest.TakeParked(ch, topo, parked)
		mu.Lock()
		defer mu.Unlock()
		for id, n := range want {
			if len(calls[id]) < n {
				missing = fmt.Sprintf("%s handled %d times of %d", id, len(calls[id]), n)
				return false
			}
		}
		missing = fmt.Sprintf("%d parked of 3", len(parked))
		return len(parked) >= 3
	}, "not every typed message was handled or parked as it should be: %s", lazy(func() string { return missing }))
	mu.Lock()
	got := make(map[string][]call, len(calls))
	for id, cs := range calls {
		got[id] = slices.Clone(cs)
	}
	mu.Unlock()

	onTime := func(what string, from, to time.Time, wait time.Duration) {
		t.Helper()
		switch took := to.Sub(from); {
		case took < wait:
			t.Errorf("%s: came back after %s, early (waited for %s)", what, took.Round(time.Millisecond), wait)
		case took > wait+f.Tolerance:
			t.Errorf("%s: came back after %s, late (waited for %s, tolerance %s)", what, took.Round(time.Millisecond), wait, f.Tolerance)
		}
	}
	for id, n := range want {
		if len(got[id]) != n {
			t.Errorf("%s handled %d times, want %d", id, len(got[id]), n)
		}
	}
	// slow: its type's delays, not the default's.
	if s := got["slow.1"]; len(s) == len(slowDelays)+1 {
		for i := 1; i < len(s); i++ {
			onTime(fmt.Sprintf("slow.1 retry %d", i), s[i-1].end, s[i].start, slowDelays[i-1])
		}
	}
	// untyped: an unknown type waits the default's first delay.
	if s := got["untyped.1"]; len(s) == 2 {
		onTime("untyped.1 retry 1", s[0].end, s[1].start, conformanceDelays[0])
	}
	// slowpark: parked after its type's retries, fewer than the default's.
	if d, ok := parked["slowpark.1"]; !ok {
		t.Error("slowpark.1 was not parked")
	} else if d.Headers[retry.HeaderDeadReason] != retry.ReasonMaxRetries || retry.RetryCount(d.Headers) != len(slowDelays) {
		t.Errorf("slowpark.1 parked as %v with %d retries; want %s with %d", d.Headers[retry.HeaderDeadReason], retry.RetryCount(d.Headers), retry.ReasonMaxRetries, len(slowDelays))
	}
	// stale: past its expiry on arrival, parked unattempted.
	if d, ok := parked["stale.1"]; !ok {
		t.Error("stale.1, past its type's expiry, was not parked")
	} else if d.Headers[retry.HeaderDeadReason] != retry.ReasonExpired {
		t.Errorf("stale.1 parked as %v, want %s", d.Headers[retry.HeaderDeadReason], retry.ReasonExpired)
	}
	// expiring: its first retry comes back in time; its second would not,
	// so it is parked as expired at once, not after the wait.
	if d, ok := parked["expiring.1"]; !ok {
		t.Error("expiring.1 was not parked")
	} else {
		if d.Headers[retry.HeaderDeadReason] != retry.ReasonExpired || retry.RetryCount(d.Headers) != 1 {
			t.Errorf("expiring.1 parked as %v with %d retries; want %s with 1", d.Headers[retry.HeaderDeadReason], retry.RetryCount(d.Headers), retry.ReasonExpired)
		}
		at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(d.Headers[retry.HeaderParkedAt]))
		if s := got["expiring.1"]; err == nil && len(s) == 2 {
			onTime("expiring.1 retry 1", s[0].end, s[1].start, otpDelays[0])
			if late := at.Sub(s[1].end); late > otpDelays[1]/2 {
				t.Errorf("expiring.1 was parked %s after its last attempt: it waited for a retry that would come too late", late.Round(time.Millisecond))
			}
		}
	}
	for id, d := range parked {
		if !slices.Contains([]string{"slowpark.1", "stale.1", "expiring.1"}, id) {
			t.Errorf("%s was parked: %v", id, d.Headers[retry.HeaderDeadReason])
		}
	}
}

// lazy is a message that a failure reads only when it is written.
type lazy func() string

func (l lazy) String() string { return l() }
