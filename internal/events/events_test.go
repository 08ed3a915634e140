package events

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

var (
	testTopo = retry.Topology{Prefix: "t1.", Backend: retry.TTL, Routes: retrytest.Routes}
	t0       = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
)

func TestConvert(t *testing.T) {
	tests := []struct {
		name string
		in   retry.Event
		want notification.Event
	}{
		{
			name: "failed email with age",
			in: retry.Event{Outcome: "failed", MessageID: "n-1", Queue: "t1.email-queue", Attempt: 1,
				Delay: 500 * time.Millisecond, Err: "smtp 451", At: t0.Add(1500 * time.Millisecond), Published: t0},
			want: notification.Event{Type: "attempt", Outcome: "failed", ID: "n-1", Channel: "email", Queue: "t1.email-queue",
				Attempt: 1, DelayMS: 500, Error: "smtp 451", At: t0.Add(1500 * time.Millisecond), AgeMS: 1500, Service: "worker"},
		},
		{
			name: "delivered webhook without publish time",
			in:   retry.Event{Outcome: "delivered", MessageID: "n-2", Queue: "t1.webhook-queue", Attempt: 3, At: t0},
			want: notification.Event{Type: "attempt", Outcome: "delivered", ID: "n-2", Channel: "webhook", Queue: "t1.webhook-queue",
				Attempt: 3, At: t0, Service: "worker"},
		},
		{
			name: "parked without a source queue",
			in:   retry.Event{Outcome: "parked", MessageID: "n-3", Attempt: 1, Reason: retry.ReasonNoSource, At: t0, Published: t0.Add(-time.Minute)},
			want: notification.Event{Type: "attempt", Outcome: "parked", ID: "n-3", Attempt: 1, Reason: "unknown-source", At: t0, AgeMS: 60000, Service: "worker"},
		},
		{
			name: "unprefixed queue is not a work queue of this topology",
			in:   retry.Event{Outcome: "requeued", MessageID: "n-4", Queue: "email-queue", Attempt: 2, At: t0},
			want: notification.Event{Type: "attempt", Outcome: "requeued", ID: "n-4", Queue: "email-queue", Attempt: 2, At: t0, Service: "worker"},
		},
		{
			name: "a deferral: a rate limit's slot",
			in: retry.Event{Outcome: "retrying", MessageID: "n-7", Queue: "t1.email-queue", Attempt: 2, Delay: 229 * time.Millisecond, Deferred: true,
				Err: "email provider backup: rate limit 4/s (burst 2)", At: t0},
			want: notification.Event{Type: "attempt", Outcome: "retrying", ID: "n-7", Channel: "email", Queue: "t1.email-queue", Attempt: 2,
				DelayMS: 229, Deferred: true, Error: "email provider backup: rate limit 4/s (burst 2)", At: t0, Service: "worker"},
		},
		{
			name: "delivered through a provider",
			in:   retry.Event{Outcome: "delivered", MessageID: "n-6", Queue: "t1.email-queue", Attempt: 2, At: t0, Via: "secondary"},
			want: notification.Event{Type: "attempt", Outcome: "delivered", ID: "n-6", Channel: "email", Queue: "t1.email-queue", Attempt: 2, At: t0,
				Service: "worker", Provider: "secondary"},
		},
		{
			name: "a recipient's copy",
			in:   retry.Event{Outcome: "delivered", MessageID: "n-7", Copy: "ada@example.com", Queue: "t1.email-queue", Attempt: 1, At: t0},
			want: notification.Event{Type: "attempt", Outcome: "delivered", ID: "n-7", Channel: "email", Recipient: "ada@example.com", Queue: "t1.email-queue",
				Attempt: 1, At: t0, Service: "worker"},
		},
		{
			name: "a named tenant's copy",
			in:   retry.Event{Outcome: "delivered", MessageID: "n-9", Copy: "ada@example.com", Tenant: "acme", Queue: "t1.email-queue", Attempt: 1, At: t0},
			want: notification.Event{Type: "attempt", Outcome: "delivered", ID: "n-9", Channel: "email", Recipient: "ada@example.com", Tenant: "acme",
				Queue: "t1.email-queue", Attempt: 1, At: t0, Service: "worker"},
		},
		{
			name: "a recipient longer than the history takes is left out",
			in:   retry.Event{Outcome: "delivered", MessageID: "n-8", Copy: strings.Repeat("a", 321), Queue: "t1.email-queue", Attempt: 1, At: t0},
			want: notification.Event{Type: "attempt", Outcome: "delivered", ID: "n-8", Channel: "email", Queue: "t1.email-queue", Attempt: 1, At: t0, Service: "worker"},
		},
		{
			name: "publish time after the decision (clock skew) gives no age",
			in:   retry.Event{Outcome: "delivered", MessageID: "n-5", Queue: "t1.email-queue", Attempt: 1, At: t0, Published: t0.Add(time.Second)},
			want: notification.Event{Type: "attempt", Outcome: "delivered", ID: "n-5", Channel: "email", Queue: "t1.email-queue", Attempt: 1, At: t0, Service: "worker"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := channelsOf(testTopo).event("worker", tt.in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("event (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEventJSON(t *testing.T) {
	ev := notification.Event{Type: "attempt", Outcome: "parked", ID: "n-1", Channel: "email", Queue: "email-queue", Attempt: 4,
		DelayMS: 0, Reason: "max-retries", Error: "boom", At: t0, AgeMS: 7, Service: "retrier"}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"attempt","outcome":"parked","id":"n-1","channel":"email","queue":"email-queue","attempt":4,` +
		`"delay_ms":0,"error":"boom","reason":"max-retries","at":"2026-03-01T12:00:00Z","age_ms":7,"service":"retrier"}`
	if diff := cmp.Diff(want, string(b)); diff != "" {
		t.Errorf("json (-want +got):\n%s", diff)
	}
	var back notification.Event
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ev, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestRoutingKey(t *testing.T) {
	if got := RoutingKey(notification.Event{Outcome: "parked", Channel: "webhook"}); got != "parked.webhook" {
		t.Errorf("RoutingKey = %q, want parked.webhook", got)
	}
	if got := ExchangeName(testTopo); got != "t1.notification-events" {
		t.Errorf("ExchangeName = %q", got)
	}
}

func TestFanout(t *testing.T) {
	var got []string
	obs := func(name string) func(retry.Event) {
		return func(ev retry.Event) { got = append(got, name+":"+ev.MessageID) }
	}
	tests := []struct {
		name string
		obs  []func(retry.Event)
		want []string
	}{
		{"none", nil, nil},
		{"nil observers are skipped", []func(retry.Event){nil, obs("a"), nil, obs("b")}, []string{"a:x", "b:x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got = nil
			Fanout(tt.obs...)(retry.Event{MessageID: "x"})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEmitterDropsWhenFull(t *testing.T) {
	e := NewEmitter(testTopo, "worker", nil)
	e.wait = 10 * time.Millisecond
	const extra = 10
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range BufferSize + extra {
			e.Observe(retry.Event{Outcome: "failed", MessageID: fmt.Sprint(i), Queue: "t1.email-queue", At: t0})
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Observe blocked for good with nothing draining the buffer")
	}
	if got := e.Dropped(); got != extra {
		t.Errorf("Dropped = %d, want %d", got, extra)
	}
	if got := len(e.queue); got != BufferSize {
		t.Errorf("buffered = %d, want %d", got, BufferSize)
	}
	first := <-e.queue
	want := notification.Event{Type: "attempt", Outcome: "failed", ID: "0", Channel: "email", Queue: "t1.email-queue", At: t0, Service: "worker"}
	if diff := cmp.Diff(want, first.ev); diff != "" || first.op != nil {
		t.Errorf("first queued event (-want +got):\n%s", diff)
	}
}

// samples gathers reg into "name{label=value,...}" → value; a histogram
// gives its count as name_count and its sum as name_sum.
func samples(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(labels)
			key := "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.GetCounter() != nil:
				out[f.GetName()+key] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[f.GetName()+key] = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				out[f.GetName()+"_count"+key] = float64(m.GetHistogram().GetSampleCount())
				out[f.GetName()+"_sum"+key] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

func TestMetrics(t *testing.T) {
	tests := []struct {
		name   string
		events []retry.Event
		want   map[string]float64
	}{
		{
			name: "retried then delivered",
			events: []retry.Event{
				{Outcome: "failed", MessageID: "a", Queue: "t1.email-queue", Attempt: 1, Delay: time.Second, At: t0.Add(time.Second), Published: t0},
				{Outcome: "retrying", MessageID: "a", Queue: "t1.email-queue", Attempt: 1, Delay: 2 * time.Second, At: t0.Add(time.Second), Published: t0},
				{Outcome: "requeued", MessageID: "a", Queue: "t1.email-queue", Attempt: 2, At: t0.Add(3 * time.Second), Published: t0},
				{Outcome: "delivered", MessageID: "a", Queue: "t1.email-queue", Attempt: 2, At: t0.Add(4 * time.Second), Published: t0},
			},
			want: map[string]float64{
				"relay_deliveries_total{channel=email,outcome=failed}":            1,
				"relay_deliveries_total{channel=email,outcome=retrying}":          1,
				"relay_deliveries_total{channel=email,outcome=requeued}":          1,
				"relay_deliveries_total{channel=email,outcome=delivered}":         1,
				"relay_retries_total{attempt=1,queue=t1.email-queue}":             1,
				"relay_retry_delay_seconds_count{}":                               1,
				"relay_retry_delay_seconds_sum{}":                                 2,
				"relay_end_to_end_seconds_count{channel=email,outcome=delivered}": 1,
				"relay_end_to_end_seconds_sum{channel=email,outcome=delivered}":   4,
			},
		},
		{
			// A rate limit's slot, then a retry: one deferral, one retry,
			// and only the retry's wait in the delays.
			name: "deferred, retried, delivered",
			events: []retry.Event{
				{Outcome: "retrying", MessageID: "d", Queue: "t1.email-queue", Attempt: 1, Delay: 300 * time.Millisecond, Deferred: true, At: t0},
				{Outcome: "retrying", MessageID: "d", Queue: "t1.email-queue", Attempt: 2, Delay: 2 * time.Second, At: t0.Add(time.Second)},
				{Outcome: "delivered", MessageID: "d", Queue: "t1.email-queue", Attempt: 3, At: t0.Add(4 * time.Second)},
			},
			want: map[string]float64{
				"relay_deliveries_total{channel=email,outcome=retrying}":  2,
				"relay_deliveries_total{channel=email,outcome=delivered}": 1,
				"relay_deferrals_total{queue=t1.email-queue}":             1,
				"relay_retries_total{attempt=2,queue=t1.email-queue}":     1,
				"relay_retry_delay_seconds_count{}":                       1,
				"relay_retry_delay_seconds_sum{}":                         2,
			},
		},
		{
			name: "parked, one with no publish time",
			events: []retry.Event{
				{Outcome: "parked", MessageID: "b", Queue: "t1.webhook-queue", Attempt: 5, Reason: "max-retries", At: t0.Add(90 * time.Second), Published: t0},
				{Outcome: "parked", MessageID: "c", Queue: "t1.webhook-queue", Attempt: 1, Reason: "permanent", At: t0},
			},
			want: map[string]float64{
				"relay_deliveries_total{channel=webhook,outcome=parked}":         2,
				"relay_parked_total{queue=t1.webhook-queue,reason=max-retries}":  1,
				"relay_parked_total{queue=t1.webhook-queue,reason=permanent}":    1,
				"relay_retry_delay_seconds_count{}":                              0,
				"relay_retry_delay_seconds_sum{}":                                0,
				"relay_end_to_end_seconds_count{channel=webhook,outcome=parked}": 1,
				"relay_end_to_end_seconds_sum{channel=webhook,outcome=parked}":   90,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewPedanticRegistry()
			m := NewMetrics(reg, testTopo)
			for _, ev := range tt.events {
				m.Observe(ev)
			}
			if diff := cmp.Diff(tt.want, samples(t, reg)); diff != "" {
				t.Errorf("metrics (-want +got):\n%s", diff)
			}
		})
	}
}
