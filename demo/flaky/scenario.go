package flaky

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
)

// Scenario names, the accepted values of FLAKY_EMAIL_SCENARIO and
// FLAKY_WEBHOOK_SCENARIO.
const (
	// Healthy accepts every attempt.
	Healthy = "healthy"
	// Flaky fails each attempt transiently with probability Rate.
	Flaky = "flaky"
	// Outage fails every attempt until Outage has passed since Start.
	Outage = "outage"
	// RateLimited turns away the first RateLimitAttempts attempts of every
	// id and asks the sender to wait RetryAfter.
	RateLimited = "rate-limited"
	// Slow accepts every attempt, but only after Latency.
	Slow = "slow"
	// Permanent refuses for good every target containing PermanentMatch and
	// accepts the rest.
	Permanent = "permanent"
	// Throttled accepts at most Limit messages in each second of the clock
	// and turns the rest away (SMTP 421, HTTP 429 with a Retry-After to
	// the next second), as a provider enforcing a rate limit does.
	Throttled = "throttled"
)

// ScenarioNames lists every scenario name in the order the documentation
// gives them.
var ScenarioNames = []string{Healthy, Flaky, Outage, RateLimited, Slow, Permanent, Throttled}

// Channel is the kind of downstream a scenario plays: it decides which
// status codes an outcome carries.
type Channel string

// The two channels flaky serves.
const (
	// Email answers with SMTP reply codes.
	Email Channel = "email"
	// Webhook answers with HTTP status codes.
	Webhook Channel = "webhook"
)

// Scenario describes how one channel misbehaves. Its zero value with a
// Channel set is Healthy.
type Scenario struct {
	// Name is one of ScenarioNames; empty means Healthy.
	Name string
	// Channel selects SMTP or HTTP codes.
	Channel Channel
	// Seed makes Flaky reproducible: the same seed, id and attempt number
	// always give the same outcome.
	Seed uint64
	// Rate is the probability, from 0 to 1, that a Flaky attempt fails.
	Rate float64
	// Start is when the Outage window opens, normally the process start.
	Start time.Time
	// Outage is how long the Outage window lasts.
	Outage time.Duration
	// Latency is how long Slow holds every answer back.
	Latency time.Duration
	// RetryAfter is the wait RateLimited asks for.
	RetryAfter time.Duration
	// RateLimitAttempts is how many attempts of each id RateLimited turns
	// away before it lets one through.
	RateLimitAttempts int
	// PermanentMatch is the substring that marks a recipient address or a
	// webhook path as refused for good under Permanent.
	PermanentMatch string
	// Limit is how many messages a second Throttled accepts; Window
	// counts them (nil: Throttled accepts everything).
	Limit  int
	Window *Window
}

// Window counts the messages accepted in the current second of the
// clock, for the Throttled scenario.
type Window struct {
	mu     sync.Mutex
	second int64
	n      int
}

// take counts one message at now if fewer than limit were accepted in
// now's second, and reports whether it did.
func (w *Window) take(now time.Time, limit int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := now.Unix(); s != w.second {
		w.second, w.n = s, 0
	}
	if w.n >= limit {
		return false
	}
	w.n++
	return true
}

// Outcome is the decision for one attempt.
type Outcome struct {
	// Accept is true when the attempt is delivered (after Delay).
	Accept bool
	// Code is the answer: an HTTP status for webhooks, an SMTP reply code
	// for email.
	Code int
	// Reason says why an attempt failed; empty when accepted.
	Reason string
	// RetryAfter is the wait the answer asks for; zero when none.
	RetryAfter time.Duration
	// Delay is how long to hold the answer back.
	Delay time.Duration
}

// Answer codes per channel.
const (
	httpOK          = 200
	httpGone        = 410
	httpTooMany     = 429
	httpUnavailable = 503
	// httpGatewayTimeout ends a hang that outlasted the sender.
	httpGatewayTimeout = 504

	smtpOK          = 250
	smtpRateLimited = 421
	smtpTransient   = 451
	smtpNoMailbox   = 550
)

// Decide returns the outcome of attempt number attempt (counting from 1) to
// deliver the message id to target (a recipient address for email, the
// request path for webhooks), at time now. A webhook path under one of
// EndpointPaths gets that path's outcome, whatever the scenario. It has no
// side effects, except that Throttled counts what it accepts: otherwise
// the same arguments always give the same outcome.
func (s Scenario) Decide(id string, attempt int, target string, now time.Time) Outcome {
	if s.Channel == Webhook {
		if o, ok := endpointOutcome(target); ok {
			return o
		}
	}
	ok := s.accept()
	switch s.Name {
	case Flaky:
		if draw(s.Seed, string(s.Channel)+"\x00"+id, attempt) < s.Rate {
			return s.transient(fmt.Sprintf("simulated transient failure (attempt %d)", attempt))
		}
	case Outage:
		if end := s.Start.Add(s.Outage); now.Before(end) {
			return s.transient(fmt.Sprintf("simulated outage until %s", end.UTC().Format(time.RFC3339)))
		}
	case RateLimited:
		if attempt <= s.RateLimitAttempts {
			code := httpTooMany
			if s.Channel == Email {
				code = smtpRateLimited
			}
			return Outcome{
				Code:       code,
				Reason:     fmt.Sprintf("rate limited, retry after %s seconds", retryAfterSeconds(s.RetryAfter)),
				RetryAfter: s.RetryAfter,
			}
		}
	case Slow:
		ok.Delay = s.Latency
	case Permanent:
		if s.Refuses(target) {
			code := httpGone
			if s.Channel == Email {
				code = smtpNoMailbox
			}
			return Outcome{Code: code, Reason: fmt.Sprintf("%s is refused for good", target)}
		}
	case Throttled:
		if s.Window != nil && !s.Window.take(now, s.Limit) {
			code := httpTooMany
			if s.Channel == Email {
				code = smtpRateLimited
			}
			next := now.Truncate(time.Second).Add(time.Second).Sub(now)
			return Outcome{Code: code, RetryAfter: next,
				Reason: fmt.Sprintf("over the limit of %d a second, retry after %s seconds", s.Limit, retryAfterSeconds(next))}
		}
	}
	return ok
}

// Refuses reports whether target is refused for good: the scenario is
// Permanent and target contains PermanentMatch.
func (s Scenario) Refuses(target string) bool {
	return s.Name == Permanent && s.PermanentMatch != "" && strings.Contains(target, s.PermanentMatch)
}

func (s Scenario) accept() Outcome {
	if s.Channel == Email {
		return Outcome{Accept: true, Code: smtpOK}
	}
	return Outcome{Accept: true, Code: httpOK}
}

func (s Scenario) transient(reason string) Outcome {
	if s.Channel == Email {
		return Outcome{Code: smtpTransient, Reason: reason}
	}
	return Outcome{Code: httpUnavailable, Reason: reason}
}

// draw returns a number in [0, 1) that depends only on seed, id and
// attempt, so a rerun with the same seed fails the same attempts.
func draw(seed uint64, id string, attempt int) float64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(attempt))
	h.Write(n[:])
	return rand.New(rand.NewPCG(seed, h.Sum64())).Float64()
}

// retryAfterSeconds renders d as whole seconds, rounded up and at least
// one, the form of an HTTP Retry-After header.
func retryAfterSeconds(d time.Duration) string {
	secs := int64((d + time.Second - 1) / time.Second)
	return fmt.Sprint(max(secs, 1))
}
