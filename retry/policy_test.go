package retry

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPolicyDelay(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name        string
		policy      Policy
		wantRetries int
		want        []time.Duration // Delay(1), Delay(2), ...
	}{
		{"zero value is the default schedule", Policy{}, 4, DefaultDelays},
		{"explicit schedule", Policy{Delays: []time.Duration{200 * ms, 400 * ms, 800 * ms}}, 3,
			[]time.Duration{200 * ms, 400 * ms, 800 * ms}},
		{"max beyond schedule repeats the last delay", Policy{Delays: []time.Duration{time.Second, 2 * time.Second}, MaxRetries: 4}, 4,
			[]time.Duration{time.Second, 2 * time.Second, 2 * time.Second, 2 * time.Second}},
		{"max below schedule", Policy{Delays: []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}, MaxRetries: 1}, 1,
			[]time.Duration{time.Second}},
		{"exponential doubles by default", Policy{Initial: 100 * ms}, 5,
			[]time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms}},
		{"exponential with multiplier and cap", Policy{Initial: time.Second, Multiplier: 3, Cap: 10 * time.Second, MaxRetries: 4}, 4,
			[]time.Duration{time.Second, 3 * time.Second, 9 * time.Second, 10 * time.Second}},
		{"schedule wins over exponential", Policy{Delays: []time.Duration{time.Second}, Initial: time.Hour}, 1,
			[]time.Duration{time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.policy.Retries(); got != tt.wantRetries {
				t.Errorf("Retries() = %d, want %d", got, tt.wantRetries)
			}
			var got []time.Duration
			for n := 1; n <= tt.policy.Retries(); n++ {
				got = append(got, tt.policy.Delay(n))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("delays (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPolicyDelayHugeAttempt(t *testing.T) {
	p := Policy{Initial: time.Second, Cap: time.Hour}
	if got := p.Delay(10_000); got != time.Hour {
		t.Errorf("Delay(10000) = %s, want the cap", got)
	}
	p.Cap = 0
	if got := p.Delay(10_000); got <= 0 {
		t.Errorf("uncapped Delay(10000) = %s, want a positive saturated delay", got)
	}
	if got := (Policy{}).Delay(0); got != DefaultDelays[0] {
		t.Errorf("Delay(0) = %s, want the first delay", got)
	}
}

func TestJittered(t *testing.T) {
	tests := []struct {
		name   string
		jitter float64
		u      float64
		want   time.Duration
	}{
		{"no jitter", 0, 0.9, time.Second},
		{"middle of the range", 0.2, 0.5, time.Second},
		{"bottom of the range", 0.2, 0, 800 * time.Millisecond},
		{"top of the range", 0.2, 1, 1200 * time.Millisecond},
		{"full jitter bottom never reaches zero", 1, 0, time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (Policy{Jitter: tt.jitter}).Jittered(time.Second, tt.u); got != tt.want {
				t.Errorf("Jittered = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestSteps(t *testing.T) {
	p := Policy{Delays: []time.Duration{5 * time.Second, 500 * time.Millisecond, 5 * time.Second}, MaxRetries: 5}
	want := []time.Duration{500 * time.Millisecond, 5 * time.Second}
	if diff := cmp.Diff(want, p.Steps()); diff != "" {
		t.Errorf("Steps (-want +got):\n%s", diff)
	}
}

func TestParseDelays(t *testing.T) {
	tests := []struct {
		in      string
		want    []time.Duration
		wantErr bool
	}{
		{"500ms,5s,1m,5m", []time.Duration{500 * time.Millisecond, 5 * time.Second, time.Minute, 5 * time.Minute}, false},
		{" 200ms , 400ms ", []time.Duration{200 * time.Millisecond, 400 * time.Millisecond}, false},
		{"5", nil, true},
		{"1s,,2s", nil, true},
		{"-1s", nil, true},
		{"0s", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseDelays(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		name    string
		p       Policy
		wantErr bool
	}{
		{"zero", Policy{}, false},
		{"negative delay", Policy{Delays: []time.Duration{-time.Second}}, true},
		{"jitter too big", Policy{Jitter: 1.5}, true},
		{"multiplier shrinks", Policy{Initial: time.Second, Multiplier: 0.5}, true},
		{"negative max", Policy{MaxRetries: -1}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.p.Validate(); (err != nil) != tt.wantErr {
				t.Errorf("Validate() = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}
