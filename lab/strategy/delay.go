package strategy

import (
	"strconv"
	"time"

	"github.com/relay-demo/relay/retry"
)

// retryDelay is a wait the broker enforces with a TTL, in whole
// milliseconds, at least one: a TTL of zero would expire at once or never.
type retryDelay time.Duration

func (r retryDelay) ms() int64 { return max(time.Duration(r).Milliseconds(), 1) }

func (r retryDelay) d() time.Duration { return time.Duration(r.ms()) * time.Millisecond }

func (r retryDelay) String() string { return retry.StepName(r.d()) }

// Expiration is the per-message TTL before retry n (from 1) with a base
// delay: base × n, in the decimal milliseconds the expiration property
// takes.
func Expiration(base time.Duration, n int) string {
	return strconv.FormatInt(retryDelay(base).ms()*int64(max(n, 1)), 10)
}

// Parks reports whether a failure, counted cumulatively over the message's
// whole life, ends a cycle: count % limit == 0. A message replayed from the
// dead-letter queue keeps its count, so its next limit failures make a
// fresh cycle. A limit below 1 counts as 1.
func Parks(count, limit int) bool {
	limit = max(limit, 1)
	return count > 0 && count%limit == 0
}
