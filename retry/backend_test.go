package retry

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"
)

func TestLevelRoute(t *testing.T) {
	topo := Topology{Routes: testRoutes, Prefix: "p.", Backend: Levels}
	tests := []struct {
		delay    time.Duration
		exchange string
		bits     string // the levels a message waits in, highest first
	}{
		{0, "p.wait.deliver", ""},
		{time.Millisecond, "p.wait.level.00", "00"},
		{137 * time.Millisecond, "p.wait.level.07", "07 03 00"}, // 128 + 8 + 1
		{1700 * time.Millisecond, "p.wait.level.10", "10 09 07 05 02"},
		{1700*time.Millisecond + 999*time.Microsecond, "p.wait.level.10", "10 09 07 05 02"}, // whole milliseconds
		{24 * 24 * time.Hour, "p.wait.level.30", ""},
		{MaxDelay, "p.wait.level.31", ""},
		{2 * MaxDelay, "p.wait.level.31", ""}, // clamped
		{-time.Second, "p.wait.deliver", ""},
	}
	for _, tt := range tests {
		t.Run(tt.delay.String(), func(t *testing.T) {
			ex, key := topo.levelRoute(tt.delay, "p.jobs")
			if ex != tt.exchange {
				t.Errorf("exchange = %s, want %s", ex, tt.exchange)
			}
			words := strings.Split(key, ".")
			if len(words) != levelCount+2 || strings.Join(words[levelCount:], ".") != "p.jobs" {
				t.Fatalf("key %q: want %d bit words, then the destination", key, levelCount)
			}
			var sum int64
			var set []string
			for i, w := range words[:levelCount] {
				k := levelCount - 1 - i
				if w == "1" {
					sum += 1 << k
					set = append(set, strings.TrimPrefix(topo.levelExchange(k), "p.wait.level."))
				}
			}
			if want := min(max(tt.delay.Milliseconds(), 0), 1<<32-1); sum != want {
				t.Errorf("the levels add up to %dms, want %dms", sum, want)
			}
			if tt.bits != "" && strings.Join(set, " ") != tt.bits {
				t.Errorf("levels %v, want %s", set, tt.bits)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	topo := Topology{Routes: testRoutes, Policy: Policy{Delays: []time.Duration{time.Second, 5 * time.Second}, Deferrals: 2, Deadline: time.Hour}}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		h     amqp.Table
		hint  time.Duration
		start time.Time
		want  decision
	}{
		{"first failure", amqp.Table{}, 0, now, decision{retries: 1, attempts: 1, delay: time.Second}},
		{"second failure", amqp.Table{HeaderRetryCount: int32(1), HeaderAttempts: int32(1)}, 0, now, decision{retries: 2, attempts: 2, delay: 5 * time.Second}},
		{"last retry spent", amqp.Table{HeaderRetryCount: int32(2), HeaderAttempts: int32(2)}, 0, now, decision{park: ReasonMaxRetries, retries: 2, attempts: 3}},
		{"a hint spends no retry", amqp.Table{HeaderRetryCount: int32(1), HeaderAttempts: int32(1)}, 30 * time.Second, now,
			decision{retries: 1, attempts: 2, deferrals: 1, delay: 30 * time.Second, deferred: true}},
		{"the deferral budget spent: the hint spends a retry", amqp.Table{HeaderDeferrals: int32(2)}, 30 * time.Second, now,
			decision{retries: 1, attempts: 1, deferrals: 2, delay: 30 * time.Second}},
		{"a hint beyond any sense is ignored", amqp.Table{}, 100 * time.Hour, now, decision{retries: 1, attempts: 1, delay: time.Second}},
		{"past the deadline", amqp.Table{}, 0, now.Add(-2 * time.Hour), decision{park: ReasonDeadline, attempts: 1}},
		{"a forged count is clamped", amqp.Table{HeaderRetryCount: int64(1) << 40}, 0, now, decision{park: ReasonMaxRetries, retries: 2, attempts: 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, topo.decide(tt.h, tt.hint, tt.start, now), cmp.AllowUnexported(decision{})); diff != "" {
				t.Errorf("decide (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateBackend(t *testing.T) {
	tests := []struct {
		name string
		topo Topology
		want error
	}{
		{"levels", Topology{Routes: testRoutes, Backend: Levels}, nil},
		{"a delay beyond 2^32-1 ms", Topology{Routes: testRoutes, Backend: Levels, Policy: Policy{Delays: []time.Duration{60 * 24 * time.Hour}}}, ErrDelayTooLong},
		{"native linear", Topology{Routes: testRoutes, Backend: Native, QueueType: Quorum, Policy: Policy{Delays: []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second}}}, nil},
		{"native not linear", Topology{Routes: testRoutes, Backend: Native, QueueType: Quorum, Policy: Policy{Delays: []time.Duration{time.Second, 5 * time.Second}}}, ErrNotLinear},
		{"native on classic queues", Topology{Routes: testRoutes, Backend: Native, Policy: Policy{Delays: []time.Duration{time.Second}}}, errors.New("quorum")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.topo.Validate()
			switch {
			case tt.want == nil && err != nil:
				t.Errorf("Validate = %v", err)
			case tt.want != nil && err == nil:
				t.Errorf("Validate = nil, want %v", tt.want)
			case tt.want != nil && !errors.Is(err, tt.want) && !strings.Contains(err.Error(), tt.want.Error()):
				t.Errorf("Validate = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestLevelsPlan(t *testing.T) {
	p := Topology{Prefix: "p.", Backend: Levels, Handoff: Direct, Routes: []Route{{Queue: "jobs", Key: "job"}}}.Plan()
	levels := 0
	for _, q := range p.Queues {
		if strings.HasPrefix(q.Name, "p.wait.level.") {
			levels++
		}
		if q.Name == "p.requeue-queue" {
			t.Error("a direct hand-off declares requeue-queue")
		}
	}
	if levels != levelCount {
		t.Errorf("%d level queues, want %d", levels, levelCount)
	}
	var toExchange, deliver int
	for _, b := range p.Bindings {
		if b.ToExchange != "" {
			toExchange++
		}
		if b.Exchange == "p.wait.deliver" && b.Queue == "p.jobs" {
			deliver++
		}
	}
	if toExchange != levelCount || deliver != 1 {
		t.Errorf("%d exchange-to-exchange bindings (want %d), %d deliver bindings to p.jobs (want 1)", toExchange, levelCount, deliver)
	}
}

// TestUnknownExchangeType reads each broker's refusal of an unknown
// exchange type as "no plugin", and nothing else as one.
func TestUnknownExchangeType(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"3.10: command invalid", &amqp.Error{Code: amqp.CommandInvalid, Reason: "COMMAND_INVALID - unknown exchange type 'x-delayed-message'"}, true},
		{"not found", &amqp.Error{Code: amqp.NotFound, Reason: "NOT_FOUND"}, true},
		{"4.x: precondition failed", &amqp.Error{Code: amqp.PreconditionFailed, Reason: "PRECONDITION_FAILED - unknown exchange type 'x-delayed-message'"}, true},
		{"406 about something else", &amqp.Error{Code: amqp.PreconditionFailed, Reason: "PRECONDITION_FAILED - inequivalent arg 'durable'"}, false},
		{"access refused", &amqp.Error{Code: amqp.AccessRefused, Reason: "ACCESS_REFUSED"}, false},
		{"wrapped", fmt.Errorf("declare: %w", &amqp.Error{Code: amqp.PreconditionFailed, Reason: "PRECONDITION_FAILED - unknown exchange type 'x-delayed-message'"}), true},
		{"not an AMQP error", errors.New("connection reset"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := unknownExchangeType(tt.err); got != tt.want {
				t.Errorf("unknownExchangeType(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// TestEveryBackendWaitsExactly: every backend routes any wait, to the
// millisecond, to a place that holds it exactly that long: the plugin's
// x-delay, the bits of the levels' routing key, or a TTL step only when
// the wait is that very step. A wait rounded up to a step would bring a
// rate-limited copy back after its slot.
func TestEveryBackendWaitsExactly(t *testing.T) {
	policy := Policy{Delays: []time.Duration{300 * time.Millisecond, 600 * time.Millisecond, 900 * time.Millisecond}}
	delays := []time.Duration{0, time.Millisecond, 299 * time.Millisecond, 300 * time.Millisecond, 700 * time.Millisecond,
		900 * time.Millisecond, 1234 * time.Millisecond, 61 * time.Second, 26 * time.Hour, MaxDelay}
	for _, b := range Backends() {
		for _, h := range []Handoff{ViaStages, Direct} {
			topo := Topology{Prefix: "p.", Routes: testRoutes, Backend: b, Handoff: h, QueueType: mustFeatures(t, b).Durable(), Policy: policy}
			if err := topo.Validate(); err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			dest := topo.waitDestinations()[0]
			for _, d := range delays {
				r := topo.delayer().route(topo, dest, d)
				var held time.Duration
				switch {
				case r.headers[HeaderDelay] != nil:
					held = time.Duration(r.headers[HeaderDelay].(int64)) * time.Millisecond
				case strings.HasPrefix(r.exchange, "p.wait.level.") || r.exchange == topo.deliverExchange():
					words := strings.Split(r.key, ".")
					for i, w := range words[:levelCount] {
						if w == "1" {
							held += time.Duration(1<<(levelCount-1-i)) * time.Millisecond
						}
					}
					if got := strings.Join(words[levelCount:], "."); got != dest {
						t.Errorf("%s: a wait of %s ends in %s, want %s", b, d, got, dest)
					}
				default:
					for _, q := range topo.Plan().Queues {
						if q.Name == topo.WaitQueue(d) || q.Name == topo.directWaitQueue(d, dest) {
							held = time.Duration(q.Args["x-message-ttl"].(int64)) * time.Millisecond
						}
					}
				}
				// The plugin holds at least 1 ms (x-delay 0 is clamped).
				if r.wait != d || held != d && !(b == Plugin && d == 0 && held == time.Millisecond) {
					t.Errorf("%s/%s: a wait of %s is held %s (reported %s)", b, h, d, held, r.wait)
				}
			}
		}
	}
}

// TestValidateRefusesWhatTheBackendCannotDo: a setting a backend's
// features do not cover is refused, with the setting and the backend
// named, never silently degraded.
func TestValidateRefusesWhatTheBackendCannotDo(t *testing.T) {
	linear := Policy{Delays: []time.Duration{time.Second, 2 * time.Second}}
	tests := []struct {
		name string
		topo Topology
		want string
	}{
		{"native on classic queues", Topology{Routes: testRoutes, Backend: Native, QueueType: Classic, Policy: linear}, "quorum"},
		{"the plugin on quorum queues", Topology{Routes: testRoutes, Backend: Plugin, QueueType: Quorum, Policy: linear}, "runs with classic queues, not quorum: its waits sit in the plugin's store"},
		{"native with jitter", Topology{Routes: testRoutes, Backend: Native, QueueType: Quorum, Policy: Policy{Delays: linear.Delays, Jitter: 0.2}}, "jitter 0.2 is set, but the native delay backend"},
		{"native with a schedule it cannot follow", Topology{Routes: testRoutes, Backend: Native, QueueType: Quorum, Policy: Policy{Delays: []time.Duration{time.Second, 5 * time.Second}}}, "min(first × attempt, last)"},
		{"an unknown backend", Topology{Routes: testRoutes, Backend: "carrier-pigeon", Policy: linear}, `delay backend "carrier-pigeon"`},
		{"auto, unresolved", Topology{Routes: testRoutes, Backend: Auto, Policy: linear}, "resolved against the broker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.topo.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate = %v, want an error saying %q", err, tt.want)
			}
		})
	}
	for _, b := range Backends() {
		f, err := FeaturesOf(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []QueueType{Classic, Quorum} {
			for _, h := range []Handoff{ViaStages, Direct} {
				topo := Topology{Routes: testRoutes, Backend: b, QueueType: q, Handoff: h, Policy: linear}
				if err := topo.Validate(); (err == nil) != f.Supports(q, h) {
					t.Errorf("%s/%s/%s: Validate = %v, but Supports = %v", b, q, h, err, f.Supports(q, h))
				}
			}
		}
	}
}

// TestHandedHint: the error stage waits until the moment the worker
// reckoned, not the hint again from its own clock, and never longer than
// the hint.
func TestHandedHint(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	ms := func(t time.Time) int64 { return t.UnixMilli() }
	tests := []struct {
		name string
		h    amqp.Table
		want time.Duration
	}{
		{"no hint", amqp.Table{}, 0},
		{"a hint alone: from now", amqp.Table{HeaderRetryAfter: int64(1500)}, 1500 * time.Millisecond},
		{"sat 600ms in error-queue: the rest", amqp.Table{HeaderRetryAfter: int64(1500), HeaderNotBefore: ms(now.Add(900 * time.Millisecond))}, 900 * time.Millisecond},
		{"the moment passed: at once, still a deferral", amqp.Table{HeaderRetryAfter: int64(1500), HeaderNotBefore: ms(now.Add(-time.Second))}, time.Millisecond},
		{"a not-before past the hint: the hint", amqp.Table{HeaderRetryAfter: int64(1500), HeaderNotBefore: ms(now.Add(time.Hour))}, 1500 * time.Millisecond},
		{"a not-before without a hint: none", amqp.Table{HeaderNotBefore: ms(now.Add(time.Second))}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := handedHint(tt.h, now); got != tt.want {
				t.Errorf("handedHint = %s, want %s", got, tt.want)
			}
		})
	}
}

func mustFeatures(t *testing.T, b Backend) Features {
	t.Helper()
	f, err := FeaturesOf(b)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
