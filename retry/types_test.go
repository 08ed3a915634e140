package retry

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"
)

// typedTopology has a default schedule and two types: otp, short and
// expiring, and receipt, with more retries and no expiry.
func typedTopology() Topology {
	return Topology{Routes: testRoutes, Backend: TTL,
		Policy:     Policy{Delays: []time.Duration{time.Second, 5 * time.Second}, Deferrals: 2, Deadline: time.Hour},
		TypeHeader: "x-type",
		Types: map[string]Policy{
			"otp":     {Delays: []time.Duration{2 * time.Second, 3 * time.Second}, MaxRetries: 3, Deferrals: -1, Expiry: 10 * time.Second},
			"receipt": {Delays: []time.Duration{time.Minute}, MaxRetries: 4},
		}}
}

func TestDecideTyped(t *testing.T) {
	topo := typedTopology()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	otp := func(h amqp.Table) amqp.Table { h["x-type"] = "otp"; return h }
	tests := []struct {
		name  string
		h     amqp.Table
		hint  time.Duration
		start time.Time
		want  decision
	}{
		{"no type: the default schedule", amqp.Table{}, 0, now, decision{retries: 1, attempts: 1, delay: time.Second}},
		{"an unknown type: the default schedule", amqp.Table{"x-type": "nope"}, 0, now, decision{retries: 1, attempts: 1, delay: time.Second}},
		{"a type: its first delay", otp(amqp.Table{}), 0, now, decision{retries: 1, attempts: 1, delay: 2 * time.Second}},
		{"a type: its second delay", otp(amqp.Table{HeaderRetryCount: int32(1)}), 0, now, decision{retries: 2, attempts: 2, delay: 3 * time.Second}},
		{"a type: its own retry count", amqp.Table{"x-type": "receipt", HeaderRetryCount: int32(3)}, 0, now,
			decision{retries: 4, attempts: 4, delay: time.Minute}},
		{"a type: parked at its own max", otp(amqp.Table{HeaderRetryCount: int32(3)}), 0, now.Add(-time.Second),
			decision{park: ReasonMaxRetries, retries: 3, attempts: 4}},
		{"the default parks where the type would not", amqp.Table{HeaderRetryCount: int32(2)}, 0, now, decision{park: ReasonMaxRetries, retries: 2, attempts: 3}},
		{"a type without deferrals spends a retry on a hint", otp(amqp.Table{}), 4 * time.Second, now,
			decision{retries: 1, attempts: 1, delay: 4 * time.Second}},
		{"past its expiry", otp(amqp.Table{}), 0, now.Add(-11 * time.Second), decision{park: ReasonExpired, attempts: 1}},
		{"the next retry would land past its expiry", otp(amqp.Table{HeaderRetryCount: int32(1)}), 0, now.Add(-8 * time.Second),
			decision{park: ReasonExpired, retries: 1, attempts: 2}},
		{"the next retry lands just in time", otp(amqp.Table{HeaderRetryCount: int32(1)}), 0, now.Add(-7 * time.Second),
			decision{retries: 2, attempts: 2, delay: 3 * time.Second}},
		{"a hint past its expiry", otp(amqp.Table{}), 20 * time.Second, now, decision{park: ReasonExpired, attempts: 1}},
		{"an unknown start never expires", otp(amqp.Table{}), 0, time.Time{}, decision{retries: 1, attempts: 1, delay: 2 * time.Second}},
		{"no type has no expiry", amqp.Table{}, 0, now.Add(-50 * time.Minute), decision{retries: 1, attempts: 1, delay: time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, topo.decide(tt.h, tt.hint, tt.start, now), cmp.AllowUnexported(decision{})); diff != "" {
				t.Errorf("decide (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPolicyOf(t *testing.T) {
	topo := typedTopology()
	tests := []struct {
		name string
		topo Topology
		h    amqp.Table
		want time.Duration
	}{
		{"a type", topo, amqp.Table{"x-type": "receipt"}, time.Minute},
		{"no header", topo, amqp.Table{}, time.Second},
		{"a header of another kind", topo, amqp.Table{"x-type": int32(7)}, time.Second},
		{"no type header configured", Topology{Policy: topo.Policy, Types: topo.Types}, amqp.Table{"x-type": "receipt"}, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.topo.PolicyOf(tt.h).Delay(1); got != tt.want {
				t.Errorf("PolicyOf(%v).Delay(1) = %s, want %s", tt.h, got, tt.want)
			}
		})
	}
}

func TestTypesValidate(t *testing.T) {
	ok := typedTopology()
	tests := []struct {
		name    string
		mutate  func(*Topology)
		wantErr string
		unsup   bool
	}{
		{"ttl carries types", func(*Topology) {}, "", false},
		{"levels carries types", func(t *Topology) { t.Backend = Levels }, "", false},
		{"native refuses types", func(t *Topology) { t.Backend, t.QueueType = Native, Quorum }, "the native delay backend waits one schedule", true},
		{"a type's bad policy is named", func(t *Topology) { t.Types = map[string]Policy{"otp": {Expiry: -time.Second}} }, `type "otp": expiry is -1s`, false},
		{"types need a header", func(t *Topology) { t.TypeHeader = "" }, "need a TypeHeader", false},
		{"a type's wait beyond any backend", func(t *Topology) {
			t.Types = map[string]Policy{"otp": {Delays: []time.Duration{MaxDelay + time.Second}}}
		}, "longest wait", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topo := ok
			tt.mutate(&topo)
			err := topo.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Validate = %v, want an error with %q", err, tt.wantErr)
			case tt.unsup && !errors.Is(err, ErrUnsupported):
				t.Fatalf("Validate = %v, want ErrUnsupported", err)
			}
		})
	}
}

func TestTTLDeclaresEveryTypesSteps(t *testing.T) {
	topo := typedTopology()
	var got []string
	for _, q := range topo.Plan().Queues {
		if strings.HasPrefix(q.Name, "wait.") && !strings.HasPrefix(q.Name, "wait.level.") {
			got = append(got, q.Name)
		}
	}
	want := []string{"wait.1s", "wait.2s", "wait.3s", "wait.5s", "wait.1m"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("wait queues (-want +got):\n%s", diff)
	}
}
