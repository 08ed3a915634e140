//go:build integration

package worker_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// TestProviderRotationOnNative: with two mail servers that both fail, each
// retry starts with the next server, on RabbitMQ 4.3's native delayed
// retry too, where the broker, not relay's header, counts the retries of
// a rejected message.
func TestProviderRotationOnNative(t *testing.T) {
	url := retrytest.NativeURL(t)
	primary, secondary := newMailServer(t), newMailServer(t)
	never := time.Now().Add(time.Hour)
	primary.down(never)
	secondary.down(never)
	s := startProviders(t, 1, twoServers(primary, secondary, map[string]string{
		"AMQP_URL": url, "MANAGEMENT_URL": "off", "DELAY_BACKEND": "native", "QUEUE_TYPE": "quorum",
		"RETRY_DELAYS": "200ms,400ms,600ms", "RETRY_MAX": "3",
		// No circuit opens: every attempt reaches the server it starts with.
		"SMTP_BREAKER_FAILURES": "100",
	}))
	id := s.sendEmails(t, 1, func(int) string { return "ada@example.com" }, 0)[0]
	retrytest.Eventually(t, 30*time.Second, func() bool { return len(s.parked(t)) == 1 },
		"the email was not parked after its retries")
	var order []string
	retrytest.Eventually(t, 10*time.Second, func() bool {
		order = order[:0]
		var evs []notification.Event
		for _, ev := range append(s.attempts(retry.Failed), s.attempts(retry.Parked)...) {
			if ev.ID == id {
				evs = append(evs, ev)
			}
		}
		slices.SortFunc(evs, func(a, b notification.Event) int { return a.Attempt - b.Attempt })
		for _, ev := range evs {
			order = append(order, ev.Provider)
		}
		return len(order) == 4
	}, "want the events of 4 attempts, got %v", &order)
	if want := []string{"primary", "secondary", "primary", "secondary"}; !slices.Equal(order, want) {
		t.Errorf("the attempts started with %s, want %s: each retry starts with the next server",
			strings.Join(order, ", "), strings.Join(want, ", "))
	}
	primary.mu.Lock()
	p := primary.sessions
	primary.mu.Unlock()
	secondary.mu.Lock()
	q := secondary.sessions
	secondary.mu.Unlock()
	if p == 0 || q == 0 {
		t.Errorf("connections: primary %d, secondary %d; want both tried", p, q)
	}
	if d := s.parked(t)[0]; d.Reason != retry.ReasonMaxRetries || d.Retries != 3 {
		t.Errorf("parked as %s after %d retries, want %s after 3", d.Reason, d.Retries, retry.ReasonMaxRetries)
	}
}
