package retry

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// DefaultDelays is the schedule a zero Policy uses: four retries, each
// waiting longer than the last, spanning about six minutes.
var DefaultDelays = []time.Duration{500 * time.Millisecond, 5 * time.Second, time.Minute, 5 * time.Minute}

// Policy decides how often a failed message is retried and how long it
// waits before each retry. Its zero value means DefaultDelays.
//
// A Policy is either an explicit schedule (Delays) or exponential (Initial,
// Multiplier, Cap). An explicit schedule wins when both are set.
type Policy struct {
	// Delays is the wait before retry 1, 2, ... If MaxRetries is larger than
	// len(Delays), the last delay repeats.
	Delays []time.Duration
	// MaxRetries is how many retries a message gets before it is parked.
	// Zero means len(Delays) for a schedule, 5 for exponential backoff.
	MaxRetries int

	// Initial is the first delay of exponential backoff.
	Initial time.Duration
	// Multiplier grows each delay from the one before; zero means 2.
	Multiplier float64
	// Cap bounds every exponential delay; zero means no bound.
	Cap time.Duration
	// Jitter spreads each delay uniformly over ±Jitter×delay (0 ≤ Jitter ≤
	// 1), so messages that failed together do not come back together. The
	// plugin and levels backends honour it; a TTL wait queue has one fixed
	// delay, and the native backend its own schedule.
	Jitter float64

	// Deferrals is how often a message may wait as a downstream asked
	// (Retry-After, "try later") without spending a retry; zero means
	// DefaultDeferrals, a negative number none.
	Deferrals int
	// Deadline bounds a message's whole life from its first publish: past
	// it, a failure parks it as deadline-exceeded whatever its count. Zero
	// means DefaultDeadline, a negative number none.
	Deadline time.Duration
	// Expiry bounds how late a message may still be attempted, counted
	// from its first publish like Deadline: past it, the message is parked
	// as expired before it is attempted, and a failure whose next retry
	// would come back past it is parked as expired at once. A one-time
	// code ten minutes old is worse than none. Zero means none.
	Expiry time.Duration
}

// DefaultDeferrals and DefaultDeadline are what a zero Policy allows.
const (
	DefaultDeferrals = 10
	DefaultDeadline  = 24 * time.Hour
)

// deferrals is the deferral budget.
func (p Policy) deferrals() int {
	switch {
	case p.Deferrals < 0:
		return 0
	case p.Deferrals == 0:
		return DefaultDeferrals
	}
	return p.Deferrals
}

// deadline is the deadline, zero for none.
func (p Policy) deadline() time.Duration {
	switch {
	case p.Deadline < 0:
		return 0
	case p.Deadline == 0:
		return DefaultDeadline
	}
	return p.Deadline
}

// expired reports whether a message first published at start is past the
// policy's expiry at now. A message whose start is unknown never expires.
func (p Policy) expired(start, now time.Time) bool {
	return p.Expiry > 0 && !start.IsZero() && now.Sub(start) > p.Expiry
}

// exponential reports whether p describes exponential backoff.
func (p Policy) exponential() bool { return len(p.Delays) == 0 && p.Initial > 0 }

func (p Policy) multiplier() float64 {
	if p.Multiplier <= 0 {
		return 2
	}
	return p.Multiplier
}

// Retries is the number of retries before a message is parked.
func (p Policy) Retries() int {
	switch {
	case p.MaxRetries > 0:
		return p.MaxRetries
	case p.exponential():
		return 5
	case len(p.Delays) > 0:
		return len(p.Delays)
	default:
		return len(DefaultDelays)
	}
}

// Delay is the wait before retry n (1 for the first retry), without jitter.
// It is a pure function of the policy and n; n below 1 counts as 1.
func (p Policy) Delay(n int) time.Duration {
	n = max(n, 1)
	if p.exponential() {
		d := float64(p.Initial) * math.Pow(p.multiplier(), float64(n-1))
		if p.Cap > 0 && d > float64(p.Cap) {
			return p.Cap
		}
		if d > float64(math.MaxInt64) {
			return time.Duration(math.MaxInt64)
		}
		return time.Duration(d)
	}
	delays := p.Delays
	if len(delays) == 0 {
		delays = DefaultDelays
	}
	return delays[min(n, len(delays))-1]
}

// Jittered spreads d by the policy's Jitter using u, a uniform number in
// [0, 1): u = 0.5 leaves d as it is. The result is never below 1ms.
func (p Policy) Jittered(d time.Duration, u float64) time.Duration {
	j := min(max(p.Jitter, 0), 1)
	if j == 0 {
		return d
	}
	out := time.Duration(float64(d) * (1 - j + 2*j*u))
	return max(out, time.Millisecond)
}

// Steps lists the distinct delays the policy can produce without jitter, in
// ascending order: the wait queues the TTL backend declares.
func (p Policy) Steps() []time.Duration {
	var steps []time.Duration
	for n := 1; n <= p.Retries(); n++ {
		d := p.Delay(n)
		if !slices.Contains(steps, d) {
			steps = append(steps, d)
		}
	}
	slices.Sort(steps)
	return steps
}

// Validate reports a policy that cannot work: negative delays, a jitter
// outside [0, 1], a multiplier below 1.
func (p Policy) Validate() error {
	for i, d := range p.Delays {
		if d <= 0 {
			return fmt.Errorf("retry delay %d is %s: every delay must be positive", i+1, d)
		}
	}
	if p.MaxRetries < 0 {
		return fmt.Errorf("max retries is %d: must be zero (default) or more", p.MaxRetries)
	}
	if p.Initial < 0 || p.Cap < 0 {
		return fmt.Errorf("exponential initial %s and cap %s must not be negative", p.Initial, p.Cap)
	}
	if p.Multiplier != 0 && p.Multiplier < 1 {
		return fmt.Errorf("multiplier %g must be 1 or more", p.Multiplier)
	}
	if p.Jitter < 0 || p.Jitter > 1 {
		return fmt.Errorf("jitter %g must be between 0 and 1", p.Jitter)
	}
	if p.Expiry < 0 {
		return fmt.Errorf("expiry is %s: must be zero (none) or positive", p.Expiry)
	}
	return nil
}

// ParseDelays reads a comma-separated schedule such as "500ms,5s,1m,5m".
func ParseDelays(s string) ([]time.Duration, error) {
	var out []time.Duration
	for i, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		d, err := time.ParseDuration(f)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("delay %d %q: want a positive Go duration such as 500ms, 5s or 1m", i+1, f)
		}
		out = append(out, d)
	}
	return out, nil
}

// String renders the policy the way a log line should show it.
func (p Policy) String() string {
	if p.exponential() {
		return fmt.Sprintf("exponential(initial=%s, multiplier=%g, cap=%s, jitter=%g, retries=%d)",
			p.Initial, p.multiplier(), p.Cap, p.Jitter, p.Retries())
	}
	parts := make([]string, 0, p.Retries())
	for n := 1; n <= p.Retries(); n++ {
		parts = append(parts, p.Delay(n).String())
	}
	return "schedule(" + strings.Join(parts, ",") + ")"
}
