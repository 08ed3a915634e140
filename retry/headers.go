package retry

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Headers relay sets on the messages it moves through the pipeline. They are
// relay's own: the count is never read from x-death (see the package doc).
const (
	// HeaderRetryCount is how many retries the message has had so far.
	HeaderRetryCount = "x-retry-count"
	// HeaderOriginalQueue is the work queue the message failed on and goes
	// back to.
	HeaderOriginalQueue = "x-original-queue"
	// HeaderFirstFailedAt is when the message first failed (RFC 3339).
	HeaderFirstFailedAt = "x-first-failed-at"
	// HeaderLastError is the error text of the latest failure, where known.
	HeaderLastError = "x-last-error"
	// HeaderRetryAfter is the least delay, in milliseconds, a downstream
	// asked for before the next attempt.
	HeaderRetryAfter = "x-retry-after-ms"
	// HeaderNotBefore is the earliest time (Unix milliseconds) the message
	// may go back to its queue. Earlier relays set it when the TTL
	// backend's longest step was shorter than the wait a downstream asked
	// for; every backend now waits such a time exactly, and a message
	// that still carries one waits again until then, in bounded rounds
	// (MaxWaits).
	HeaderNotBefore = "x-retry-not-before"
	// HeaderDeadSource is the work queue a parked message came from; the
	// dead-letter exchange routes on it.
	HeaderDeadSource = "x-dead-source"
	// HeaderDeadReason says why a message was parked: one of the Reason
	// constants.
	HeaderDeadReason = "x-dead-reason"
	// HeaderParkedAt is when the message was parked (RFC 3339).
	HeaderParkedAt = "x-parked-at"
	// HeaderDelay is the delayed-message plugin's delay in milliseconds.
	HeaderDelay = "x-delay"
	// HeaderClaimedSource keeps, on a message parked as ReasonNoSource, the
	// queue it claimed to come from and the header that claimed it, for
	// forensics. relay never routes on it.
	HeaderClaimedSource = "x-claimed-source"
	// HeaderAttempts counts a message's deliveries to its handler in this
	// round: retries and deferrals both.
	HeaderAttempts = "x-attempts"
	// HeaderDeferrals counts the waits a downstream asked for that did not
	// spend a retry.
	HeaderDeferrals = "x-retry-deferrals"
	// HeaderReplays counts how often a parked message was replayed: the
	// round of retries it is in, 0 for the first.
	HeaderReplays = "x-replays"
	// HeaderWaits counts the extra rounds a message has waited for its
	// HeaderNotBefore. It is bounded: see MaxWaits.
	HeaderWaits = "x-retry-waits"
	// HeaderPriorRetries is, on a replayed message, the retries it had in
	// the rounds before this one, summed: a replay restarts
	// HeaderRetryCount, not the message's history.
	HeaderPriorRetries = "x-prior-retries"
	// HeaderPriorError is, on a replayed message, the last error of the
	// round that ended when it was parked.
	HeaderPriorError = "x-prior-error"
	// HeaderReadyAt is when (Unix milliseconds) the message is ready in
	// its work queue again: set when a retry is scheduled (the moment its
	// wait ends) and when it is replayed. The consumer reads it to tell
	// how long the message waited there (Event.Waited).
	HeaderReadyAt = "x-ready-at"
)

// MaxCopyLength bounds the value of a topology's CopyHeader: a longer
// value, or one that is not printable text, is not reported.
const MaxCopyLength = 1024

// Copy reads h's CopyHeader (see Topology.CopyHeader): empty when the
// topology names none, or the header is missing, too long or holds a
// control character.
func (t Topology) Copy(h amqp.Table) string { return printable(h, t.CopyHeader) }

// Tenant reads h's TenantHeader (see Topology.TenantHeader), as Copy reads
// CopyHeader: empty when the topology names none, or the header is
// missing, longer than MaxCopyLength or holds a control character.
func (t Topology) Tenant(h amqp.Table) string { return printable(h, t.TenantHeader) }

// printable is h's header name as text: empty when name is empty, or the
// header is missing, longer than MaxCopyLength, not UTF-8 or holds a
// control character, so an observer never reports what a producer
// garbled.
func printable(h amqp.Table, name string) string {
	if name == "" {
		return ""
	}
	r := headerString(h, name)
	if len(r) > MaxCopyLength || !utf8.ValidString(r) {
		return ""
	}
	for _, c := range r {
		if unicode.IsControl(c) {
			return ""
		}
	}
	return r
}

// pipelineHeaders are the headers relay writes to route, count and explain
// a message. On a message that a producer published to the ingress
// exchange, relay did not write them: the consumer drops them there, so no
// producer can steer a message's count or destination.
var pipelineHeaders = []string{
	HeaderRetryCount, HeaderOriginalQueue, HeaderFirstFailedAt, HeaderLastError, HeaderRetryAfter,
	HeaderNotBefore, HeaderWaits, HeaderDeadSource, HeaderDeadReason, HeaderParkedAt, HeaderClaimedSource,
	HeaderReplays, HeaderAttempts, HeaderDeferrals, HeaderPriorRetries, HeaderPriorError, HeaderReadyAt,
}

// attempts is how many deliveries a message has had in this round:
// HeaderAttempts, or for a message from before it, its retry count.
func attempts(h amqp.Table) int {
	n, ok := headerInt(h, HeaderAttempts)
	if !ok || n < 0 {
		return RetryCount(h)
	}
	return int(min(max(n, int64(RetryCount(h))), 1<<30))
}

// replays reads HeaderReplays; garbage counts as 0.
func replays(h amqp.Table) int {
	n, ok := headerInt(h, HeaderReplays)
	if !ok || n < 0 {
		return 0
	}
	return int(min(n, 1<<30))
}

// Reasons a message is parked, the values of HeaderDeadReason.
const (
	// ReasonMaxRetries: the last retry failed too.
	ReasonMaxRetries = "max-retries"
	// ReasonPermanent: the handler said no retry can help.
	ReasonPermanent = "permanent"
	// ReasonNoSource: the message names no queue to go back to, or one
	// that is not one of the topology's work queues.
	ReasonNoSource = "unknown-source"
	// ReasonNoQueue: the work queue it belongs to no longer exists.
	ReasonNoQueue = "queue-missing"
	// ReasonTooLarge: its headers leave no room for relay's in a frame.
	ReasonTooLarge = "headers-too-large"
	// ReasonDeadline: it failed past the policy's deadline.
	ReasonDeadline = "deadline-exceeded"
	// ReasonExpired: it was past its policy's expiry before an attempt, or
	// its next retry would have come back past it.
	ReasonExpired = "expired"
)

// headroom is the room a message's header frame must leave under the
// connection's frame size for relay's own headers and the broker's x-death.
const headroom = 4096

// headerFrameSize estimates the encoded size of a delivery's properties:
// the part of a message that must fit in one frame.
func headerFrameSize(d *amqp.Delivery) int {
	return 64 + len(d.ContentType) + len(d.ContentEncoding) + len(d.CorrelationId) + len(d.ReplyTo) +
		len(d.Expiration) + len(d.MessageId) + len(d.Type) + len(d.UserId) + len(d.AppId) + tableSize(d.Headers)
}

func tableSize(t amqp.Table) int {
	n := 4
	for k, v := range t {
		n += 2 + len(k) + valueSize(v)
	}
	return n
}

func valueSize(v any) int {
	switch x := v.(type) {
	case string:
		return 4 + len(x)
	case []byte:
		return 4 + len(x)
	case amqp.Table:
		return tableSize(x)
	case []any:
		n := 4
		for _, e := range x {
			n += 1 + valueSize(e)
		}
		return n
	default:
		return 9
	}
}

// smallHeaders keeps the headers of h that encode in under 256 bytes: what
// a message too large to carry relay's headers keeps when it is parked.
func smallHeaders(h amqp.Table) amqp.Table {
	out := amqp.Table{}
	for k, v := range h {
		if valueSize(v) < 256 {
			out[k] = v
		}
	}
	return out
}

// maxHeaderError bounds the error text carried in a header.
const maxHeaderError = 512

// headerInt reads an integer header in whichever AMQP integer type the
// publisher chose (or a decimal string). ok is false when the header is
// absent or not a number.
func headerInt(h amqp.Table, key string) (int64, bool) {
	switch v := h[key].(type) {
	case int8:
		return int64(v), true
	case int16:
		return int64(v), true
	case int32:
		return int64(v), true
	case int64:
		return v, true
	case int:
		return int64(v), true
	case uint8:
		return int64(v), true
	case uint16:
		return int64(v), true
	case uint32:
		return int64(v), true
	case uint64:
		if v > 1<<62 {
			return 0, false
		}
		return int64(v), true
	case float32:
		return int64(v), true
	case float64:
		return int64(v), true
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		return n, err == nil
	default:
		return 0, false
	}
}

func headerString(h amqp.Table, key string) string {
	switch v := h[key].(type) {
	case string:
		return v
	case []byte:
		return string(v)
	default:
		return ""
	}
}

// RetryCount reads HeaderRetryCount; a missing, garbled or negative header
// counts as zero retries.
func RetryCount(h amqp.Table) int {
	n, ok := headerInt(h, HeaderRetryCount)
	if !ok || n < 0 {
		return 0
	}
	return int(min(n, 1<<30))
}

// Claim finds the work queue a failed message says it failed on, and the
// header that says so. What the broker wrote when it dead-lettered the
// message comes first: the newest x-death entry (the broker puts the entry
// of the dead-lettering it just did at the head, on every version), then
// x-last-death-queue (3.13+). Then relay's HeaderOriginalQueue, which the
// consumer writes when it hands a failure over itself. x-first-death-queue
// is never read: RabbitMQ before 3.13 keeps a producer's value of it.
//
// Any of these can be forged by a client that publishes straight into
// error-queue or requeue-queue: the stages therefore send a message only to
// a queue that Topology.Destination accepts, whatever it claims.
func Claim(h amqp.Table) (queue, header string) {
	if deaths, ok := h["x-death"].([]any); ok && len(deaths) > 0 {
		if t, ok := deaths[0].(amqp.Table); ok {
			if q := headerString(t, "queue"); q != "" {
				return q, "x-death"
			}
		}
	}
	if q := headerString(h, "x-last-death-queue"); q != "" {
		return q, "x-last-death-queue"
	}
	if q := headerString(h, HeaderOriginalQueue); q != "" {
		return q, HeaderOriginalQueue
	}
	return "", ""
}

// brokerHeaders are set by the broker or the delay plugin for one hop and
// must not travel on when the message is published again.
var brokerHeaders = []string{
	"x-death", "x-first-death-queue", "x-first-death-reason", "x-first-death-exchange",
	"x-last-death-queue", "x-last-death-reason", "x-last-death-exchange", "x-delivery-count", "x-acquired-count",
	HeaderDelay, HeaderRetryAfter,
}

// Forward copies h without the headers the broker or the delay plugin set
// for one hop (x-death and its kin, x-delay, x-delivery-count), with room
// for a few more: the headers a message carries on when it is published
// again.
func Forward(h amqp.Table) amqp.Table {
	return without(h, brokerHeaders)
}

// without copies h without keys, with room for a few more.
func without(h amqp.Table, keys []string) amqp.Table {
	out := make(amqp.Table, len(h)+4)
	for k, v := range h {
		out[k] = v
	}
	for _, k := range keys {
		delete(out, k)
	}
	return out
}

// carriesAny reports whether h has any of keys.
func carriesAny(h amqp.Table, keys []string) bool {
	for _, k := range keys {
		if _, ok := h[k]; ok {
			return true
		}
	}
	return false
}

// deathReason is the reason of the newest x-death entry: why the broker
// last dead-lettered the message.
func deathReason(h amqp.Table) string {
	if deaths, ok := h["x-death"].([]any); ok && len(deaths) > 0 {
		if t, ok := deaths[0].(amqp.Table); ok {
			return headerString(t, "reason")
		}
	}
	return ""
}

// lastError is the failure text a message carries: relay's
// HeaderLastError, else, for a message the broker dead-lettered without
// one, what the broker recorded.
func lastError(h amqp.Table) string {
	if e := headerString(h, HeaderLastError); e != "" {
		return e
	}
	if deaths, ok := h["x-death"].([]any); ok && len(deaths) > 0 {
		if t, ok := deaths[0].(amqp.Table); ok {
			if r := headerString(t, "reason"); r != "" {
				return fmt.Sprintf("%s by %s (the error text was not recorded)", r, headerString(t, "queue"))
			}
		}
	}
	return ""
}

// clampDelay fits d into the plugin's x-delay range of 1..2^32-1 ms; the
// plugin treats 0 or a negative value as "deliver now" and rejects larger.
func clampDelay(d time.Duration) int64 {
	ms := d.Milliseconds()
	return min(max(ms, 1), 1<<32-1)
}

// truncate shortens s to at most n bytes without splitting a UTF-8 rune.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
