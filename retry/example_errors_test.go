package retry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/relay-demo/relay/retry"
)

// A handler says a failure is for good with Permanent: the message is
// parked in dead-letter-queue at once, with the error's text, instead of
// being retried. The mark survives wrapping, so a handler can add context
// with %w; any error with a Permanent() bool method that returns true is
// permanent too.
func ExamplePermanent() {
	handle := func(_ context.Context, m *retry.Message) error {
		if len(m.Body) == 0 {
			return fmt.Errorf("invoice %s: %w", m.ID, retry.Permanent(errors.New("empty body")))
		}
		return errors.New("billing service unavailable") // retried
	}
	for _, m := range []*retry.Message{{ID: "inv-1"}, {ID: "inv-2", Body: []byte("{}")}} {
		err := handle(context.Background(), m)
		fmt.Printf("%s: %v (permanent: %t)\n", m.ID, err, retry.IsPermanent(err))
	}
	fmt.Println(retry.Permanent(nil) == nil)
	// Output:
	// inv-1: invoice inv-1: empty body (permanent: true)
	// inv-2: billing service unavailable (permanent: false)
	// true
}

// A downstream that asks for a wait (an HTTP 429 or 503 with Retry-After)
// is honoured with After: the next attempt comes no sooner than asked,
// even when the policy's own delay is shorter; a wait longer than
// MaxRetryAfter is ignored. RetryAfter reads the wait back through any
// wrapping.
func ExampleAfter() {
	err := fmt.Errorf("send: %w", retry.After(errors.New("429 Too Many Requests"), 30*time.Second))
	wait, ok := retry.RetryAfter(err)
	fmt.Println(err, wait, ok)

	_, ok = retry.RetryAfter(errors.New("connection refused"))
	fmt.Println(ok)
	// Output:
	// send: 429 Too Many Requests 30s true
	// false
}
