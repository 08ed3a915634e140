package retry

import (
	"math/rand/v2"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// decision is what happens after a failed attempt.
type decision struct {
	// park is the reason to park the message, or "" to retry it.
	park string
	// delay is the wait before the next attempt.
	delay time.Duration
	// retries, attempts and deferrals are the counts the next copy
	// carries.
	retries, attempts, deferrals int
	// deferred is a wait a downstream asked for, which spends no retry.
	deferred bool
}

// decide is the retry decision, in one place for the error stage and for a
// consumer with a direct hand-off. h are the failed message's headers, hint
// the wait the downstream asked for (0: none), start when the message was
// first published. A hint within the deferral budget waits without
// spending a retry; past the deadline, or past the last retry, the message
// is parked; otherwise it waits the policy's delay for the next retry (or
// the hint, if longer). A wait that would end past the policy's expiry
// parks the message as expired at once. The policy is the message's
// type's (Topology.PolicyOf).
func (t Topology) decide(h amqp.Table, hint time.Duration, start, now time.Time) decision {
	return t.decideCounts(t.countsOf(h), hint, start, now)
}

// counts are a delivery's counts, read from its headers once.
type counts struct {
	// retries, attempts and deferrals are what the message has had so
	// far, bounded by the policy.
	retries, attempts, deferrals int
	// rejected is, on a backend whose work queues wait themselves, the
	// rejects the broker counted since the message was last published
	// (x-delivery-count): retries relay's headers do not know of.
	rejected int
	// policy is the policy of the message's type.
	policy Policy
}

// countsOf reads h's counts. On a backend whose work queue waits a
// rejected message (Native), the broker's x-delivery-count adds the
// retries it waited since relay last published the message.
func (t Topology) countsOf(h amqp.Table) counts {
	p := t.PolicyOf(h)
	c := counts{
		policy:    p,
		retries:   RetryCount(h),
		attempts:  attempts(h),
		deferrals: min(max(headerIntOr(h, HeaderDeferrals), 0), 1<<20),
	}
	if t.waitsInQueue() {
		c.rejected = min(max(headerIntOr(h, "x-delivery-count"), 0), 1<<20)
		c.retries += c.rejected
		c.attempts += c.rejected
	}
	c.retries = min(c.retries, p.Retries())
	c.attempts = min(c.attempts, p.Retries()+p.deferrals())
	return c
}

// decideCounts is decide for counts read already.
func (t Topology) decideCounts(c counts, hint time.Duration, start, now time.Time) decision {
	p := c.policy
	d := decision{retries: c.retries, attempts: c.attempts + 1, deferrals: c.deferrals}
	if hint < 0 || hint > MaxRetryAfter {
		hint = 0 // a garbled hint must not hold a message back
	}
	switch {
	case p.deadline() > 0 && !start.IsZero() && now.Sub(start) > p.deadline():
		d.park = ReasonDeadline
	case p.expired(start, now):
		d.park = ReasonExpired
	case hint > 0 && d.deferrals < p.deferrals():
		d.delay, d.deferred = hint, true
		d.deferrals++
	case d.retries >= p.Retries():
		d.park = ReasonMaxRetries
	default:
		d.retries++
		d.delay = max(p.Jittered(p.Delay(d.retries), rand.Float64()), hint)
	}
	if d.park == "" && p.expired(start, now.Add(d.delay)) {
		// It would come back too late to be of use: park it now rather
		// than let it wait for nothing.
		d = decision{park: ReasonExpired, retries: c.retries, attempts: c.attempts + 1, deferrals: c.deferrals}
	}
	return d
}

// attempts is how many deliveries a message has had in this round, as its
// headers say, bounded by what the policy allows: a forged count cannot
// make the numbers absurd.
func (t Topology) attempts(h amqp.Table) int {
	p := t.PolicyOf(h)
	return min(attempts(h), p.Retries()+p.deferrals())
}

// headerIntOr reads an integer header, 0 when absent or garbled.
func headerIntOr(h amqp.Table, key string) int {
	n, _ := headerInt(h, key)
	return int(min(max(n, -1<<30), 1<<30))
}

// started is when a message was first published: its timestamp, else
// when it first failed.
func started(d *amqp.Delivery) time.Time {
	if !d.Timestamp.IsZero() {
		return d.Timestamp
	}
	at, _ := time.Parse(time.RFC3339Nano, headerString(d.Headers, HeaderFirstFailedAt))
	return at
}

// retryHeaders are the headers of the copy a decision sends to wait.
func retryHeaders(d *amqp.Delivery, dec decision, source, lastErr string, now time.Time) amqp.Table {
	h := Forward(d.Headers)
	delete(h, HeaderNotBefore)
	delete(h, HeaderWaits)
	h[HeaderRetryCount] = int32(dec.retries)
	h[HeaderAttempts] = int32(dec.attempts)
	h[HeaderDeferrals] = int32(dec.deferrals)
	h[HeaderOriginalQueue] = source
	if lastErr != "" {
		h[HeaderLastError] = truncate(lastErr, maxHeaderError)
	}
	if _, ok := h[HeaderFirstFailedAt]; !ok {
		h[HeaderFirstFailedAt] = now.UTC().Format(time.RFC3339Nano)
	}
	return h
}
