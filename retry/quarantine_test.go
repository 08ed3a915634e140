package retry

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestQuarantineRemembers follows a queue's suspicion through the ways a
// consumer can end. An oversized message often closes the connection
// without the frame error reaching the consumer: a loss with no reason
// counts as well, and no reconnect forgets the suspicion until a consumer
// gets past its careful window.
func TestQuarantineRemembers(t *testing.T) {
	const queue, window = "q", 8
	lost := fmt.Errorf("%w: consuming %q", ErrConnectionLost, queue)
	tooLarge := fmt.Errorf("%w: consuming %q: %w", ErrConnectionLost, queue, amqp.ErrFrameTooLarge)
	restart := fmt.Errorf("%w: consuming %q: %w", ErrConnectionLost, queue,
		&amqp.Error{Code: amqp.ConnectionForced, Reason: "CONNECTION_FORCED - broker forced connection closure", Server: true})
	type end struct {
		err        error
		wasCareful bool
	}
	tests := []struct {
		name string
		ends []end
		want suspicion
	}{
		{"a clean end", []end{{nil, false}}, clear},
		{"a broker restart", []end{{restart, false}}, clear},
		{"the frame error", []end{{tooLarge, false}}, careful},
		{"a loss with no reason", []end{{lost, false}}, careful},
		{"a loss with no reason while careful", []end{{lost, false}, {lost, true}}, move},
		{"the frame error, then a loss with no reason", []end{{tooLarge, false}, {lost, true}}, move},
		{"a restart while careful keeps the suspicion", []end{{lost, false}, {restart, true}}, careful},
		{"past the careful window", []end{{lost, false}, {restart, false}}, clear},
		{"a clean end while careful", []end{{lost, false}, {nil, true}}, clear},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newQuarantine(nil, Topology{}, slog.New(slog.DiscardHandler))
			for _, e := range tt.ends {
				// A reconnect between two ends: the check must not
				// forget.
				q.check(context.Background(), nil, queue, window)
				q.observe(queue, e.err, e.wasCareful)
			}
			if got := q.state[queue]; got != tt.want {
				t.Errorf("suspicion %d, want %d", got, tt.want)
			}
		})
	}
}

// TestQuarantineStaysCareful: after the head is moved aside, the next
// connection consumes carefully, and so does every one after it until a
// consumer gets past its window: five oversized messages in a row are
// found one after the other.
func TestQuarantineStaysCareful(t *testing.T) {
	const queue, window = "q", 8
	lost := fmt.Errorf("%w: consuming %q", ErrConnectionLost, queue)
	q := newQuarantine(nil, Topology{}, slog.New(slog.DiscardHandler))
	q.observe(queue, lost, false)
	for i := range 5 {
		if got := q.check(context.Background(), nil, queue, window); got != window {
			t.Fatalf("connection %d: careful for %d deliveries, want %d", i, got, window)
		}
		q.observe(queue, lost, true)
		if q.state[queue] != move {
			t.Fatalf("connection %d: suspicion %d, want move", i, q.state[queue])
		}
	}
	if got := q.check(context.Background(), nil, queue, window); got != window {
		t.Errorf("after a move: careful for %d deliveries, want %d", got, window)
	}
	q.observe(queue, nil, false)
	if got := q.check(context.Background(), nil, queue, window); got != 0 {
		t.Errorf("after a consumer got past its window: careful for %d deliveries, want 0", got)
	}
}

// TestQuarantineStalled: without the management API, a culprit at the head
// of the queue cannot be moved; Stalled says so, with the fix, until a
// consumer gets past its careful window.
func TestQuarantineStalled(t *testing.T) {
	const queue, window = "q", 8
	lost := fmt.Errorf("%w: consuming %q", ErrConnectionLost, queue)
	g := NewQuarantine(nil, Topology{}, nil)
	g.Observe(queue, lost, false)
	g.Check(context.Background(), nil, queue, window)
	if err := g.Stalled(queue); err != nil {
		t.Errorf("Stalled after one loss = %v, want nil: the culprit is not known to be at the head yet", err)
	}
	g.Observe(queue, lost, true)
	g.Check(context.Background(), nil, queue, window)
	if err := g.Stalled(queue); err == nil || !strings.Contains(err.Error(), "MANAGEMENT_URL") {
		t.Errorf("Stalled with the culprit at the head = %v, want the fix", err)
	}
	if err := g.Stalled("other"); err != nil {
		t.Errorf("Stalled(another queue) = %v", err)
	}
	g.Observe(queue, nil, false)
	if err := g.Stalled(queue); err != nil {
		t.Errorf("Stalled once a consumer got past its window = %v, want nil", err)
	}
}
